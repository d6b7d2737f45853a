/**
 * The `addTools` control (spec §7.3 ToolControl, §8.5): the tool round's closing commit adds the
 * names to the conversation's stored `pi.agent` tools filter, and the next preparation offers them.
 * An exact list gains the name (once), a `{ remove }` list loses it, no filter writes nothing.
 */
import { fauxAssistantMessage, fauxToolCall } from "@mariozechner/pi-ai";
import { Type } from "typebox";
import { expect, test } from "vitest";
import type { AgentState } from "../../../worker/agent/records.ts";
import { DOC, defineTool } from "../../../worker/index.ts";
import type { FauxResponder } from "../../../worker/testing.ts";
import { open } from "./fixtures.ts";

const plain = (name: string) =>
  defineTool({
    name,
    description: `the ${name} tool`,
    parameters: Type.Object({}),
    execute: async () => ({ content: [{ type: "text", text: `${name} ran` }] }),
  });

/** `unlock` asks for `secret` (twice in one result: added once). */
const unlock = defineTool({
  name: "unlock",
  description: "makes the secret tool available",
  parameters: Type.Object({}),
  execute: async () => ({
    content: [{ type: "text", text: "unlocked" }],
    control: { addTools: ["secret", "secret"] },
  }),
});

/** Calls unlock, then answers. */
const unlockThenAnswer: FauxResponder = (req) =>
  req.messages.some((m) => m.role === "toolResult")
    ? fauxAssistantMessage("done")
    : fauxAssistantMessage([fauxToolCall("unlock", {}, { id: "c1" })], { stopReason: "toolUse" });

async function run(agent: AgentState) {
  const setup = await open(unlockThenAnswer, {
    tools: [unlock, plain("secret"), plain("other")],
    root: { agent },
  });
  const root = setup.root;
  expect((await (await root.submit({ type: "input", content: "go" })).wait()).status).toBe("done");
  return { ...setup, agent: setup.h.docNow(root.id, DOC.agent) as AgentState };
}

test("addTools appends the name to an exact tools list once; the next request offers it", async () => {
  const { agent, faux } = await run({ tools: ["unlock"] });
  expect(agent.tools).toEqual(["unlock", "secret"]);
  expect(faux.requests[0]!.tools).toEqual(["unlock"]);
  expect(faux.requests[1]!.tools).toEqual(["unlock", "secret"]);
});

test("addTools takes the name out of a { remove } filter", async () => {
  const { agent, faux } = await run({ tools: { remove: ["secret", "other"] } });
  expect(agent.tools).toEqual({ remove: ["other"] });
  expect(faux.requests[0]!.tools).toEqual(["unlock"]);
  expect(faux.requests[1]!.tools).toEqual(["unlock", "secret"]);
});

test("addTools writes nothing when no filter is stored: every tool is offered already", async () => {
  const { agent, h } = await run({});
  expect(agent.tools).toBeUndefined();
  expect(agent).toEqual({});
  const agentEntries = (await (await h.root()).entries()).filter((e) => e.kind === "pi.system");
  expect(agentEntries).toHaveLength(1);
});

test("addTools takes the names of every result of the round, in call order, and never repeats a name the list holds", async () => {
  const grant = defineTool({
    name: "grant",
    description: "asks for other, and for unlock again",
    parameters: Type.Object({}),
    execute: async () => ({
      content: [{ type: "text", text: "granted" }],
      control: { addTools: ["other", "unlock"] },
    }),
  });
  const both: FauxResponder = (req) =>
    req.messages.some((m) => m.role === "toolResult")
      ? fauxAssistantMessage("done")
      : fauxAssistantMessage(
          [fauxToolCall("unlock", {}, { id: "c1" }), fauxToolCall("grant", {}, { id: "c2" })],
          {
            stopReason: "toolUse",
          },
        );
  const { h, root, faux } = await open(both, {
    tools: [unlock, grant, plain("secret"), plain("other")],
    root: { agent: { tools: ["unlock", "grant"] } },
  });
  expect((await (await root.submit({ type: "input", content: "go" })).wait()).status).toBe("done");
  expect((h.docNow(root.id, DOC.agent) as AgentState).tools).toEqual(["unlock", "grant", "secret", "other"]);
  expect(faux.requests[1]!.tools).toEqual(["unlock", "grant", "secret", "other"]);
});

