/**
 * Head rebaseline (spec §7.4): when the active context starts at a head marker and no pi.system entry
 * was appended after it, the next preparation writes one pi.system entry that is a complete baseline
 * (every desired section in order, every desired tool) and omits, with ContextEdits, every earlier
 * pi.system entry the head still retains (a compaction's kept range). Replay then sees the baseline
 * instead of the retained deltas: the request's prompt and tools are what they were, not doubled. It
 * is written even when it restates the replayed values; later preparations write deltas again. After a
 * crash at any commit, the conversation still ends with exactly one baseline.
 */
import { fauxAssistantMessage } from "@mariozechner/pi-ai";
import { Type } from "typebox";
import { describe, expect, test } from "vitest";
import { SUMMARY_SYSTEM_PROMPT } from "../../../worker/agent/compaction/task.ts";
import {
  AgentHarness,
  type Conversation,
  createRegistry,
  defineExtension,
  defineTool,
  type EntryRecord,
  type Extension,
  section,
  textResult,
} from "../../../worker/index.ts";
import {
  CRASH_MODES,
  crashSweep,
  deferred,
  type FauxAgentModel,
  type FauxRequest,
  type FauxResponder,
  fauxAgentModel,
  memoryStore,
} from "../../../worker/testing.ts";
import { cleanups, open } from "./fixtures.ts";

type System = { content: string; sections: Record<string, string | null>; toolsAdded?: string[] };
const systemOf = (e: EntryRecord) => (e.model as unknown as System[])[0]!;
const isSummary = (r: FauxRequest) => r.systemPrompt === SUMMARY_SYSTEM_PROMPT;
const big = (label: string) => `${label} ${"x".repeat(400)}`; // about 100 tokens
/** A 100-token answer for the conversation, "SUMMARY" for the summarizer. */
const respond: FauxResponder = (req) =>
  isSummary(req) ? fauxAssistantMessage("SUMMARY") : fauxAssistantMessage(big("answer"));
const conversationRequests = (faux: FauxAgentModel) => faux.requests.filter((r) => !isSummary(r));

const ROLE = "<role>\nYou help.\n</role>";
/** The agent's instructions as their section stores them: tagged (spec §7.1). */
const I = (text: string) => `<instructions>\n${text}\n</instructions>`;
const base = () =>
  defineExtension({
    name: "base",
    sections: [section("role", () => "You help.")],
    tools: [
      defineTool({
        name: "read",
        description: "Read a file",
        parameters: Type.Object({}),
        execute: async () => textResult("file"),
      }),
    ],
  });
/** The harness options besides the model: these extensions installed, a 350-token kept range. */
const options = (list: readonly Extension[] = [base()]) => {
  const extensions = createRegistry();
  for (const e of list) extensions.install(e);
  return { extensions, settings: { compaction: { keepRecentTokens: 350 } } };
};

const ask = async (root: Conversation, content: string, requestId?: string) =>
  (await root.submit({ type: "input", content, ...(requestId ? { requestId } : {}) })).wait();

/**
 * q1 (baseline: role, instructions "first", tool read), instructions changed to "second", q2 (its
 * pi.system is a delta: instructions only), q3, then a compaction whose kept range starts at or
 * before q2's delta. Returns that delta's id and the compaction entry.
 */
async function compactedWithRetainedDelta(root: Conversation, h: AgentHarness) {
  await root.configure({ instructions: "first" });
  await ask(root, big("q1"));
  await root.configure({ instructions: "second" });
  await ask(root, big("q2"));
  await ask(root, big("q3"));
  const systems = (await root.entries()).filter((e) => e.kind === "pi.system");
  expect(systems.map((e) => systemOf(e).sections)).toEqual([
    { role: ROLE, instructions: I("first") },
    { instructions: I("second") },
  ]);
  const delta = systems[1]!;
  await h.waitForTask(await root.compact());
  const compaction = (await root.entries()).at(-1)!;
  expect(compaction.kind).toBe("pi.compaction");
  // The precondition of the corner: the head retains the delta (and not the first baseline).
  expect(compaction.head).toBeLessThanOrEqual(delta.id);
  expect(compaction.head).toBeGreaterThan(systems[0]!.id);
  return { delta, compaction };
}

const entriesAfter = async (root: Conversation, id: number) =>
  (await root.entries()).filter((e) => e.id > id);

