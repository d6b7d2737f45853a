/**
 * The hooks' call signature (spec §7.2): every hook is called `(input, api, ctx)`. `api` names the
 * asking task and conversation, reads committed documents (`doc`) and the asking task's memos
 * (`memo`: first writer wins, one namespace with the task's own memos); `ctx.signal` is the asking
 * phase's signal. Hooks written against the older `(input, { conversationId, taskId })` keep working:
 * the api carries both fields.
 */
import { fauxToolCall } from "@mariozechner/pi-ai";
import { Type } from "typebox";
import { expect, test } from "vitest";
import {
  type AgentHarness,
  createRegistry,
  defineDoc,
  defineExtension,
  defineTool,
  hook,
  InvalidTransition,
  textResult,
} from "../../../worker/index.ts";
import { callsThenAnswer, echo, open } from "./fixtures.ts";

const item = defineTool({
  name: "item",
  description: "An item",
  parameters: Type.Object({}),
  execute: async () => textResult("ok"),
});

test("hooks get (input, api, ctx): the asking task, committed documents, the task's memos, the phase's signal", async () => {
  const seen: unknown[] = [];
  let harness: AgentHarness | undefined;
  const registry = createRegistry();
  registry.install(defineExtension({ name: "tools", tools: [item] }));
  registry.install(
    defineExtension({
      name: "observer",
      hooks: [
        hook("pi.tool", {
          beforeTool: async (call, api, ctx) => {
            const first = await api.memo("observer:first", call.name);
            const again = await api.memo("observer:first", "another");
            // Draw 40c (D, 13): a read of a memo never written is undefined and writes nothing.
            const absent = await api.memo("observer:absent");
            seen.push({
              hook: "beforeTool",
              absent,
              conversationId: api.conversationId,
              agent: await api.doc("pi.agent"),
              // Draw 33 (part D, 18): snapshot() without a conversation reads the asker's too, not the root's.
              snapshot: await api.snapshot("pi.agent"),
              first,
              again,
              aborted: ctx.signal.aborted,
              taskId: api.taskId,
            });
            return undefined;
          },
          afterTool: async (_call, api, ctx) => {
            // The asking task's committed record: its memos are the ones the hook wrote (one namespace).
            const record = await harness!.getTask(api.taskId);
            seen.push({
              hook: "afterTool",
              kind: record?.kind,
              memos: record?.state.status === "running" ? record.memos : undefined,
              memo: await api.memo("observer:first"),
              taskId: api.taskId,
              aborted: ctx.signal.aborted,
            });
            return undefined;
          },
        }),
        hook("pi.generation", {
          // A hook in the older form: the api is also the { conversationId, taskId } it read.
          afterResponse: (_message, ctx) =>
            void seen.push({ hook: "afterResponse", conversationId: ctx.conversationId }),
        }),
      ],
    }),
  );
  const { root, h } = await open(callsThenAnswer(fauxToolCall("item", {}, { id: "c1" })), {
    extensions: registry,
  });
  harness = h;
  // The asking conversation is not the root, which holds another agent: api.doc reads the asker's.
  await root.configure({ instructions: "Root rule." });
  const asker = await h.createConversation({ ownership: { kind: "ownerless" } });
  await asker.configure({ instructions: "Be brief." });
  await (await asker.submit({ type: "input", content: "go" })).wait();
  const before = seen.find((s) => (s as { hook: string }).hook === "beforeTool") as Record<string, unknown>;
  const after = seen.find((s) => (s as { hook: string }).hook === "afterTool") as Record<string, unknown>;
  expect(before).toMatchObject({
    conversationId: asker.id,
    agent: { instructions: "Be brief." },
    snapshot: { instructions: "Be brief." },
    first: "item",
    again: "item",
    aborted: false,
  });
  expect(before["absent"]).toBeUndefined();
  // The memo belongs to the asking tool task: its afterTool reads what its beforeTool wrote.
  expect(after).toMatchObject({ memo: "item", taskId: before["taskId"], aborted: false });
  // api.taskId is the asking task (the call's pi.tool task), whose own memos hold the hook's.
  expect(after).toMatchObject({
    kind: "pi.tool",
    memos: expect.objectContaining({ "observer:first": "item" }),
  });
  expect(Object.keys((after["memos"] ?? {}) as object)).not.toContain("observer:absent");
  expect(seen.filter((s) => (s as { hook: string }).hook === "afterResponse")).toEqual([
    { hook: "afterResponse", conversationId: asker.id },
    { hook: "afterResponse", conversationId: asker.id },
  ]);
});

