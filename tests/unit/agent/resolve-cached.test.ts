/**
 * Kept agent resolutions (agent/extensions/resolve.ts `resolveAgentCached`, issue 16: every phase
 * resolved its conversation's agent again): the same snapshot, pi.agent and base give the kept
 * resolution; another pi.agent, base or snapshot (an install) resolves again; a resolution that
 * reported a problem is never kept, so every resolution reports it.
 */
import { Type } from "typebox";
import { expect, test, vi } from "vitest";
import { resolveAgent, resolveAgentCached } from "../../../worker/agent/extensions/resolve.ts";
import { textResult } from "../../../worker/agent/tools/contract.ts";
import { assertJson } from "../../../worker/core/persist.ts";
import { createRegistry, defineExtension, defineTool } from "../../../worker/index.ts";

const tool = (name: string) =>
  defineTool({
    name,
    description: name,
    parameters: Type.Object({}),
    execute: async () => textResult(name),
  });

test("the same snapshot, pi.agent and base give the kept resolution; any change resolves again", () => {
  const registry = createRegistry();
  registry.install(defineExtension({ name: "a", tools: [tool("read"), tool("write")] }));
  const report = () => undefined;
  const snapshot = registry.snapshot();
  const first = resolveAgentCached(snapshot, {}, report);
  expect(resolveAgentCached(snapshot, {}, report)).toBe(first);
  expect(first).toEqual(resolveAgent(snapshot, {}, report));
  // Same content, another object: still the kept one.
  expect(resolveAgentCached(snapshot, JSON.parse("{}"), report)).toBe(first);
  const filtered = resolveAgentCached(snapshot, { tools: ["read"] }, report);
  expect([...filtered.tools.keys()]).toEqual(["read"]);
  expect(resolveAgentCached(snapshot, {}, report, { base: [] }).tools.size).toBe(0);
  registry.install(defineExtension({ name: "b", tools: [tool("grep")] }));
  const after = resolveAgentCached(registry.snapshot(), {}, report);
  expect([...after.tools.keys()]).toEqual(["read", "write", "grep"]);
});

test("a resolution that reported a problem is not kept: each one reports it", () => {
  const registry = createRegistry();
  registry.install(
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
  const snapshot = registry.snapshot();
  const first = resolveAgentCached(snapshot, {}, (e) => reports.push(e));
  const second = resolveAgentCached(snapshot, {}, (e) => reports.push(e));
  expect(first.tools.size).toBe(0);
  expect(second).not.toBe(first);
  expect(reports).toHaveLength(2);
});

test("a committed (checked, frozen) pi.agent is serialized once for its key; an unchecked one at every call", () => {
  const registry = createRegistry();
  registry.install(defineExtension({ name: "a", tools: [tool("read"), tool("write")] }));
  const report = () => undefined;
  const snapshot = registry.snapshot();
  const checked = { tools: ["read"] };
  assertJson(checked); // what a commit does to a pi.agent value: checked and frozen all the way down
  const stringify = vi.spyOn(JSON, "stringify");
  // Calls that serialized `value` (alone, or as the head of a key).
  const serialized = (value: object) =>
    stringify.mock.calls.filter(([v]) => v === value || (Array.isArray(v) && v[0] === value)).length;
  try {
    const first = resolveAgentCached(snapshot, checked, report);
    const second = resolveAgentCached(snapshot, checked, report);
    expect(second).toBe(first);
    expect(serialized(checked)).toBe(1);
    // An unchecked value may change between calls: it is serialized again, and its change is seen.
    const open: { tools: string[] } = { tools: ["read"] };
    expect([...resolveAgentCached(snapshot, open, report).tools.keys()]).toEqual(["read"]);
    open.tools = ["write"];
    expect([...resolveAgentCached(snapshot, open, report).tools.keys()]).toEqual(["write"]);
    expect(serialized(open)).toBe(2);
  } finally {
    stringify.mockRestore();
  }
});