describe("head rebaseline", () => {
  test("after a compaction that keeps a pi.system delta: one complete baseline that omits it, the prompt unchanged", async () => {
    const { h, root, faux } = await open(respond, options());
    const { delta, compaction } = await compactedWithRetainedDelta(root, h);
    const before = conversationRequests(faux).at(-1)!;
    expect(before.systemPrompt).toBe(`${ROLE}\n\n${I("second")}`);

    await ask(root, "q4");
    const added = await entriesAfter(root, compaction.id);
    expect(added.map((e) => e.kind)).toEqual(["pi.user", "pi.system", "pi.assistant"]);
    const baseline = added[1]!;
    expect(baseline.edits).toEqual([{ target: delta.id, action: "omit" }]);
    expect(systemOf(baseline)).toMatchObject({
      content: "",
      sections: { role: ROLE, instructions: I("second") },
      toolsAdded: ["read"],
    });
    expect(Object.keys(systemOf(baseline).sections)).toEqual(["role", "instructions"]);
    // The request sees the same prompt and tool set as before the compaction: not doubled, not lost.
    const request = conversationRequests(faux).at(-1)!;
    expect(request.systemPrompt).toBe(before.systemPrompt);
    expect(request.tools).toEqual(["read"]);
    const context = await root.context();
    expect(context.sections).toEqual({ role: ROLE, instructions: I("second") });
    expect(context.tools).toEqual(["read"]);

    // A later preparation with no head change finds the baseline after the marker: deltas only.
    const answered = added[2]!.id;
    await ask(root, "q5");
    expect((await entriesAfter(root, answered)).map((e) => e.kind)).toEqual(["pi.user", "pi.assistant"]);
    await root.configure({ instructions: "third" });
    await ask(root, "q6");
    const later = (await entriesAfter(root, baseline.id)).filter((e) => e.kind === "pi.system");
    expect(later).toHaveLength(1);
    expect(later[0]!.edits).toBeUndefined();
    expect(systemOf(later[0]!).sections).toEqual({ instructions: I("third") });
    expect(conversationRequests(faux).at(-1)!.systemPrompt).toBe(`${ROLE}\n\n${I("third")}`);
  });

  test("the baseline is written even when it restates what the retained entries replay", async () => {
    const a = defineExtension({ name: "a", sections: [section("a", () => "A")] });
    const b = defineExtension({ name: "b", sections: [section("b", () => "B")] });
    const { h, root, faux } = await open(respond, options([a, b]));
    await ask(root, big("q1"));
    // An order change appends two entries (remove all, re-add in order): together they replay every
    // desired section, so the kept range alone shows exactly what the agent desires.
    await root.configure({ extensions: ["b", "a"] });
    await ask(root, big("q2"));
    await ask(root, big("q3"));
    const systems = (await root.entries()).filter((e) => e.kind === "pi.system");
    expect(systems.map((e) => systemOf(e).sections)).toEqual([
      { a: "<a>\nA\n</a>", b: "<b>\nB\n</b>" },
      { a: null, b: null },
      { b: "<b>\nB\n</b>", a: "<a>\nA\n</a>" },
    ]);
    await h.waitForTask(await root.compact());
    const compaction = (await root.entries()).at(-1)!;
    expect(compaction.kind).toBe("pi.compaction");
    expect(compaction.head).toBeGreaterThan(systems[0]!.id);
    expect(compaction.head).toBeLessThanOrEqual(systems[1]!.id);
    const before = conversationRequests(faux).at(-1)!.systemPrompt;
    expect(before).toBe("<b>\nB\n</b>\n\n<a>\nA\n</a>");

    await ask(root, "q4");
    const added = (await entriesAfter(root, compaction.id)).filter((e) => e.kind === "pi.system");
    expect(added).toHaveLength(1);
    expect(added[0]!.edits).toEqual([
      { target: systems[1]!.id, action: "omit" },
      { target: systems[2]!.id, action: "omit" },
    ]);
    expect(systemOf(added[0]!).sections).toEqual({ b: "<b>\nB\n</b>", a: "<a>\nA\n</a>" });
    expect(Object.keys(systemOf(added[0]!).sections)).toEqual(["b", "a"]);
    expect(conversationRequests(faux).at(-1)!.systemPrompt).toBe(before);
  });
});