test("a hook's memo of a falsy value (0, false, an empty string, null) is written and wins: a later candidate gets it, afterTool reads it (draw 35d)", async () => {
  // Draw 35d: api.memo handing on its candidate only when truthy (a falsy one read as "no
  // candidate": nothing written) passed every test; every hook memo was a non-empty string.
  const falsy = { zero: 0, no: false, empty: "", none: null } as const;
  const seen: Record<string, unknown> = {};
  let harness: AgentHarness | undefined;
  let taskId = -1;
  const registry = createRegistry();
  registry.install(defineExtension({ name: "tools", tools: [item] }));
  registry.install(
    defineExtension({
      name: "observer",
      hooks: [
        hook("pi.tool", {
          beforeTool: async (_call, api) => {
            taskId = api.taskId;
            for (const [name, value] of Object.entries(falsy)) {
              seen[`first:${name}`] = await api.memo(`observer:${name}`, value);
              seen[`again:${name}`] = await api.memo(`observer:${name}`, "later");
            }
            return undefined;
          },
          afterTool: async (_call, api) => {
            for (const name of Object.keys(falsy)) seen[`after:${name}`] = await api.memo(`observer:${name}`);
            const record = await harness!.getTask(api.taskId);
            seen["memos"] = record?.state.status === "running" ? record.memos : undefined;
            return undefined;
          },
        }),
      ],
    }),
  );
  const { root, h } = await open(callsThenAnswer(fauxToolCall("item", {}, { id: "c1" })), {
    extensions: registry,
  });
  harness = h;
  await (await root.submit({ type: "input", content: "go" })).wait();
  expect(taskId).toBeGreaterThanOrEqual(0);
  for (const [name, value] of Object.entries(falsy)) {
    expect(seen[`first:${name}`], name).toBe(value);
    expect(seen[`again:${name}`], name).toBe(value);
    expect(seen[`after:${name}`], name).toBe(value);
  }
  expect(seen["memos"]).toMatchObject({
    "observer:zero": 0,
    "observer:no": false,
    "observer:empty": "",
    "observer:none": null,
  });
});

test("a hook's ctx.signal is its asking phase's signal: aborting the run while a beforeTool hook waits aborts it", async () => {
  const seen: string[] = [];
  let started!: () => void;
  const waiting = new Promise<void>((resolve) => {
    started = resolve;
  });
  const registry = createRegistry();
  registry.install(defineExtension({ name: "tools", tools: [item] }));
  registry.install(
    defineExtension({
      name: "waiter",
      hooks: [
        hook("pi.tool", {
          // Waits until its signal aborts; gives up after 3 s, which only a signal never aborted reaches.
          beforeTool: (_call, _api, ctx) =>
            new Promise<undefined>((resolve) => {
              const timer = setTimeout(() => {
                seen.push("never aborted");
                resolve(undefined);
              }, 3000);
              ctx.signal.addEventListener("abort", () => {
                clearTimeout(timer);
                seen.push("aborted");
                resolve(undefined);
              });
              started();
            }),
        }),
      ],
    }),
  );
  const { root } = await open(callsThenAnswer(fauxToolCall("item", {}, { id: "c1" })), {
    extensions: registry,
  });
  const submission = await root.submit({ type: "input", content: "go" });
  await waiting;
  await root.abort();
  expect(seen).toEqual(["aborted"]);
  expect(await submission.wait()).toMatchObject({ status: "unanswered", reason: "aborted" });
});

