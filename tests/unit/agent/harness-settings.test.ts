/**
 * Harness settings (spec §2.2): every reading resolves the host's settings anew over the built-in
 * defaults, object fields merged key by key; a change of a settings getter makes no commit and takes
 * effect at the next reading. (The app's settings dialog is tested in settings.test.ts.)
 */
import { fauxAssistantMessage, fauxToolCall } from "@mariozechner/pi-ai";
import { Type } from "typebox";
import { expect, test } from "vitest";
import { type AgentSettings, resolveSettings, retryDelayMs } from "../../../worker/agent/services.ts";
import {
  AgentHarness,
  createRegistry,
  defineExtension,
  defineTool,
  section,
  textResult,
} from "../../../worker/index.ts";
import { deferred, fauxAgentModel, memoryStore, until } from "../../../worker/testing.ts";
import { callsThenAnswer, cleanups, echo, open } from "./fixtures.ts";

test("defaults: retry 3 x 2 s up to 60 s, compaction 16384/20000/32768, parallel tools, one-at-a-time queues, no stream options", () => {
  // Every default, whole: a key added, dropped or changed shows here (the spec's resolved defaults
  // plus the progress intervals, the output rate and the context retention of this engine).
  expect(resolveSettings(undefined)).toEqual({
    retry: { enabled: true, maxRetries: 3, baseDelayMs: 2000, maxDelayMs: 60_000 },
    compaction: { enabled: true, reserveTokens: 16_384, keepRecentTokens: 20_000, backgroundTokens: 32_768 },
    stream: {},
    partialIntervalMs: 100,
    outputIntervalMs: 100,
    progressBytesPerSecond: 100 * 1024,
    toolExecution: "parallel",
    steeringMode: "one-at-a-time",
    followUpMode: "one-at-a-time",
    contextRetentionMs: 600_000,
  });
  // A default stands only for a key not given: a given 0 is kept (draw 36b-A: the intervals and the
  // pacing rate defaulted with `||`, so 0, every partial at once or no size pacing, became 100 ms and
  // 100 KiB/s, and passed every named test). Spec §2.2: every field over its built-in default.
  const zeros = resolveSettings({
    partialIntervalMs: 0,
    outputIntervalMs: 0,
    progressBytesPerSecond: 0,
    contextRetentionMs: 0,
  });
  expect([
    zeros.partialIntervalMs,
    zeros.outputIntervalMs,
    zeros.progressBytesPerSecond,
    zeros.contextRetentionMs,
  ]).toEqual([0, 0, 0, 0]);
});

test("partial retry and compaction settings merge key by key with the defaults", () => {
  const resolved = resolveSettings({ retry: { maxRetries: 7 }, compaction: { enabled: false } });
  expect(resolved.retry).toEqual({ enabled: true, maxRetries: 7, baseDelayMs: 2000, maxDelayMs: 60_000 });
  expect(resolved.compaction).toEqual({
    enabled: false,
    reserveTokens: 16_384,
    keepRecentTokens: 20_000,
    backgroundTokens: 32_768,
  });
  // A given falsy value is kept, never replaced by its default; the keys beside it keep theirs.
  const falsy = resolveSettings({
    retry: { enabled: false },
    compaction: { backgroundTokens: 0 },
    outputIntervalMs: 500,
  });
  expect(falsy.retry).toEqual({ enabled: false, maxRetries: 3, baseDelayMs: 2000, maxDelayMs: 60_000 });
  expect(falsy.compaction).toEqual({
    enabled: true,
    reserveTokens: 16_384,
    keepRecentTokens: 20_000,
    backgroundTokens: 0,
  });
  expect([falsy.partialIntervalMs, falsy.outputIntervalMs]).toEqual([100, 500]);
  // Break 30K: several keys in one object each land (a merge that took the first given key only
  // passed the single-key cases above); the keys not given keep their defaults.
  const several = resolveSettings({
    retry: { maxRetries: 5, baseDelayMs: 250 },
    compaction: { reserveTokens: 1000, keepRecentTokens: 2000 },
  });
  expect(several.retry).toEqual({ enabled: true, maxRetries: 5, baseDelayMs: 250, maxDelayMs: 60_000 });
  expect(several.compaction).toEqual({
    enabled: true,
    reserveTokens: 1000,
    keepRecentTokens: 2000,
    backgroundTokens: 32_768,
  });
});