test("a head rebaseline takes precedence over order patching: after the cut, an order change is one baseline, not two entries", async () => {
  const a = defineExtension({ name: "a", sections: [section("a", () => "A")] });
  const b = defineExtension({ name: "b", sections: [section("b", () => "B")] });
  const { h, root, faux } = await open(respond, options([a, b]));
  await ask(root, big("q1"));
  await root.configure({ extensions: ["b", "a"] });
  await ask(root, big("q2"));
  await ask(root, big("q3"));
  const systems = (await root.entries()).filter((e) => e.kind === "pi.system");
  expect(systems).toHaveLength(3);
  await h.waitForTask(await root.compact());
  const compaction = (await root.entries()).at(-1)!;
  expect(compaction.kind).toBe("pi.compaction");
  expect(compaction.head).toBeGreaterThan(systems[0]!.id);
  expect(compaction.head).toBeLessThanOrEqual(systems[1]!.id);
  // The shown order (from the kept entries) is b, a; the agent now desires a, b.
  await root.configure({ extensions: ["a", "b"] });
  await ask(root, "q4");
  const added = (await entriesAfter(root, compaction.id)).filter((e) => e.kind === "pi.system");
  expect(added).toHaveLength(1);
  expect(added[0]!.edits).toEqual([
    { target: systems[1]!.id, action: "omit" },
    { target: systems[2]!.id, action: "omit" },
  ]);
  expect(Object.entries(systemOf(added[0]!).sections)).toEqual([
    ["a", "<a>\nA\n</a>"],
    ["b", "<b>\nB\n</b>"],
  ]);
  expect(conversationRequests(faux).at(-1)!.systemPrompt).toBe("<a>\nA\n</a>\n\n<b>\nB\n</b>");
});

test("a reset placed at a final boundary with a queued follow-up: the follow-up's request has the full prompt again", async () => {
  // Spec §7.4: a head that removes the request-visible baseline makes the next preparation write a
  // complete one. Found by reading 22b: the commit placing the reset and starting the follow-up's run
  // prepared that request from the entry cache, which lacks the commit's own entries (the reset), so
  // no baseline was written and the request went out with no system prompt at all.
  const hold = deferred();
  const { root, faux } = await open(async (req, n) => {
    if (n === 1) await hold.promise;
    return respond(req, n);
  }, options());
  const one = await root.submit({ type: "input", content: "one" });
  const reset = await root.reset();
  const two = await root.submit({ type: "input", content: "two" });
  hold.resolve();
  expect((await one.wait()).status).toBe("done");
  expect((await reset.wait()).status).toBe("done");
  expect((await two.wait()).status).toBe("done");
  const entries = await root.entries();
  const marker = entries.find((e) => e.kind === "pi.reset")!;
  const after = entries.filter((e) => e.id > marker.id && e.kind === "pi.system");
  expect(after).toHaveLength(1);
  expect(systemOf(after[0]!).sections).toEqual({ role: ROLE });
  expect(conversationRequests(faux).map((r) => r.systemPrompt)).toEqual([ROLE, ROLE]);
});

describe("head rebaseline under crashes", () => {
  const INPUT = { type: "input", content: "q4", requestId: "rebaseline-q4" } as const;
  /**
   * Crash points each mode covered: the floor it must not fall below. One fewer per mode than when
   * written ([4, 5, 4]) since the store groups nothing (issue 26): the first group after the open,
   * set aside for its conversation's documents, used to COMMIT an empty transaction (a crash point
   * with nothing in it) and now rolls back uncounted. Every transaction is still swept.
   */
  const FLOOR = [3, 4, 3];
  for (const [m, mode] of CRASH_MODES.entries())
    test(`a crash at any commit of the preparation's run still leaves one baseline (${mode.name})`, async () => {
      const faux = fauxAgentModel(respond);
      cleanups.push(async () => faux.unregister());
      // The committed state every run starts from: a compaction that retains a pi.system delta.
      const store = await memoryStore();
      const h = await AgentHarness.open(store, { models: faux.models, defaultModel: faux.ref, ...options() });
      const { delta, compaction } = await compactedWithRetainedDelta(await h.root(), h);
      await h.close();
      const image = store.image();
      await crashSweep(
        {
          name: "compaction retaining a delta -> input -> head rebaseline",
          image,
          services: () => ({}),
          open: (s, _services, engine) =>
            AgentHarness.open(s, { models: faux.models, defaultModel: faux.ref, ...options(), ...engine }),
          finish: async (engine) => {
            const root = await engine.root();
            await ask(root, INPUT.content, INPUT.requestId);
            await root.waitForIdle();
            return entriesAfter(root, compaction.id);
          },
        },
        {
          mode,
          atLeast: FLOOR[m]!,
          baseline: ({ result }) => {
            expect(result.map((e) => e.kind)).toEqual(["pi.user", "pi.system", "pi.assistant"]);
          },
          check: ({ result, label }) => {
            const systems = result.filter((e) => e.kind === "pi.system");
            expect(systems, label).toHaveLength(1);
            expect(systems[0]!.edits, label).toEqual([{ target: delta.id, action: "omit" }]);
            expect(systemOf(systems[0]!).sections, label).toEqual({ role: ROLE, instructions: I("second") });
            expect(
              result.filter((e) => e.kind === "pi.user"),
              label,
            ).toHaveLength(1);
          },
        },
      );
    });
});

