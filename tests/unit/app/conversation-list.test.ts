/**
 * The app's conversation list (worker/app/conversation-list.ts) and text search
 * (worker/app/search.ts): built from the store, kept from commits, coalesced for a
 * slow watcher; titles from a first input; search on message text only.
 */

import { fauxAssistantMessage, fauxToolCall } from "@mariozechner/pi-ai";
import { describe, expect, test } from "vitest";
import {
  ConversationList,
  defaultTitle,
  TITLE_DOC,
  titleFromInput,
} from "../../../worker/app/conversation-list.ts";
import { searchConversationText } from "../../../worker/app/search.ts";
import type { ConversationSummary } from "../../../worker/protocol/index.ts";
import { deferred, until } from "../../../worker/testing.ts";
import { callsThenAnswer, echo, gatedTool, liveOf, open, reopen } from "../agent/fixtures.ts";

describe("titleFromInput", () => {
  test("the first non-empty line, whitespace collapsed, cut at 60 characters with an ellipsis", () => {
    expect(titleFromInput("\n  plan   the trip\nto Rome")).toBe("plan the trip");
    expect(titleFromInput("   \n\t")).toBeUndefined();
    const long = titleFromInput("x".repeat(100))!;
    expect(long).toHaveLength(60);
    expect(long.endsWith("…")).toBe(true);
  });
});

