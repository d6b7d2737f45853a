/**
 * The app engine's open over a lent store (issue 30 item 2): every message to the lent worker whose
 * answer the engine awaits is a round trip between two workers, and the open's reads used to be one
 * round trip each, one after another. Counted (`LentStore.roundTrips`), never timed: the app's open
 * over a store holding a running ticker, finished tasks and idle conversations, from the lent
 * store's open to the harness handed over; and the open reads what an open over the memory store
 * reads (the same tasks, records and documents), so the batching changes the cost, not the result.
 */
import { expect, test } from "vitest";
import type { AgentHarness } from "../../../worker/agent/harness.ts";
import { openAppHarness } from "../../../worker/app/app-agent.ts";
import { tickerTask } from "../../../worker/debug/ticker.ts";
import { ROOT_CONVERSATION_ID } from "../../../worker/index.ts";
import { tickEntry } from "../../../worker/protocol/index.ts";
import { type LentStore, openLentStore } from "../../../worker/store/lent/client.ts";
import { serveLentStore } from "../../../worker/store/lent/server.ts";
import type { MemoryImage } from "../../../worker/store/open.ts";
import { openStore } from "../../../worker/store/open.ts";
import { memoryStore, until } from "../../../worker/testing.ts";
import { appOpenOptions } from "./open-fixtures.ts";

const options = appOpenOptions;

/** A lent store over a memory store holding `image`, behind a real MessageChannel. */
async function lent(image: MemoryImage): Promise<LentStore> {
  const channel = new MessageChannel();
  void serveLentStore(channel.port2, { open: (name) => openStore({ kind: "memory", name, image }) });
  return openLentStore({ port: channel.port1, name: "memory" });
}

/** A store as a reload finds it: a ticker running in the root, finished tasks, idle conversations. */
async function crashedImage(): Promise<MemoryImage> {
  const store = await memoryStore();
  const h = await openAppHarness(store, options());
  for (let i = 0; i < 3; i++) {
    const c = await h.createConversation({ ownership: { kind: "ownerless" } });
    const done = await h.createTask(
      tickerTask,
      { phases: 1, delayMs: 0 },
      { ownership: { kind: "conversation" }, conversationId: c.id },
    );
    await h.waitForTask(done);
  }
  let ticks = 0;
  h.subscribe((change) => {
    for (const e of change.entries) if (tickEntry.is(e)) ticks++;
  });
  await h.createTask(
    tickerTask,
    { phases: 10_000, delayMs: 1 },
    { ownership: { kind: "conversation" }, conversationId: ROOT_CONVERSATION_ID },
  );
  await until(() => ticks >= 2, { what: "the ticker ticking" });
  const image = store.image();
  await h.close();
  return image;
}

/** Which of conversations 1..20 an open has in memory, and its live tasks. */
function loaded(h: AgentHarness): unknown {
  return {
    tasks: h.inspect().tasks.map((t) => [t.record.id, t.record.kind]),
    conversations: Array.from({ length: 20 }, (_, i) => i + 1).filter((id) => h.conversation(id)),
  };
}

/** The round trips `store` made before its first commit began (the open's, as nothing commits in it). */
function untilFirstCommit(store: LentStore): () => number | undefined {
  const before = store.roundTrips;
  let trips: number | undefined;
  const commit = store.commit.bind(store);
  store.commit = (work) =>
    commit((sql) => {
      trips ??= store.roundTrips - before;
      return work(sql);
    });
  return () => trips;
}

test("the app's open over a lent store: its reads in few round trips, loading what it loads over the memory store", async () => {
  const image = await crashedImage();
  const store = await lent(image);
  const trips = untilFirstCommit(store);
  const h = await openAppHarness(store, options());
  await until(() => trips() !== undefined, { what: "the resumed ticker's first commit" });
  const direct = await openAppHarness(await memoryStore(image), options());
  expect(loaded(h)).toEqual(loaded(direct));
  // The schema's check (migrate), then the open's one read in two batches: what it reads by itself
  // (moves, live tasks, ids, task documents, submissions), then what those name (the records of the
  // root and of the conversations live work runs in, and their documents). 15 when each statement
  // was a round trip of its own.
  expect(trips()).toBe(3);
  await h.close();
  await direct.close();
});