test("a key given as undefined in a partial retry or compaction object keeps its default, as an absent key does (break 30G)", () => {
  // Break 30G (contrary): the nested objects were merged by spreading, so a key a host (JavaScript,
  // or an object built from optional fields) gave as undefined replaced its default with undefined:
  // no retry cap counted, the thresholds NaN. Spec §2.2 Settings: every field over its default.
  const resolved = resolveSettings({
    retry: { maxRetries: undefined, baseDelayMs: 500 },
    compaction: { reserveTokens: undefined, enabled: false },
  } as never);
  expect(resolved.retry).toEqual({ enabled: true, maxRetries: 3, baseDelayMs: 500, maxDelayMs: 60_000 });
  expect(resolved.compaction).toEqual({
    enabled: false,
    reserveTokens: 16_384,
    keepRecentTokens: 20_000,
    backgroundTokens: 32_768,
  });
  // Draw 31b: the specification's cap key too: maxAgentDelayMs given as undefined keeps the default
  // cap, or the maxDelayMs given beside it (a merge that took the key's presence for a value passed).
  const cap = (retry: object) => resolveSettings({ retry } as never).retry.maxDelayMs;
  expect(cap({ maxAgentDelayMs: undefined, maxRetries: 2 })).toBe(60_000);
  expect(cap({ maxAgentDelayMs: undefined, maxDelayMs: 3000 })).toBe(3000);
});

test("retry.maxAgentDelayMs, the specification's name for the backoff cap, caps the delay as maxDelayMs does", () => {
  // Spec §2.2 ConversationRetryPolicy { enabled, maxRetries, baseDelayMs, maxAgentDelayMs? }: a host
  // written against it sets maxAgentDelayMs; it is the cap (pi-ai's RetryPolicy), not ignored.
  const spec = resolveSettings({ retry: { baseDelayMs: 1000, maxAgentDelayMs: 5000 } });
  expect(spec.retry).toEqual({ enabled: true, maxRetries: 3, baseDelayMs: 1000, maxDelayMs: 5000 });
  expect([1, 2, 3, 4, 10].map((attempt) => retryDelayMs(spec.retry, attempt))).toEqual([
    1000, 2000, 4000, 5000, 5000,
  ]);
  // The name this engine used before keeps working.
  expect(resolveSettings({ retry: { maxDelayMs: 3000 } }).retry.maxDelayMs).toBe(3000);
});

/** A registry of extension "a" (tool alpha) and extension "b" (tool beta, section b-notes). */
function twoExtensions(): ReturnType<typeof createRegistry> {
  const tool = (name: string) =>
    defineTool({
      name,
      description: name,
      parameters: Type.Object({}),
      execute: async () => textResult(name),
    });
  const extensions = createRegistry();
  extensions.install(defineExtension({ name: "a", tools: [tool("alpha")] }));
  extensions.install(
    defineExtension({
      name: "b",
      tools: [tool("beta")],
      sections: [section("b-notes", () => "Beta notes.")],
    }),
  );
  return extensions;
}

