/**
 * User input tried at its extremes (issue 28 part 3), through the engine service as a tab calls it,
 * on the memory store:
 * - a 10 MB message: the browser engine takes it whole (it is the user's own text on the user's own
 *   machine; cutting it would lose what they typed), stores it exactly, titles the conversation from
 *   its first line and carries it through export and import; a server space refuses it at its socket
 *   with a typed `too-large` (its message limit, SERVER_MAX_MESSAGE_CHARS) and writes nothing;
 * - an input full of control characters and lone surrogates: stored exactly, found by search, shown
 *   as text by the markdown renderer, and the same after export and import (the file is well-formed
 *   Unicode: JSON escapes the lone surrogates);
 * - 10,000 follow-ups queued behind a busy run: each admitted once, the inbox holds them all in the
 *   order sent; 10,000 answered once each, in that order (each item is queued and taken off the
 *   inbox by a patch, so an answer does not store the whole queue again).
 */

import { fauxAssistantMessage } from "@mariozechner/pi-ai";
import { afterEach, expect, test } from "vitest";
import { markdownToHtml } from "../../../src/lib/markdown.ts";
import { AgentHarness } from "../../../worker/agent/harness.ts";
import { createModelResolver } from "../../../worker/agent/models/resolver.ts";
import { DOC, type InboxState } from "../../../worker/agent/records.ts";
import { TITLE_DOC } from "../../../worker/app/conversation-list.ts";
import { HarnessEngine } from "../../../worker/app/engine-service.ts";
import { entryText } from "../../../worker/app/search.ts";
import type { EntryRecord } from "../../../worker/core/types.ts";
import { DEFAULT_LIMITS, serveConnection } from "../../../worker/protocol/door.ts";
import { PROTOCOL_VERSION } from "../../../worker/protocol/index.ts";
import { SERVER_MAX_MESSAGE_CHARS } from "../../../worker/protocol/server-socket.ts";
import type { EngineMessage, ReplyMessage } from "../../../worker/protocol/wire.ts";
import { socketTransport } from "../../../worker/server/socket.ts";
import { deferred, type FauxResponder, memoryStore } from "../../../worker/testing.ts";
import { hostileEngine, lastMessageModel, storeState } from "./hostile-fixtures.ts";

const closing: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of closing.splice(0)) await c();
});

async function engine(respond?: FauxResponder, options: { record?: boolean } = {}) {
  const e = await hostileEngine(respond, options);
  closing.push(e.close);
  return e;
}

const userTexts = (entries: readonly EntryRecord[]) =>
  entries.filter((e) => e.kind === "pi.user").map((e) => entryText(e));

test("a 10 MB message is taken whole in the browser engine, titled by its first line, and survives export and import", async () => {
  const { tab, harness } = await engine();
  const text = `the long one\n${"0123456789abcdef ".repeat((10 * 1024 * 1024) / 17)}`;
  expect(text.length).toBeGreaterThan(10 * 1024 * 1024 - 100);
  const id = await tab.conversations.create();
  await tab.run.submit(id, { text });
  await harness.waitForIdle();
  const entries = await tab.watches.entries(id);
  expect(userTexts(entries)).toEqual([text]);
  expect(((await harness.doc(id, TITLE_DOC)) as { title: string }).title).toBe("the long one");
  const copy = await tab.conversations.import((await tab.conversations.export(id)).text);
  expect(userTexts(await tab.watches.entries(copy))).toEqual([text]);
});