describe("ConversationList", () => {
  test("read from the store: titles, default titles, busy runs; conversations owned by a task are not listed", async () => {
    const hold = gatedTool();
    const { h, root, store, faux } = await open(callsThenAnswer(fauxToolCall("hold", {}, { id: "c1" })), {
      tools: [hold.tool],
    });
    const named = await h.createConversation({ ownership: { kind: "ownerless" } });
    await h.transaction((tx) => tx.writeDoc(named.id, TITLE_DOC, { title: "Trip to Rome" }));
    const plain = await h.createConversation({ ownership: { kind: "ownerless" } });
    await root.submit({ type: "input", content: "go" });
    await hold.started.promise;
    const taskId = liveOf(h).tools![0]!.taskId!;
    const owned = await h.createConversation({ ownership: { kind: "task", taskId } });
    const expected = [
      { id: 1, title: "Main", busy: true },
      { id: named.id, title: "Trip to Rome", busy: false },
      { id: plain.id, title: defaultTitle(plain.id), busy: false },
    ];
    const list = await ConversationList.open(h);
    expect(await list.list()).toEqual(expected);
    expect((await list.listedAmong([owned.id])).has(owned.id)).toBe(false);
    list.close();
    // The same from a reopened store, whose documents are not loaded yet (the run resumes busy).
    await h.close();
    const h2 = await reopen(store, { models: faux.models, defaultModel: faux.ref, tools: [hold.tool] });
    const again = await ConversationList.open(h2);
    expect(await again.list()).toEqual(expected);
    again.close();
    hold.release.resolve();
  });

  test("a conversation that moves away: marked moving at step 1, moved with its id there at step 3, idle; unmarked when cancelled; the same from the store", async () => {
    const hold = gatedTool();
    const { h, root, store, faux } = await open(callsThenAnswer(fauxToolCall("hold", {}, { id: "c1" })), {
      tools: [hold.tool],
    });
    const other = await h.createConversation({ ownership: { kind: "ownerless" } });
    await root.submit({ type: "input", content: "go" });
    await hold.started.promise;
    const list = await ConversationList.open(h);
    const seen: ConversationSummary[][] = [];
    list.watch((l) => {
      seen.push(l);
    });
    const of = (id: number) => seen.at(-1)?.find((c) => c.id === id);
    await until(() => seen.length > 0, { what: "the first list" });
    expect(of(1)).toEqual({ id: 1, title: "Main", busy: true });
    await h.prepareMove("T-out", 1);
    await until(() => of(1)?.away !== undefined, { what: "moving" });
    expect(of(1)).toEqual({ id: 1, title: "Main", busy: false, away: { status: "moving" } });
    await h.finishMove("T-out", 42);
    await until(() => of(1)?.away?.status === "moved", { what: "moved" });
    expect(of(1)).toEqual({ id: 1, title: "Main", busy: false, away: { status: "moved", remote: 42 } });
    expect(seen.at(-1)?.find((c) => c.id === 1)?.away).toEqual({ status: "moved", remote: 42 });
    // A cancelled move leaves no mark.
    await h.prepareMove("T-other", other.id);
    await until(() => of(other.id)?.away !== undefined, { what: "the other moving" });
    await h.cancelMove("T-other");
    await until(() => of(other.id)?.away === undefined, { what: "the other unmarked" });
    list.close();
    // From the store: the same marks.
    await h.close();
    const h2 = await reopen(store, { models: faux.models, defaultModel: faux.ref, tools: [hold.tool] });
    const again = await ConversationList.open(h2);
    expect((await again.list()).find((c) => c.id === 1)).toEqual({
      id: 1,
      title: "Main",
      busy: false,
      away: { status: "moved", remote: 42 },
    });
    expect((await again.list()).find((c) => c.id === other.id)?.away).toBeUndefined();
    again.close();
    hold.release.resolve();
  });

  test("kept from commits: a new conversation, a rename and a run's busy and idle reach a watcher", async () => {
    const hold = gatedTool();
    const { h, root } = await open(
      (req) =>
        req.messages.some((m) => m.role === "toolResult")
          ? fauxAssistantMessage("done")
          : fauxAssistantMessage([{ type: "toolCall", id: "c1", name: "hold", arguments: {} }], {
              stopReason: "toolUse",
            }),
      { tools: [hold.tool] },
    );
    const list = await ConversationList.open(h);
    const seen: ConversationSummary[][] = [];
    const stop = list.watch((l) => {
      seen.push(l);
    });
    await until(() => seen.length === 1, { what: "the first list" });
    const c = await h.createConversation({ ownership: { kind: "ownerless" } });
    await until(() => seen.at(-1)?.some((s) => s.id === c.id) === true, { what: "the new conversation" });
    await h.transaction((tx) => tx.writeDoc(c.id, TITLE_DOC, { title: "Renamed" }));
    await until(() => seen.at(-1)?.find((s) => s.id === c.id)?.title === "Renamed", { what: "the rename" });
    await root.submit({ type: "input", content: "go" });
    await until(() => seen.at(-1)?.find((s) => s.id === 1)?.busy === true, { what: "busy" });
    hold.release.resolve();
    await root.waitForIdle();
    await until(() => seen.at(-1)?.find((s) => s.id === 1)?.busy === false, { what: "idle again" });
    // Only changes reach the watcher: streaming and tool progress of the run did not resend the list.
    expect(seen.length).toBeLessThanOrEqual(5);
    stop();
    list.close();
  });

  test("a deleted conversation leaves a watcher's list; a search no longer finds it", async () => {
    const { h } = await open(echo);
    const list = await ConversationList.open(h);
    const seen: ConversationSummary[][] = [];
    const stop = list.watch((l) => {
      seen.push(l);
    });
    const c = await h.createConversation({ ownership: { kind: "ownerless" } });
    await c.submit({ type: "input", content: "a word to find" });
    await c.waitForIdle();
    await until(() => seen.at(-1)?.some((s) => s.id === c.id) === true, { what: "the new conversation" });
    expect(await searchConversationText(h.store, "word to find")).toEqual([c.id]);
    await h.deleteConversation(c.id);
    await until(() => seen.at(-1)?.some((s) => s.id === c.id) === false, { what: "the deletion" });
    expect((await list.listedAmong([c.id])).has(c.id)).toBe(false);
    expect((await list.list()).map((s) => s.id)).toEqual([1]);
    expect(await searchConversationText(h.store, "word to find")).toEqual([]);
    stop();
    list.close();
  });

  test("a slow watcher holds one list, not a queue: after its delivery resolves it gets only the newest", async () => {
    const { h } = await open(echo);
    const list = await ConversationList.open(h);
    const gate = deferred<void>();
    const seen: number[] = [];
    list.watch((l) => {
      seen.push(l.length);
      return seen.length === 1 ? gate.promise : undefined;
    });
    await until(() => seen.length === 1, { what: "the first delivery" });
    for (let i = 0; i < 5; i++) await h.createConversation({ ownership: { kind: "ownerless" } });
    expect(seen).toEqual([1]);
    gate.resolve();
    await until(() => seen.length === 2, { what: "the newest list" });
    expect(seen).toEqual([1, 6]);
    list.close();
  });

  test("a delivery that rejects (the tab went away) ends that watcher", async () => {
    const { h } = await open(echo);
    const list = await ConversationList.open(h);
    let calls = 0;
    let ended = false;
    list.watch(
      () => {
        calls++;
        return Promise.reject(new Error("port closed"));
      },
      () => (ended = true),
    );
    await until(() => ended, { what: "the watcher to end" });
    await h.createConversation({ ownership: { kind: "ownerless" } });
    expect(calls).toBe(1);
    list.close();
  });
});

describe("searchConversationText", () => {
  test("finds user and assistant text case-insensitively, newest first, never JSON keys or wildcards", async () => {
    const { h, root } = await open(echo);
    await root.submit({ type: "input", content: "Plan a trip to ROME" });
    await root.waitForIdle();
    const other = await h.createConversation({ ownership: { kind: "ownerless" } });
    await other.submit({ type: "input", content: "bake bread at 100% heat" });
    await other.waitForIdle();
    expect(await searchConversationText(h.store, "rome")).toEqual([1]);
    // The echo model repeats the input: assistant text is searched too, and both conversations match.
    expect(await searchConversationText(h.store, "echo:")).toEqual([other.id, 1]);
    expect(await searchConversationText(h.store, "role")).toEqual([]);
    expect(await searchConversationText(h.store, "100%")).toEqual([other.id]);
    expect(await searchConversationText(h.store, "%")).toEqual([other.id]);
    expect(await searchConversationText(h.store, "_")).toEqual([]);
    expect(await searchConversationText(h.store, "  ")).toEqual([]);
  });
});