test.each([
  ["afterResponse", "pi.generation"],
  ["onYield", "pi.generation"],
  ["afterTools", "pi.generation"],
  ["afterTool", "pi.tool"],
] as const)(
  "%s: ctx.signal is its asking phase's signal too: aborting the run while the hook waits aborts it (draw 33)",
  async (name, task) => {
    // Draw 33 (part D, 18): ctx.signal was read from beforeTool only; afterTools handed a signal of
    // its own that never fires passed every test.
    const seen: string[] = [];
    let started!: () => void;
    const waiting = new Promise<void>((resolve) => {
      started = resolve;
    });
    // Waits until its signal aborts; gives up after 1 s, which only a signal never aborted reaches.
    const waiter = (_input: unknown, _api: unknown, ctx: { signal: AbortSignal }) =>
      new Promise<undefined>((resolve) => {
        const timer = setTimeout(() => {
          seen.push("never aborted");
          resolve(undefined);
        }, 1000);
        ctx.signal.addEventListener("abort", () => {
          clearTimeout(timer);
          seen.push("aborted");
          resolve(undefined);
        });
        started();
      });
    const registry = createRegistry();
    registry.install(defineExtension({ name: "tools", tools: [item] }));
    registry.install(defineExtension({ name: "waiter", hooks: [hook(task, { [name]: waiter } as never)] }));
    const calls = task === "pi.tool" || name === "afterTools";
    const { root } = await open(calls ? callsThenAnswer(fauxToolCall("item", {}, { id: "c1" })) : echo, {
      extensions: registry,
    });
    const submission = await root.submit({ type: "input", content: "go" });
    await waiting;
    await root.abort();
    expect(seen).toEqual(["aborted"]);
    expect(await submission.wait()).toMatchObject({ status: "unanswered", reason: "aborted" });
  },
);

test("api.snapshotAsOf reads a rewindable document as it was at an entry (spec §7.2: HookApi is a DocumentReader); a document with no history is refused", async () => {
  const seen: unknown[] = [];
  const refused: unknown[] = [];
  let firstEntry = 0;
  const extensions = createRegistry();
  extensions.install(
    defineExtension({
      name: "looks-back",
      hooks: [
        hook("pi.generation", {
          beforeRequest: async (messages, api) => {
            if (firstEntry > 0) {
              seen.push(await api.snapshotAsOf("pi.agent", firstEntry));
              seen.push(await api.snapshotAsOf("pi.agent", firstEntry, api.conversationId));
              refused.push(await api.snapshotAsOf("pi.live", firstEntry).catch((e: unknown) => e));
            }
            return messages;
          },
        }),
      ],
    }),
  );
  const { root } = await open(echo, { extensions });
  await root.configure({ instructions: "first" });
  await (await root.submit({ type: "input", content: "one" })).wait();
  firstEntry = (await root.entries()).at(-1)!.id;
  await root.configure({ instructions: "second" });
  await (await root.submit({ type: "input", content: "two" })).wait();
  expect(seen).toEqual([{ instructions: "first" }, { instructions: "first" }]);
  expect(refused).toHaveLength(1);
  expect(refused[0]).toBeInstanceOf(InvalidTransition);
});

