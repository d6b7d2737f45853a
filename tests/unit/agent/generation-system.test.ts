/**
 * pi.system entries (spec §8.1, §8.3, §8.7): preparation appends one, with content "", only when
 * the instructions or the offered tools differ from what the active range replays; after a head
 * marker the next preparation writes a complete baseline again.
 */
import { Type } from "typebox";
import { expect, test } from "vitest";
import { defaultStream } from "../../../worker/agent/services.ts";
import {
  AgentHarness,
  type AgentHarnessOptions,
  type ChangeSet,
  defineTool,
  type EntryRecord,
} from "../../../worker/index.ts";
import { deferred, fauxAgentModel, memoryStore } from "../../../worker/testing.ts";
import { echo, open } from "./fixtures.ts";

type SystemRecord = { role: string; content: string; sections: Record<string, string | null> };
const systemOf = (e: EntryRecord) => (e.model as unknown as SystemRecord[])[0]!;

test("preparation appends a pi.system entry only when the instructions change, and a full baseline after a head marker", async () => {
  const { h, root } = await open(echo);
  // Each pi.system entry with the generation checkpoint its commit wrote.
  const prepared: Array<{ entry: number; checkpoint: unknown }> = [];
  h.subscribe((change) => {
    for (const e of change.entries.filter((x) => x.kind === "pi.system"))
      prepared.push({
        entry: e.id,
        checkpoint: (change.tasks.find((t) => t.kind === "pi.generation")?.state as { checkpoint?: unknown })
          ?.checkpoint,
      });
  });
  await root.configure({ instructions: "be brief" });
  const ask = async (content: string) => (await root.submit({ type: "input", content })).wait();
  await ask("one");
  await ask("two");
  const systems = async () => (await root.entries()).filter((e) => e.kind === "pi.system");
  expect((await systems()).map(systemOf)).toMatchObject([
    { role: "system", content: "", sections: { instructions: "<instructions>\nbe brief\n</instructions>" } },
  ]);
  // The entry comes before the request it prepared: user, system, assistant.
  expect((await root.entries()).slice(0, 3).map((e) => e.kind)).toEqual([
    "pi.user",
    "pi.system",
    "pi.assistant",
  ]);

  await root.configure({ instructions: "be thorough" });
  await ask("three");
  expect((await systems()).map((e) => systemOf(e).sections)).toEqual([
    { instructions: "<instructions>\nbe brief\n</instructions>" },
    { instructions: "<instructions>\nbe thorough\n</instructions>" },
  ]);

  await root.reset();
  await ask("four");
  const after = await systems();
  expect(after).toHaveLength(3);
  expect(systemOf(after[2]!).sections).toEqual({
    instructions: "<instructions>\nbe thorough\n</instructions>",
  });
  // Every one has content "" and is written by a generation's preparation (spec §8.1): in the commit
  // that pins its request with the entry as the cutoff. (A request prepared in the commit admitting
  // its input carries no byTaskId: tests/NOT-APPLICABLE.md [8.3].)
  expect(after.map((e) => systemOf(e).content)).toEqual(["", "", ""]);
  expect(prepared).toEqual(
    after.map((e) => ({
      entry: e.id,
      checkpoint: expect.objectContaining({ phase: "request", cutoff: e.id }),
    })),
  );
});

test("prepare's one commit appends the planned pi.system entry and moves to request, pinning the new tail as cutoff and the agent's model and thinking level; a change during the request applies at the next preparation", async () => {
  const hold = deferred();
  // The host's default model is not the agent's: the pin is the agent's stored model.
  const { h, root, faux } = await open(
    async (req, n) => {
      if (n === 1) await hold.promise;
      return echo(req, n);
    },
    { defaultModel: { provider: "faux", modelId: "host-default" } },
  );
  await root.configure({ instructions: "be brief", thinkingLevel: "high", model: faux.ref });
  const changes: ChangeSet[] = [];
  const stop = h.subscribe((change) => changes.push(change));
  const first = await root.submit({ type: "input", content: "one" });
  await expect.poll(() => faux.requests.length).toBe(1);
  const prepared = changes.filter((c) => c.entries.some((e) => e.kind === "pi.system"));
  expect(prepared).toHaveLength(1);
  const [commit] = prepared;
  const system = commit!.entries.find((e) => e.kind === "pi.system")!;
  const generation = commit!.tasks.find((t) => t.kind === "pi.generation")!;
  expect(generation.state).toMatchObject({
    status: "running",
    checkpoint: {
      phase: "request",
      attempt: 1,
      cutoff: system.id,
      model: { provider: faux.ref.provider, modelId: faux.ref.modelId },
      thinkingLevel: "high",
    },
  });
  // A change while the request runs leaves it as pinned; the next preparation takes it.
  await root.configure({ thinkingLevel: "low" });
  hold.resolve();
  expect((await first.wait()).status).toBe("done");
  changes.length = 0;
  expect((await (await root.submit({ type: "input", content: "two" })).wait()).status).toBe("done");
  stop();
  const requests = changes
    .flatMap((c) => c.tasks)
    .filter((t) => t.kind === "pi.generation" && t.state.status === "running")
    .map((t) => (t.state as { checkpoint: { phase: string; thinkingLevel?: string } }).checkpoint)
    .filter((cp) => cp.phase === "request");
  expect(requests.map((cp) => cp.thinkingLevel)).toEqual(["low"]);
});