test("a baseline after a compaction that keeps two pi.system deltas omits both", async () => {
  // A kept range long enough for both deltas (and not the first baseline).
  const { h, root, faux } = await open(respond, {
    ...options(),
    settings: { compaction: { keepRecentTokens: 450 } },
  });
  await root.configure({ instructions: "first" });
  await ask(root, big("q1"));
  await root.configure({ instructions: "second" });
  await ask(root, "q2");
  await root.configure({ instructions: "third" });
  await ask(root, "q3");
  await ask(root, big("q4"));
  const systems = (await root.entries()).filter((e) => e.kind === "pi.system");
  expect(systems.map((e) => systemOf(e).sections)).toEqual([
    { role: ROLE, instructions: I("first") },
    { instructions: I("second") },
    { instructions: I("third") },
  ]);
  await h.waitForTask(await root.compact());
  const compaction = (await root.entries()).at(-1)!;
  expect(compaction.kind).toBe("pi.compaction");
  // The precondition: the head retains both deltas, not the first baseline.
  expect(compaction.head).toBeGreaterThan(systems[0]!.id);
  expect(compaction.head).toBeLessThanOrEqual(systems[1]!.id);
  await ask(root, "q5");
  const baseline = (await entriesAfter(root, compaction.id)).find((e) => e.kind === "pi.system")!;
  expect(baseline.edits).toEqual([
    { target: systems[1]!.id, action: "omit" },
    { target: systems[2]!.id, action: "omit" },
  ]);
  expect(systemOf(baseline).sections).toEqual({ role: ROLE, instructions: I("third") });
  expect(conversationRequests(faux).at(-1)!.systemPrompt).toBe(`${ROLE}\n\n${I("third")}`);
});

test("a baseline after a compaction omits a retained tools-only delta too, and the request offers the tools as before", async () => {
  // Break 29J: every retained delta changed a section; a rebaseline omitting only the deltas that set
  // sections passed every test (replay hides it: the baseline restates the tools).
  const { h, root, faux } = await open(respond, {
    ...options(),
    settings: { compaction: { keepRecentTokens: 450 } },
  });
  await root.configure({ instructions: "first" });
  await ask(root, big("q1"));
  await root.configure({ tools: { remove: ["read"] } });
  await ask(root, "q2");
  await root.configure({ instructions: "third" });
  await ask(root, "q3");
  await ask(root, big("q4"));
  const systems = (await root.entries()).filter((e) => e.kind === "pi.system");
  expect(systems).toHaveLength(3);
  expect(systemOf(systems[1]!).sections).toEqual({});
  const toolsBefore = conversationRequests(faux).at(-1)!.tools;
  await h.waitForTask(await root.compact());
  const compaction = (await root.entries()).at(-1)!;
  expect(compaction.head).toBeGreaterThan(systems[0]!.id);
  expect(compaction.head).toBeLessThanOrEqual(systems[1]!.id);
  await ask(root, "q5");
  const baseline = (await entriesAfter(root, compaction.id)).find((e) => e.kind === "pi.system")!;
  expect(baseline.edits).toEqual([
    { target: systems[1]!.id, action: "omit" },
    { target: systems[2]!.id, action: "omit" },
  ]);
  expect(systemOf(baseline).sections).toEqual({ role: ROLE, instructions: I("third") });
  expect(conversationRequests(faux).at(-1)!.tools).toEqual(toolsBefore);
});

test("a second compaction that keeps the first rebaseline: the next baseline omits that baseline too (draw 36c)", async () => {
  // Draw 36c: every retained pi.system entry was a plain delta; a rebaseline omitting only retained
  // entries without edits of their own (an earlier baseline left replaying) passed every test.
  const { h, root, faux } = await open(respond, options());
  const { compaction } = await compactedWithRetainedDelta(root, h);
  await ask(root, "q4");
  const first = (await entriesAfter(root, compaction.id)).find((e) => e.kind === "pi.system")!;
  expect(first.edits?.length).toBeGreaterThan(0);
  await h.waitForTask(await root.compact());
  const second = (await root.entries()).at(-1)!;
  expect(second.kind).toBe("pi.compaction");
  // The precondition: the second head retains the first baseline.
  expect(second.head).toBeLessThanOrEqual(first.id);
  const retained = (await root.entries()).filter(
    (e) => e.kind === "pi.system" && e.id >= second.head! && e.id < second.id,
  );
  expect(retained.map((e) => e.id)).toContain(first.id);
  await ask(root, "q5");
  const baseline = (await entriesAfter(root, second.id)).find((e) => e.kind === "pi.system")!;
  expect(baseline.edits).toEqual(retained.map((e) => ({ target: e.id, action: "omit" })));
  expect(systemOf(baseline).sections).toEqual({ role: ROLE, instructions: I("second") });
  expect(conversationRequests(faux).at(-1)!.systemPrompt).toBe(`${ROLE}\n\n${I("second")}`);
});