test("a 10 MB message to a server space: refused at its socket as too-large, with the call's id; nothing written", async () => {
  const { service, store } = await engine();
  const sent: EngineMessage[] = [];
  const limits = { ...DEFAULT_LIMITS, maxChars: SERVER_MAX_MESSAGE_CHARS };
  const connection = socketTransport(
    { send: (m) => sent.push(JSON.parse(m) as EngineMessage), close: () => undefined },
    { limits, rate: { ratePerSecond: 50, burst: 200 }, now: () => 0 },
  );
  serveConnection({ transport: connection.transport, engine: service, limits });
  const settle = () => new Promise((resolve) => setTimeout(resolve, 0));
  connection.receive(
    JSON.stringify({ id: 1, method: "hello", args: [{ tabId: "t", protocol: PROTOCOL_VERSION }] }),
  );
  connection.receive(JSON.stringify({ id: 2, method: "conversations.create", args: [] }));
  await settle();
  await settle();
  const replies = () => sent.filter((m): m is ReplyMessage => "ok" in m);
  const created = replies().find((r) => r.id === 2);
  expect(created?.ok).toBe(true);
  const before = await storeState(store);
  const big = "x".repeat(10 * 1024 * 1024);
  connection.receive(
    JSON.stringify({ id: 3, method: "run.submit", args: [created?.ok ? created.value : 0, { text: big }] }),
  );
  await settle();
  const refused = replies().find((r) => r.id === 3);
  expect(refused?.ok).toBe(false);
  if (refused && !refused.ok) {
    expect(refused.error.name).toBe("BadRequest");
    expect(refused.error.code).toBe("too-large");
  }
  expect(await storeState(store)).toEqual(before);
});

/** Every C0 and C1 control, DEL, line and paragraph separators, BOM, lone surrogates of both halves. */
const CONTROLS = Array.from({ length: 32 }, (_, i) => String.fromCharCode(i)).join("");
const NASTY = `start say "hi" C:\\dir\\file ${CONTROLS}\u007f${Array.from({ length: 32 }, (_, i) => String.fromCharCode(0x80 + i)).join("")}\u2028\u2029\ufeff \ud800 x \udfff y \udbff\ud800z \ud83d end`;

test("control characters and lone surrogates: stored exactly, searchable, rendered as text, the same after export and import", async () => {
  const { tab, harness } = await engine();
  expect(NASTY.isWellFormed()).toBe(false);
  const id = await tab.conversations.create();
  await tab.run.submit(id, { text: NASTY });
  await harness.waitForIdle();
  expect(userTexts(await tab.watches.entries(id))).toEqual([NASTY]);
  // Search matches the text as typed, whatever JSON escapes in the stored row (quotes, backslashes, controls).
  for (const needle of ['say "hi"', "C:\\dir\\file", "\u0001\u0002", "\ud800 x \udfff", "\u009f\u2028\u2029"])
    expect(await tab.conversations.search(needle), JSON.stringify(needle)).toEqual([id]);
  const title = (await tab.conversations.list()).find((c) => c.id === id)!.title;
  expect(title.startsWith("start")).toBe(true);

  const html = markdownToHtml(NASTY);
  expect(html).not.toMatch(/<(?!\/?p>)/);

  const { text } = await tab.conversations.export(id);
  expect(text.isWellFormed()).toBe(true); // the file can be written as UTF-8 without loss
  const copy = await tab.conversations.import(text);
  expect(userTexts(await tab.watches.entries(copy))).toEqual([NASTY]);
  expect((await tab.conversations.list()).find((c) => c.id === copy)!.title).toBe(title);
});

/** Queue `count` follow-ups behind a run held at its first request; the gate lets the run go on. */
async function queuedBehindBusyRun(count: number) {
  const gate = deferred<void>();
  // The first request waits for the gate; every answer names the input it answers.
  const respond: FauxResponder = async (request, call) => {
    if (call === 1) await gate.promise;
    const last = request.messages.at(-1);
    const content = last?.content ?? "";
    const said =
      typeof content === "string"
        ? content
        : content.map((c) => ("text" in c && typeof c.text === "string" ? c.text : "")).join("");
    return fauxAssistantMessage(`answer to ${said}`);
  };
  const e = await engine(respond, { record: false });
  const id = await e.tab.conversations.create();
  await e.tab.run.submit(id, { text: "first" });
  const sent = Array.from({ length: count }, (_, i) => `follow-up ${i}`);
  const ids = await Promise.all(sent.map((text, i) => e.tab.run.submit(id, { text, requestId: `f${i}` })));
  return { ...e, id, sent, ids, gate };
}

const inboxTexts = (state: InboxState | undefined) =>
  (state?.items ?? []).map((item) => JSON.stringify(item));