test("addTools edits the filter also in a round that ends the run (terminate)", async () => {
  const unlockAndStop = defineTool({
    name: "unlock-and-stop",
    description: "makes the secret tool available and ends the run",
    parameters: Type.Object({}),
    execute: async () => ({
      content: [{ type: "text", text: "unlocked, stopping" }],
      control: { addTools: ["secret"], terminate: true },
    }),
  });
  const { h, root, faux } = await open(
    () =>
      fauxAssistantMessage([fauxToolCall("unlock-and-stop", {}, { id: "c1" })], { stopReason: "toolUse" }),
    { tools: [unlockAndStop, plain("secret")], root: { agent: { tools: ["unlock-and-stop"] } } },
  );
  expect((await (await root.submit({ type: "input", content: "go" })).wait()).status).toBe("done");
  // The round terminated: one request only, and the stored filter gained the name.
  expect(faux.requests).toHaveLength(1);
  expect((h.docNow(root.id, DOC.agent) as AgentState).tools).toEqual(["unlock-and-stop", "secret"]);
});

test("addTools edits the filter also in a round that ends the run by a handoff", async () => {
  // Break 31F: with addTools skipped when a result hands off, every test passed (the one ending
  // test terminates); spec §8.5 edits the filter in the round's one commit, whatever ends it.
  const unlockAndHandOff = defineTool({
    name: "unlock-and-hand-off",
    description: "makes the secret tool available and hands off",
    parameters: Type.Object({}),
    execute: async () => ({
      content: [{ type: "text", text: "unlocked, handing off" }],
      control: { addTools: ["secret"], handoff: "carry on with the secret tool" },
    }),
  });
  const { h, root, faux } = await open(
    () =>
      fauxAssistantMessage([fauxToolCall("unlock-and-hand-off", {}, { id: "c1" })], {
        stopReason: "toolUse",
      }),
    { tools: [unlockAndHandOff, plain("secret")], root: { agent: { tools: ["unlock-and-hand-off"] } } },
  );
  expect((await (await root.submit({ type: "input", content: "go" })).wait()).status).toBe("done");
  expect(faux.requests).toHaveLength(1);
  expect((await root.entries()).map((e) => e.kind)).toContain("pi.reset");
  expect((h.docNow(root.id, DOC.agent) as AgentState).tools).toEqual(["unlock-and-hand-off", "secret"]);
});

test("addTools takes every asked name out of a { remove } filter, from several results, and keeps the rest of pi.agent (draw 35b C)", async () => {
  // Draw 35b C: a { remove } edit that took out only the first name asked, and an edit that wrote
  // the filter without the agent's other fields, passed every test (one result asking one name of a
  // { remove } list; agents holding a tools filter only).
  const grant = defineTool({
    name: "grant",
    description: "asks for other",
    parameters: Type.Object({}),
    execute: async () => ({ content: [{ type: "text", text: "granted" }], control: { addTools: ["other"] } }),
  });
  const both: FauxResponder = (req) =>
    req.messages.some((m) => m.role === "toolResult")
      ? fauxAssistantMessage("done")
      : fauxAssistantMessage(
          [fauxToolCall("unlock", {}, { id: "c1" }), fauxToolCall("grant", {}, { id: "c2" })],
          { stopReason: "toolUse" },
        );
  const { h, root, faux } = await open(both, {
    tools: [unlock, grant, plain("secret"), plain("other"), plain("third")],
    root: { agent: { instructions: "kept", tools: { remove: ["secret", "third", "other"] } } },
  });
  expect((await (await root.submit({ type: "input", content: "go" })).wait()).status).toBe("done");
  expect(h.docNow(root.id, DOC.agent)).toEqual({ instructions: "kept", tools: { remove: ["third"] } });
  expect(faux.requests[0]!.tools).toEqual(["unlock", "grant"]);
  expect(faux.requests[1]!.tools).toEqual(["unlock", "grant", "secret", "other"]);
  expect(faux.requests[1]!.systemPrompt).toContain("kept");
});