test("api.snapshotAsOf in a conversation other than the root reads the asking conversation by default, another when named", async () => {
  // Break 31A: every read of the test above asked in the root and of the root, so a default to the
  // root and a conversation argument ignored both passed.
  const seen: unknown[] = [];
  let at: { root: number; other: number } | undefined;
  let rootId = 0;
  const extensions = createRegistry();
  extensions.install(
    defineExtension({
      name: "looks-back",
      hooks: [
        hook("pi.generation", {
          beforeRequest: async (messages, api) => {
            if (at && api.conversationId !== rootId) {
              seen.push(await api.snapshotAsOf("pi.agent", at.other));
              seen.push(await api.snapshotAsOf("pi.agent", at.root, rootId));
            }
            return messages;
          },
        }),
      ],
    }),
  );
  const { root, h } = await open(echo, { extensions });
  rootId = root.id;
  const other = await h.createConversation({ ownership: { kind: "ownerless" } });
  await root.configure({ instructions: "root first" });
  await other.configure({ instructions: "other first" });
  await (await root.submit({ type: "input", content: "one" })).wait();
  await (await other.submit({ type: "input", content: "one" })).wait();
  at = { root: (await root.entries()).at(-1)!.id, other: (await other.entries()).at(-1)!.id };
  await root.configure({ instructions: "root second" });
  await other.configure({ instructions: "other second" });
  await (await other.submit({ type: "input", content: "two" })).wait();
  expect(seen).toEqual([{ instructions: "other first" }, { instructions: "root first" }]);
});

test("api.snapshotAsOf of a rewindable document first written after the entry is undefined: a historical read creates nothing in the past and never reads today's value (draw 41, 11)", async () => {
  // Draw 41 (11): both tests above read pi.agent, which every entry finds alive; a hook api that fell
  // back to the document's current value when no incarnation was alive at the entry passed them.
  const Marks = defineDoc<{ n: number }>({
    name: "app.marks",
    history: "rewindable",
    fork: "asOf",
    initial: { n: 0 },
  });
  const seen: unknown[] = [];
  let before = 0;
  let after = 0;
  const extensions = createRegistry();
  extensions.install(
    defineExtension({
      name: "looks-back",
      hooks: [
        hook("pi.generation", {
          beforeRequest: async (messages, api) => {
            if (after > 0) {
              seen.push(await api.snapshotAsOf("app.marks", before));
              seen.push(await api.snapshotAsOf("app.marks", after));
            }
            return messages;
          },
        }),
      ],
    }),
  );
  const { root, h } = await open(echo, { extensions });
  await (await root.submit({ type: "input", content: "one" })).wait();
  before = (await root.entries()).at(-1)!.id;
  await root.commit((tx) => Marks.write(tx, root.id, { n: 1 }));
  await (await root.submit({ type: "input", content: "two" })).wait();
  // The entry of the second run's input: its commit came after the write.
  after = (await root.entries()).find((e) => e.id > before && e.kind === "pi.user")!.id;
  await (await root.submit({ type: "input", content: "three" })).wait();
  expect(seen).toEqual([undefined, { n: 1 }]);
  // Nothing was created at the earlier entry: the document's one incarnation is today's.
  expect(await h.snapshot(Marks, root.id)).toEqual({ n: 1 });
});

test("a generation hook's memos are its asking generation task's: beforeRequest writes one, afterResponse reads it and finds it among the task's own memos (draw 40c)", async () => {
  // Draw 40c (D, 13): the first test reads the task's memos from a tool hook only; the request path's
  // hook api writing its memos under a prefix of its own passed every hook test.
  const seen: Record<string, unknown> = {};
  let harness: AgentHarness | undefined;
  const registry = createRegistry();
  registry.install(
    defineExtension({
      name: "observer",
      hooks: [
        hook("pi.generation", {
          beforeRequest: async (_messages, api) => {
            seen["written"] = await api.memo("observer:request", "first");
            return undefined;
          },
          afterResponse: async (_message, api) => {
            const record = await harness!.getTask(api.taskId);
            seen["kind"] = record?.kind;
            seen["memos"] = record?.state.status === "running" ? record.memos : undefined;
            seen["read"] = await api.memo("observer:request");
          },
        }),
      ],
    }),
  );
  const { root, h } = await open(echo, { extensions: registry });
  harness = h;
  await (await root.submit({ type: "input", content: "go" })).wait();
  expect(seen["written"]).toBe("first");
  expect(seen["read"]).toBe("first");
  expect(seen["kind"]).toBe("pi.generation");
  expect(seen["memos"]).toEqual(expect.objectContaining({ "observer:request": "first" }));
});