test("10,000 follow-ups queued behind a busy run: each admitted once, the inbox holds them all, in the order sent", async () => {
  const { harness, id, sent, ids, gate } = await queuedBehindBusyRun(10_000);
  expect(new Set(ids).size).toBe(10_000);
  const items = inboxTexts((await harness.doc(id, DOC.inbox)) as InboxState | undefined);
  expect(items).toHaveLength(10_000);
  // Each item carries its text; they stand in the order they were sent.
  const order = items.map((item) => Number(/"follow-up (\d+)"/.exec(item)?.[1]));
  expect(order).toEqual(sent.map((_, i) => i));
  gate.resolve();
}, 300_000);

/**
 * How many queued follow-ups the answering test sends: 2,000 in CI, the 10,000 with
 * HOSTILE_FOLLOW_UPS=10000 (about a minute at load 10, more than eight minutes at load 40 on 2
 * cores: too long for the unit suite on a shared machine).
 */
const ANSWERED = Number(process.env["HOSTILE_FOLLOW_UPS"] ?? 2_000);

test(`${ANSWERED.toLocaleString("en")} queued follow-ups are answered once each, in the order sent; the inbox ends empty`, async () => {
  // Each answer is one run over the whole conversation, as a provider's request carries it; the
  // model here reads only the last message (pi-ai's faux provider serializes the whole request
  // for its usage estimate: quadratic in the test alone). The inbox takes each item off by a
  // patch, so answering one of N queued items does not store the other N - 1 again: 10,000 took
  // 17 minutes before (the whole queue stored at every answer), about a minute after, at load 10-20.
  const gate = deferred<void>();
  const light = lastMessageModel(gate.promise);
  const store = await memoryStore();
  const harness = await AgentHarness.open(store, {
    models: createModelResolver({ extra: [light.model] }),
    defaultModel: { provider: light.model.provider, modelId: light.model.id },
  });
  closing.push(async () => {
    await harness.close();
    light.unregister();
  });
  const tab = new HarnessEngine({ harness: async () => harness, build: "hostile", tabArrived: () => {} }).tab(
    "hostile",
  );
  const id = await tab.conversations.create();
  await tab.run.submit(id, { text: "first" });
  const sent = Array.from({ length: ANSWERED }, (_, i) => `follow-up ${i}`);
  const ids = await Promise.all(sent.map((text, i) => tab.run.submit(id, { text, requestId: `f${i}` })));
  expect(new Set(ids).size).toBe(ANSWERED);
  gate.resolve();
  await harness.waitForIdle();
  const entries = await tab.watches.entries(id);
  expect(userTexts(entries)).toEqual(["first", ...sent]);
  const answers = entries.filter((e) => e.kind === "pi.assistant").map((e) => entryText(e));
  expect(answers).toEqual(["first", ...sent].map((t) => `answer to ${t}`));
  expect(inboxTexts((await harness.doc(id, DOC.inbox)) as InboxState | undefined)).toEqual([]);
  for (const sub of ids)
    expect((await harness.submissionRecord(sub))?.status, `submission ${sub}`).toBe("done");
}, 900_000);

test("queueing and answering follow-ups store each item as a patch: the inbox is never stored whole again", async () => {
  const { store, tab, harness, id, sent, gate } = await queuedBehindBusyRun(3);
  gate.resolve();
  await harness.waitForIdle();
  expect(userTexts(await tab.watches.entries(id))).toEqual(["first", ...sent]);
  const rows = (await storeState(store)).tables;
  const inboxRow = rows["documents"]!.find((r) => (r as { name: string }).name === DOC.inbox) as {
    value: string;
  };
  expect(JSON.parse(inboxRow.value)).toEqual({ items: [] }); // as the conversation's creation wrote it
  const ops = rows["doc_patches"]!.filter((r) => (r as { name: string }).name === DOC.inbox).map(
    (r) => JSON.parse((r as { op: string }).op) as { path: unknown[]; set?: unknown; remove?: true },
  );
  expect(ops.map((op) => [op.path, "remove" in op ? "remove" : "set"])).toEqual([
    [["items", 0], "set"],
    [["items", 1], "set"],
    [["items", 2], "set"],
    [["items", 0], "remove"],
    [["items", 0], "remove"],
    [["items", 0], "remove"],
  ]);
});