test("a settings getter is read anew at each use: changing it makes no commit, and the next reading follows it; a changed default selection reaches the next request through one pi.system delta", async () => {
  const extensions = twoExtensions();
  let settings: AgentSettings = { followUpMode: "one-at-a-time", extensions: ["a"] };
  let reads = 0;
  const { h, root, faux } = await open(echo, {
    extensions,
    settings: () => {
      reads++;
      return settings;
    },
  });
  await (await root.submit({ type: "input", content: "one" })).wait();
  expect(faux.requests[0]!.tools).toEqual(["alpha"]);
  const systems = async () => (await root.entries()).filter((e) => e.kind === "pi.system");
  expect(await systems()).toHaveLength(1);
  // Conversation.agent() read before the change too, so a reading kept from its first use fails
  // below (break 27I: the default selection memoized at the first agent() passed).
  expect((await root.agent()).extensions).toEqual(["a"]);
  let commits = 0;
  let agentWrites = 0;
  h.subscribe((change) => {
    commits++;
    agentWrites += change.docs.filter((d) => d.name === "pi.agent").length;
  });
  settings = { followUpMode: "all", compaction: { enabled: false }, extensions: ["a", "b"] };
  const before = reads;
  expect(h.services.settings().followUpMode).toBe("all");
  expect(reads).toBe(before + 1);
  // The change itself wrote nothing: pi.agent is as it was, and no commit was made.
  expect(commits).toBe(0);
  expect(h.docNow(root.id, "pi.agent")).toEqual({});
  // A reader that resolves the new settings (Conversation.agent()) follows them and still commits
  // nothing, and the committed line has settled past it with nothing published (reading 24b).
  expect((await root.agent()).extensions).toEqual(["a", "b"]);
  await h.doc(root.id, "pi.agent");
  expect(commits).toBe(0);
  expect(h.docNow(root.id, "pi.agent")).toEqual({});
  // A commit of ours after them: anything the readings had asked for would be on the line before it
  // (sample 25: a reading that asked for a commit passed the checks above, which ran before it landed).
  await h.transaction((tx) => tx.writeDoc(root.id, "app.marker", { n: 1 }));
  expect(commits).toBe(1);
  await (await root.submit({ type: "input", content: "two" })).wait();
  expect(reads).toBeGreaterThan(before + 1);
  // The next preparation appended one delta adding b's tool and section; the request has them.
  const after = await systems();
  expect(after).toHaveLength(2);
  const delta = (
    after[1]!.model as unknown as Array<{ toolsAdded?: string[]; sections?: Record<string, unknown> }>
  )[0]!;
  expect(delta.toolsAdded).toEqual(["beta"]);
  expect(delta.sections).toEqual({ "b-notes": "<b-notes>\nBeta notes.\n</b-notes>" });
  expect(faux.requests[1]!.tools).toEqual(["alpha", "beta"]);
  expect(faux.requests[1]!.systemPrompt).toContain("Beta notes.");
  // The preparation that followed the change wrote no pi.agent either (break 30O: a preparation that
  // stored the new default selection in pi.agent, an agent_changed for a settings change, passed).
  expect(h.docNow(root.id, "pi.agent")).toEqual({});
  expect(agentWrites).toBe(0);
});

test("a settings change read during a run makes no commit of its own: after queue modes, tool execution, retry and stream change, a run commits what the same run committed before", async () => {
  // Sweep 42, 31: the test above counts commits only until its marker commit, before the next run
  // reads the changed settings; a reader on the run's path (a queue mode read at a boundary, the
  // stream options at a request) that committed because the settings it read had changed passed it.
  let settings: AgentSettings = {};
  const { h, root } = await open(echo, { settings: () => settings });
  await (await root.submit({ type: "input", content: "one" })).wait();
  let shapes: string[] = [];
  h.subscribe((change) => {
    shapes.push(
      [
        ...change.entries.map((e) => `entry ${e.kind}`),
        ...change.docs.map((d) => `doc ${d.name}`),
        ...change.tasks.map((t) => `task ${t.state.status}`),
      ]
        .sort()
        .join(", "),
    );
  });
  await (await root.submit({ type: "input", content: "two" })).wait();
  const unchanged = shapes;
  shapes = [];
  settings = {
    steeringMode: "all",
    followUpMode: "all",
    toolExecution: "sequential",
    retry: { maxRetries: 5 },
    stream: { timeoutMs: 30_000 },
    contextRetentionMs: 1000,
  };
  await (await root.submit({ type: "input", content: "three" })).wait();
  expect(unchanged.length).toBeGreaterThan(0);
  expect(shapes).toEqual(unchanged);
});

test("a default selection changed during a turn applies at that turn's next preparation: the request in flight keeps the tools and sections it was prepared with", async () => {
  // Draw 34A: the test above changes the settings between two runs; the default selection kept for
  // a run's later phases (a preparation reusing the view of the run's first, the settings pinned
  // per run) passed it. Here it changes while the run's first request is in flight.
  const extensions = twoExtensions();
  let settings: AgentSettings = { extensions: ["a"] };
  const hold = deferred();
  const call = callsThenAnswer(fauxToolCall("alpha", {}, { id: "call-1" }));
  const { root, faux } = await open(
    async (req, n) => {
      if (n === 1) await hold.promise;
      return call(req, n);
    },
    { extensions, settings: () => settings },
  );
  const sub = await root.submit({ type: "input", content: "go" });
  await until(() => faux.requests.length === 1, { what: "first request sent" });
  settings = { extensions: ["a", "b"] };
  hold.resolve();
  expect((await sub.wait()).status).toBe("done");
  // One run: its first request prepared before the change, its second (after the tool) after it.
  expect(faux.requests.map((r) => r.tools)).toEqual([["alpha"], ["alpha", "beta"]]);
  expect(faux.requests[0]!.systemPrompt ?? "").not.toContain("Beta notes.");
  expect(faux.requests[1]!.systemPrompt).toContain("Beta notes.");
});

