/**
 * A tab naming a conversation the agent's open did not load (issue 30 item 4: the agent harness
 * opens without reading every conversation's record; docs/ARCHITECTURE.md, "Flat as the store
 * grows"). After a reopen, idle conversations have no record in memory; each test first asserts
 * that, then asks the engine what a tab asks: open it (its view, its events, its timeline, its
 * usage), post to it (an input, a schedule, a rename), export it (the file, the trace), move it
 * (the size check reads its entries), and the list's page and total after a creation and a
 * deletion of one not loaded. Each of these answered UnknownConversation, skipped a check or
 * counted only the loaded records while the callers read records synchronously.
 */
import { describe, expect, test } from "vitest";
import type { AgentHarness } from "../../../worker/agent/harness.ts";
import { TITLE_DOC } from "../../../worker/app/conversation-list.ts";
import { HarnessEngine } from "../../../worker/app/engine-service.ts";
import { SCHEDULE_DOCUMENTS, scheduleTask } from "../../../worker/app/schedules.ts";
import { type MovePeer, MoveRefused, Moves } from "../../../worker/index.ts";
import type { ConversationPage, WatchFrame } from "../../../worker/protocol/index.ts";
import { until } from "../../../worker/testing.ts";
import { echo, open, reopen } from "../agent/fixtures.ts";

/** A store with `n` idle titled conversations, each with one answered question; reopened. */
async function reopened(n: number) {
  const first = await open(echo);
  const ids: number[] = [];
  for (let i = 0; i < n; i++) {
    const c = await first.h.createConversation({ ownership: { kind: "ownerless" } });
    await first.h.transaction((tx) => tx.writeDoc(c.id, TITLE_DOC, { title: `Topic ${i + 1}` }));
    await (await c.submit({ type: "input", content: `question ${i + 1}` })).wait();
    ids.push(c.id);
  }
  await first.h.close();
  let opened: AgentHarness | undefined;
  const h = await reopen(first.store, {
    models: first.faux.models,
    defaultModel: first.faux.ref,
    tasks: [scheduleTask(() => opened!)],
    documents: SCHEDULE_DOCUMENTS,
  });
  opened = h;
  for (const id of ids) expect(h.conversationRecord(id), `conversation ${id} not loaded`).toBeUndefined();
  const engine = new HarnessEngine({ harness: async () => h, build: "test" });
  return { h, ids, tab: engine.tab("t") };
}

describe("a tab naming a conversation the open did not load", () => {
  test("opens it: its view, its events, its timeline and its usage", async () => {
    const { ids, tab } = await reopened(3);
    const frames: WatchFrame[] = [];
    await tab.watches.conversation(ids[0]!, (frame) => void frames.push(frame));
    expect(JSON.stringify(frames[0])).toContain("question 1");
    const events: unknown[] = [];
    await tab.watches.events(ids[1]!, (batch) => void events.push(...batch));
    expect(events.length).toBeGreaterThan(0);
    const timeline = await tab.timeline.page(ids[2]!, {});
    expect(timeline.bars.length).toBeGreaterThan(0);
    expect((await tab.usage.conversation(ids[2]!)).children).toEqual([]);
    expect((await tab.watches.entries(ids[2]!)).map((e) => e.kind)).toContain("pi.user");
  });

  test("posts to it: an input answered, a schedule, a rename", async () => {
    const { h, ids, tab } = await reopened(3);
    await tab.run.submit(ids[0]!, { text: "once more" });
    await h.waitForConversationIdle(ids[0]!);
    const entries = await tab.watches.entries(ids[0]!);
    expect(JSON.stringify(entries.at(-1))).toContain("once more");
    const schedule = await tab.schedules.create(ids[1]!, {
      text: "tick",
      when: { kind: "once", at: h.now() + 3_600_000 },
      timeZone: "UTC",
      catchUp: "skip",
    });
    expect(schedule.text).toBe("tick");
    await tab.conversations.rename(ids[2]!, "Renamed");
    expect((await tab.conversations.searchPage("renamed", { limit: 5 })).items.map((c) => c.id)).toEqual([
      ids[2],
    ]);
  });

  test("exports it: the file and the trace", async () => {
    const { ids, tab } = await reopened(2);
    const file = await tab.conversations.export(ids[0]!);
    expect(file.text).toContain("question 1");
    const trace = await tab.traces.export(ids[1]!);
    expect(trace.text.length).toBeGreaterThan(0);
  });

  test("moves it: the size check reads its entries first", async () => {
    const { h, ids } = await reopened(1);
    const heard: string[] = [];
    const never = (name: string) => () => {
      heard.push(name);
      throw new Error(`the peer was asked to ${name}`);
    };
    const peer: MovePeer = {
      prepare: never("prepare"),
      adopt: never("adopt"),
      finish: never("finish"),
      refuse: never("refuse"),
      cancel: never("cancel"),
    };
    const moves = new Moves(h, { peer: () => peer, maxPackageChars: () => 10 });
    const refused = await moves.moveOut(ids[0]!, "server").catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(MoveRefused);
    expect(refused).toMatchObject({ reason: "too_large" });
    expect(heard).toEqual([]);
    expect(h.awayOf(ids[0]!)).toBeUndefined();
  });

  test("the list's page and total follow a creation and the deletion of one not loaded", async () => {
    const { h, ids, tab } = await reopened(4);
    const pages: ConversationPage[] = [];
    await tab.conversations.watchPage({ limit: 2 }, (p) => void pages.push(p));
    await until(() => pages.length === 1);
    expect(pages[0]).toMatchObject({ total: 5, items: [{ id: ids[3] }, { id: ids[2] }] });
    const made = await tab.conversations.create("New one");
    await until(() => pages.at(-1)?.total === 6, { what: "the creation" });
    expect(pages.at(-1)!.items.map((c) => c.id)).toEqual([made, ids[3]]);
    // The oldest (outside the page, never loaded) goes: the total follows.
    expect(h.conversationRecord(ids[0]!)).toBeUndefined();
    await tab.conversations.delete(ids[0]!);
    await until(() => pages.at(-1)?.total === 5, { what: "the deletion" });
    expect(pages.at(-1)!.items.map((c) => c.id)).toEqual([made, ids[3]]);
    // One on the page goes: the next older moves in.
    await tab.conversations.delete(made);
    await until(() => pages.at(-1)?.total === 4, { what: "the second deletion" });
    expect(pages.at(-1)!.items.map((c) => c.id)).toEqual([ids[3], ids[2]]);
  });
});