test("a request resent after a restart keeps what its preparation resolved: the agent changed meanwhile applies at the next preparation", async () => {
  const hold = deferred();
  const sent: Array<{ reasoning: unknown; systemPrompt: unknown }> = [];
  const stream: AgentHarnessOptions["stream"] = (model, context, options) => {
    sent.push({ reasoning: options.reasoning, systemPrompt: context.systemPrompt });
    return defaultStream(model, context, options);
  };
  const first = await open(
    async (req, n) => {
      if (n === 1) await hold.promise;
      return echo(req, n);
    },
    { stream },
  );
  await first.root.configure({ instructions: "Old rule.", thinkingLevel: "high" });
  await first.root.submit({ type: "input", content: "one", requestId: "r" });
  await expect.poll(() => sent.length).toBe(1);
  // The agent changes while the request is out, and the engine stops before it answers.
  await first.root.configure({ instructions: "New rule.", thinkingLevel: "low" });
  const image = first.store.image();
  hold.resolve();
  await first.h.close();
  sent.length = 1; // whatever the first engine did after the image is not in it

  const again = fauxAgentModel(echo, { id: first.faux.ref.modelId });
  const h = await AgentHarness.open(await memoryStore(image), {
    models: again.models,
    defaultModel: again.ref,
    stream,
  });
  try {
    const root = await h.root();
    expect((await (await root.submit({ type: "input", content: "one", requestId: "r" })).wait()).status).toBe(
      "done",
    );
    expect((await (await root.submit({ type: "input", content: "two" })).wait()).status).toBe("done");
    // The resent request is the one prepared before the change; the next preparation takes it.
    expect(sent.map((s) => s.reasoning)).toEqual(["high", "high", "low"]);
    expect(sent.map((s) => String(s.systemPrompt).includes("New rule."))).toEqual([false, false, true]);
  } finally {
    await h.close();
    again.unregister();
  }
});

test("a request resent after a restart offers the tools its pi.system entries replay, in their order: tools the agent took meanwhile wait for the next preparation (break 30F)", async () => {
  // Spec §7.4: replaying the transcript's system messages yields the effective prompt and tool
  // set; §8.3: the offered tools are fixed with the request. Break 30F: a request offering the
  // agent's tools as they stand (not those its system entries replay) passed every named test.
  const named = (name: string) =>
    defineTool({
      name,
      description: `The ${name} tool`,
      parameters: Type.Object({}),
      execute: async () => ({ content: [{ type: "text" as const, text: name }] }),
    });
  const tools = [named("alpha"), named("beta"), named("gamma")];
  const hold = deferred();
  const sent: string[][] = [];
  const stream: AgentHarnessOptions["stream"] = (model, context, options) => {
    sent.push((context.tools ?? []).map((t) => t.name));
    return defaultStream(model, context, options);
  };
  const first = await open(
    async (req, n) => {
      if (n === 1) await hold.promise;
      return echo(req, n);
    },
    { stream, tools },
  );
  await first.root.configure({ tools: ["alpha", "beta"] });
  await first.root.submit({ type: "input", content: "one", requestId: "r" });
  await expect.poll(() => sent.length).toBe(1);
  await first.root.configure({ tools: ["gamma", "beta", "alpha"] });
  const image = first.store.image();
  hold.resolve();
  await first.h.close();
  sent.length = 1;

  const again = fauxAgentModel(echo, { id: first.faux.ref.modelId });
  const h = await AgentHarness.open(await memoryStore(image), {
    models: again.models,
    defaultModel: again.ref,
    stream,
    tools,
  });
  try {
    const root = await h.root();
    expect((await (await root.submit({ type: "input", content: "one", requestId: "r" })).wait()).status).toBe(
      "done",
    );
    expect((await (await root.submit({ type: "input", content: "two" })).wait()).status).toBe("done");
    expect(sent).toEqual([
      ["alpha", "beta"],
      ["alpha", "beta"],
      ["gamma", "beta", "alpha"],
    ]);
  } finally {
    await h.close();
    again.unregister();
  }
});

test("a request resent after a restart goes to its pinned model though the agent names another meanwhile; the next preparation takes the new one", async () => {
  // Break 28F: the named tests changed the thinking level only, never the model, during a request; a
  // request phase that resolved the agent's model as it stands (not the pinned one) passed them all.
  const hold = deferred();
  const sent: string[] = [];
  const stream: AgentHarnessOptions["stream"] = (model, context, options) => {
    sent.push(model.id);
    return defaultStream(model, context, options);
  };
  const first = await open(
    async (req, n) => {
      if (n === 1) await hold.promise;
      return echo(req, n);
    },
    { stream },
  );
  await first.root.configure({ model: first.faux.ref });
  await first.root.submit({ type: "input", content: "one", requestId: "r" });
  await expect.poll(() => sent.length).toBe(1);
  // The agent moves to a model this host does not know while the request is out; the engine stops.
  await first.root.configure({ model: { provider: first.faux.ref.provider, modelId: "not-here" } });
  const image = first.store.image();
  hold.resolve();
  await first.h.close();
  sent.length = 1;

  const again = fauxAgentModel(echo, { id: first.faux.ref.modelId });
  const h = await AgentHarness.open(await memoryStore(image), { models: again.models, stream });
  try {
    const root = await h.root();
    const resent = await (await root.submit({ type: "input", content: "one", requestId: "r" })).wait();
    expect(resent.status).toBe("done");
    expect(sent).toEqual([first.faux.ref.modelId, first.faux.ref.modelId]);
    const next = await (await root.submit({ type: "input", content: "two" })).wait();
    expect(next).toMatchObject({ status: "unanswered", reason: "no_model" });
    expect(JSON.stringify(next)).toContain("not-here");
    expect(sent).toHaveLength(2);
  } finally {
    await h.close();
    again.unregister();
  }
});
