/**
 * The view of the services a phase sees (agent/services.ts `atPhaseStart`): the registry snapshot
 * taken at the phase's start and its conversation's agent resolved from it. Every phase of a round
 * asked for the same view; it is kept while the snapshot, the base and the committed pi.agent value
 * are the same, and made again when any of them changes, or when its resolution reported a problem
 * (each phase reports it, as before).
 */
import { Type } from "typebox";
import { expect, test } from "vitest";
import type { RegistrySnapshot } from "../../../worker/agent/extensions/registry.ts";
import type { AgentState } from "../../../worker/agent/records.ts";
import { type AgentServices, atPhaseStart } from "../../../worker/agent/services.ts";
import { textResult } from "../../../worker/agent/tools/contract.ts";
import { assertJson } from "../../../worker/core/persist.ts";
import { createRegistry, defineExtension, defineTool } from "../../../worker/index.ts";

const tool = (name: string) =>
  defineTool({ name, description: name, parameters: Type.Object({}), execute: async () => textResult(name) });

/** Just what atPhaseStart reads of the services; `agent` is the committed pi.agent value. */
function services(snapshot: () => RegistrySnapshot, agent: { value: AgentState }, reports: unknown[] = []) {
  return {
    registry: snapshot,
    settings: () => ({ extensions: undefined }),
    readAgent: () => agent.value,
    report: (error: unknown) => reports.push(error),
  } as unknown as AgentServices;
}

const committed = (value: AgentState): AgentState => {
  assertJson(value); // what a commit does to it: checked and frozen all the way down
  return value;
};

test("the phases of a round share one view while the snapshot and the committed pi.agent stay", () => {
  const registry = createRegistry();
  registry.install(defineExtension({ name: "a", tools: [tool("read"), tool("write")] }));
  const agent = { value: committed({ tools: ["read"] }) };
  const s = services(() => registry.snapshot(), agent);
  const first = atPhaseStart(s, 1);
  expect(atPhaseStart(s, 1)).toBe(first);
  expect([...first.tools(1).keys()]).toEqual(["read"]);
  // Another conversation, then back: made again (one view is kept).
  expect(atPhaseStart(s, 2)).not.toBe(first);
  const again = atPhaseStart(s, 1);
  expect(again).not.toBe(first);
  expect(again.phaseAgent).toEqual(first.phaseAgent);
  // A new pi.agent value: a new view that sees it.
  agent.value = committed({ tools: ["write"] });
  const changed = atPhaseStart(s, 1);
  expect(changed).not.toBe(again);
  expect([...changed.tools(1).keys()]).toEqual(["write"]);
  // An install: a new snapshot, a new view with the new tool.
  registry.install(defineExtension({ name: "b", tools: [tool("grep")] }));
  agent.value = committed({});
  const before = atPhaseStart(s, 1);
  registry.install(defineExtension({ name: "c", tools: [tool("find")] }));
  const after = atPhaseStart(s, 1);
  expect(after).not.toBe(before);
  expect([...after.tools(1).keys()]).toEqual(["read", "write", "grep", "find"]);
});

test("a pi.agent value that is not checked JSON, or a resolution that reported, is never kept", () => {
  const registry = createRegistry();
  registry.install(defineExtension({ name: "a", tools: [tool("read")] }));
  const open = { value: { tools: ["read"] } as AgentState };
  const s = services(() => registry.snapshot(), open);
  expect(atPhaseStart(s, 1)).not.toBe(atPhaseStart(s, 1));

  const failing = createRegistry();
  failing.install(
    defineExtension({
      name: "a",
      tools: [tool("read")],
      wraps: [
        {
          tool: "read",
          wrap: () => {
            throw new Error("wrapper failed");
          },
        },
      ],
    }),
  );
  const reports: unknown[] = [];
  const f = services(() => failing.snapshot(), { value: committed({}) }, reports);
  atPhaseStart(f, 1);
  atPhaseStart(f, 1);
  expect(reports).toHaveLength(2);
});