test("a settings object is never copied: its getters are read at every resolution, and the next resolution sees a change", async () => {
  // Spec §2.2 HarnessSettings: "Read at every resolution and never copied; getters are fine." The
  // test above passes a settings function; an object whose fields are getters must be read as live.
  let mode: "parallel" | "sequential" = "parallel";
  let reads = 0;
  const settings = {
    get toolExecution() {
      reads++;
      return mode;
    },
  } as AgentSettings;
  const { h } = await open(echo, { settings });
  expect(h.services.settings().toolExecution).toBe("parallel");
  const before = reads;
  mode = "sequential";
  expect(h.services.settings().toolExecution).toBe("sequential");
  expect(reads).toBe(before + 1);
});

test("no settings resolve to one frozen resolution, read at no cost; given settings are still resolved afresh at each call", () => {
  // Every phase resolves the settings, several times per tool round: with none, nothing is made.
  const none = resolveSettings(undefined);
  expect(resolveSettings(undefined)).toBe(none);
  expect(Object.isFrozen(none) && Object.isFrozen(none.retry) && Object.isFrozen(none.compaction)).toBe(true);
  expect(Object.isFrozen(none.stream)).toBe(true);
  // Given settings: a fresh resolution each time, with the frozen defaults only for what is absent.
  let maxRetries = 1;
  const given = {
    get retry() {
      return { maxRetries };
    },
  };
  expect(resolveSettings(given).retry.maxRetries).toBe(1);
  maxRetries = 2;
  const again = resolveSettings(given);
  expect(again.retry.maxRetries).toBe(2);
  expect(again.compaction).toBe(none.compaction);
  expect(again).not.toBe(none);
});

test("compaction settings are read anew at each run's threshold check: enabled by the getter between two runs, the next run compacts", async () => {
  // break 29O: compaction settings read once per engine (the first run's, disabled) passed every named test.
  let enabled = false;
  const faux = fauxAgentModel(() => fauxAssistantMessage("ok"), { contextWindow: 300 });
  const h = await AgentHarness.open(await memoryStore(), {
    models: faux.models,
    defaultModel: faux.ref,
    settings: () => ({
      compaction: { enabled, reserveTokens: 100, keepRecentTokens: 150, backgroundTokens: 0 },
    }),
  });
  cleanups.push(async () => {
    await h.close().catch(() => undefined);
    faux.unregister();
  });
  const root = await h.root();
  // About 1,000 tokens each: far above the blocking threshold (300 - 100) once history stands before them.
  for (const content of ["x".repeat(4000), "y".repeat(4000)])
    expect((await (await root.submit({ type: "input", content })).wait()).status).toBe("done");
  expect(await h.tasks({ kind: "pi.compaction" })).toEqual([]);
  enabled = true;
  expect((await (await root.submit({ type: "input", content: "z".repeat(4000) })).wait()).status).toBe(
    "done",
  );
  expect(await h.tasks({ kind: "pi.compaction" })).toHaveLength(1);
});

test("settings that are not an object are a TypeError where they are read: a getter's Promise faults the run with that message, nothing answered; a Promise, null or an array given at open refuse the open", async () => {
  // Spec §2.2: settings are synchronous. A getter answering a Promise (or an object given as one)
  // read as settings would silently resolve to every default (draw 36b-A: refused by the type only).
  const { h, root, faux } = await open(echo, {
    settings: () => Promise.resolve({ followUpMode: "all" }) as unknown as AgentSettings,
  });
  expect(() => h.services.settings()).toThrow(
    new TypeError("settings must be read synchronously: a settings function returned a Promise"),
  );
  const outcome = await (await root.submit({ type: "input", content: "one" })).wait();
  expect(outcome).toEqual({
    status: "unanswered",
    reason: "faulted",
    detail: "settings must be read synchronously: a settings function returned a Promise",
  });
  expect(faux.requests).toHaveLength(0);
  expect((await root.entries()).map((e) => e.kind)).toEqual(["pi.user"]);
  for (const [given, said] of [
    [Promise.resolve({}), "settings must be read synchronously: a settings function returned a Promise"],
    [null, "settings must be an object (got null)"],
    [[], "settings must be an object (got an array)"],
    [7, "settings must be an object (got number)"],
  ] as const) {
    await expect(open(echo, { settings: given as unknown as AgentSettings })).rejects.toThrow(
      new TypeError(said),
    );
  }
});
