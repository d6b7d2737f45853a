/**
 * The app's intents (worker/app/intents.ts): each is one engine call and one commit, so a crash
 * leaves none of it or all of it. Swept over every crash point of each intent and the run it starts:
 * a store that holds a new conversation holds its input (and its settings, its title), and one that
 * holds an input holds its title. The same sweep over the multi-call sequences the intents replace
 * (the engine's submit, the tab's edit-and-resend, reproduced below as they were) finds the half
 * intents those left: that is what would fail without the change.
 */
import { randomUUID } from "node:crypto";
import { isDeepStrictEqual } from "node:util";
import { afterAll, describe, expect, test } from "vitest";
import { AgentHarness } from "../../../worker/agent/harness.ts";
import type { AgentState } from "../../../worker/agent/records.ts";
import { TITLE_DOC, titleFromInput } from "../../../worker/app/conversation-list.ts";
import {
  createTitled,
  forkTitle,
  importTitled,
  resendAsFork,
  submitWithTitle,
} from "../../../worker/app/intents.ts";
import { exportConversation } from "../../../worker/app/transfer.ts";
import type { ConversationId, EntryId } from "../../../worker/core/types.ts";
import type { MemoryImage } from "../../../worker/store/open.ts";
import {
  CRASH_MODES,
  CRASH_SWEEP_TEST_TIMEOUT_MS,
  type CrashMode,
  type CrashScenario,
  crashSweep,
  fauxAgentModel,
  memoryStore,
} from "../../../worker/testing.ts";
import { echo, messageOf, textOf } from "../agent/fixtures.ts";

const faux = fauxAgentModel(echo);
afterAll(() => faux.unregister());
const options = { models: faux.models, defaultModel: faux.ref };
const OWNERLESS = { ownership: { kind: "ownerless" } } as const;

/** The source's settings a resend of its first message carries over. */
const SOLO_AGENT = { model: faux.ref, thinkingLevel: "high", instructions: "answer in French" } as const;

/**
 * The committed state every run starts from: the main conversation (titled "plan the trip") with two
 * exchanges; conversation 2, empty and untitled; conversation 3 ("bonjour"), one exchange, with
 * SOLO_AGENT's settings.
 */
interface Seed {
  image: MemoryImage;
  /** The second question of the main conversation: its resend forks after the first answer. */
  second: EntryId;
  /** The first (only) question of conversation 3: its resend makes a new conversation. */
  soloFirst: EntryId;
}

const firstUserEntry = async (h: AgentHarness, c: ConversationId, text: string) =>
  (await (await h.requireLoadedConversation(c)).entries()).find(
    (e) => e.kind === "pi.user" && textOf(messageOf(e)) === text,
  )!.id;

async function seed(): Promise<Seed> {
  const store = await memoryStore();
  const h = await AgentHarness.open(store, options);
  await h.root();
  await submitWithTitle(h, 1, { text: "plan the trip", requestId: "seed-1" });
  await h.waitForIdle();
  await submitWithTitle(h, 1, { text: "which hotel?", requestId: "seed-2" });
  const empty = await h.createConversation(OWNERLESS);
  const solo = await h.createConversation({ ...OWNERLESS, agent: SOLO_AGENT });
  expect([empty.id, solo.id]).toEqual([2, 3]);
  await submitWithTitle(h, solo.id, { text: "bonjour", requestId: "seed-3" });
  await h.waitForIdle();
  const seeded = {
    second: await firstUserEntry(h, 1, "which hotel?"),
    soloFirst: await firstUserEntry(h, 3, "bonjour"),
  };
  await h.close();
  return { image: store.image(), ...seeded };
}

const seeded = seed();

/** What the store holds of one conversation: its title, its own inputs, its stored settings. */
interface Held {
  id: ConversationId;
  title: string | undefined;
  inputs: string[];
  agent: AgentState;
}

async function held(h: AgentHarness, id: ConversationId): Promise<Held> {
  // A reopened store's idle conversation loads when named.
  const conversation = await h.requireLoadedConversation(id);
  const own = (await conversation.entries()).filter((e) => e.conversationId === id);
  const { model, thinkingLevel, instructions } = await conversation.agentState();
  return {
    id,
    title: ((await h.doc(id, TITLE_DOC)) as { title?: string } | undefined)?.title,
    inputs: own.filter((e) => e.kind === "pi.user").map((e) => textOf(messageOf(e))),
    agent: {
      ...(model ? { model } : {}),
      ...(thinkingLevel ? { thinkingLevel } : {}),
      ...(instructions ? { instructions } : {}),
    },
  };
}

/** The conversations the runs made (the seed has 1..3). */
async function made(h: AgentHarness): Promise<Held[]> {
  // From the store: a reopened harness loads conversation records on demand.
  const rows = await h.store.read((sql) =>
    sql.all("SELECT id FROM conversations WHERE id > 3 AND owner_task IS NULL ORDER BY id"),
  );
  const ids = rows.map((row) => Number(row["id"]));
  return Promise.all(ids.map((id) => held(h, id)));
}

/** How much of the intent a store holds. */
type Amount = "none" | "all" | "half";

/** One intent as a client drives it, and how to tell what of it a store holds. */
interface Intent {
  name: string;
  /** What of the intent the engine's committed state holds now, and what exactly. */
  look(h: AgentHarness, s: Seed): Promise<{ amount: Amount; what: unknown }>;
  /** Do the intent (again: after a crash the client sees no answer and acts again). */
  run(h: AgentHarness, s: Seed): Promise<void>;
}

const TEXT = "book the flights\nand the hotel";
const EDITED = "which hotel near the station?";
const EDITED_FIRST = "salut";

/** Everything the intents do and the old sequences did, by how it reads in the committed store. */
const looks = {
  /** Conversation 2 takes TEXT with the title "book the flights". */
  async submitted(h: AgentHarness) {
    const c = await held(h, 2);
    const what = { inputs: c.inputs, title: c.title };
    if (c.inputs.length === 0 && c.title === undefined) return { amount: "none" as const, what };
    const all = c.inputs.length === 1 && c.inputs[0] === TEXT && c.title === titleFromInput(TEXT);
    return { amount: all ? ("all" as const) : ("half" as const), what };
  },
  /** A fork of the main conversation, "plan the trip (fork)", holding EDITED. */
  async forked(h: AgentHarness) {
    const what = await made(h);
    if (what.length === 0) return { amount: "none" as const, what };
    const all =
      what.length === 1 && what[0]!.title === "plan the trip (fork)" && what[0]!.inputs.join() === EDITED;
    return { amount: all ? ("all" as const) : ("half" as const), what };
  },
  /** A new conversation with conversation 3's settings, titled "salut", holding EDITED_FIRST. */
  async renewed(h: AgentHarness) {
    const what = await made(h);
    if (what.length === 0) return { amount: "none" as const, what };
    const c = what[0]!;
    const all =
      what.length === 1 &&
      c.title === EDITED_FIRST &&
      c.inputs.join() === EDITED_FIRST &&
      isDeepStrictEqual(c.agent, SOLO_AGENT);
    return { amount: all ? ("all" as const) : ("half" as const), what };
  },
};

const INTENTS: Intent[] = [
  {
    name: "submit-with-title",
    look: looks.submitted,
    // A client that saw no answer sends again with the same request id.
    run: async (h) => void (await submitWithTitle(h, 2, { text: TEXT, requestId: "client-1" })),
  },
  {
    name: "resend-as-fork (a fork at the entry before)",
    look: looks.forked,
    run: async (h, s) => void (await resendAsFork(h, 1, s.second, EDITED)),
  },
  {
    name: "resend-as-fork (the first message: a new conversation with the source's settings)",
    look: looks.renewed,
    run: async (h, s) => void (await resendAsFork(h, 3, s.soloFirst, EDITED_FIRST)),
  },
];

// --- The sequences the intents replace, as they were ------------------------------------------

/** EngineHost.submit before: the input in one commit, then the title in a second transaction. */
async function oldSubmit(
  h: AgentHarness,
  id: ConversationId,
  text: string,
  requestId: string,
): Promise<void> {
  await (await h.requireLoadedConversation(id)).submit({
    type: "input",
    content: text,
    whenBusy: "followUp",
    requestId,
  });
  const title = titleFromInput(text);
  if (title && (await h.doc(id, TITLE_DOC)) === undefined)
    await h.transaction((tx) => tx.writeDoc(id, TITLE_DOC, { title }));
}

/**
 * Chat.svelte's resendAsFork before: forkConversation, or agentSettings + createConversation +
 * setModel + configureAgent, then submit (itself two commits): one commit per engine call.
 */
async function oldResend(
  h: AgentHarness,
  source: ConversationId,
  entryId: EntryId,
  text: string,
): Promise<void> {
  const before = (await h.entryPage(source, { before: entryId, limit: 1 })).entries.at(-1);
  let id: ConversationId;
  if (before)
    id = (
      await h.forkConversation(source, before.id, { ...OWNERLESS, init: (tx, c) => forkTitle(tx, source, c) })
    ).id;
  else {
    const settings = await (await h.requireLoadedConversation(source)).agentState();
    id = (await h.createConversation(OWNERLESS)).id;
    if (settings.model) await h.requireConversation(id).configure({ model: settings.model });
    if (settings.thinkingLevel || settings.instructions)
      await h.requireConversation(id).configure({
        ...(settings.thinkingLevel ? { thinkingLevel: settings.thinkingLevel } : {}),
        ...(settings.instructions ? { instructions: settings.instructions } : {}),
      });
  }
  await oldSubmit(h, id, text, randomUUID());
}

const OLD: Intent[] = [
  { ...INTENTS[0]!, run: (h) => oldSubmit(h, 2, TEXT, "client-1") },
  { ...INTENTS[1]!, run: (h, s) => oldResend(h, 1, s.second, EDITED) },
  { ...INTENTS[2]!, run: (h, s) => oldResend(h, 3, s.soloFirst, EDITED_FIRST) },
];

// --- The sweep ----------------------------------------------------------------------------------

interface RunState {
  /** What the store held each time an engine opened on it, before the client acted. */
  seen: Array<{ amount: Amount; what: unknown }>;
}

function scenario(intent: Intent, s: Seed): CrashScenario<AgentHarness, RunState, Amount> {
  return {
    name: intent.name,
    image: s.image,
    services: () => ({ seen: [] }),
    open: (store, _services, engine) => AgentHarness.open(store, { ...options, ...engine }),
    finish: async (h, run) => {
      const at = await intent.look(h, s);
      run.seen.push(at);
      // The client acts unless the store holds the whole intent (a half one it cannot see as such).
      if (at.amount !== "all") await intent.run(h, s);
      await h.waitForIdle();
      return (await intent.look(h, s)).amount;
    },
  };
}

/**
 * Crash points each sweep covered when it was written (the intent's commit, then its run's), by
 * mode: the floor it must not fall below.
 */
const FLOOR = [3, 4, 3] as const;

/** Every store state the sweep saw at an engine's open, with the run that saw it. */
async function sweep(
  intent: Intent,
  mode: CrashMode,
  atLeast: number,
): Promise<Array<{ label: string; amount: Amount; what: unknown }>> {
  const s = await seeded;
  const seen: Array<{ label: string; amount: Amount; what: unknown }> = [];
  await crashSweep(scenario(intent, s), {
    mode,
    atLeast,
    check: ({ services, label }) => {
      for (const at of services.seen) seen.push({ label, ...at });
    },
  });
  return seen;
}

describe("a crash sweep over each intent: the store holds none of it or all of it", () => {
  for (const intent of INTENTS)
    for (const [m, mode] of CRASH_MODES.entries())
      test(`${intent.name} (${mode.name})`, { timeout: CRASH_SWEEP_TEST_TIMEOUT_MS }, async () => {
        const seen = await sweep(intent, mode, FLOOR[m]!);
        expect(seen.filter((at) => at.amount === "half")).toEqual([]);
        // The sweep did cut before and after the intent's commit.
        expect(new Set(seen.map((at) => at.amount))).toEqual(new Set(["none", "all"]));
      });
});

describe("the sequences the intents replace left half an intent at some crash point", () => {
  const mode = CRASH_MODES[1]!; // one commit per transaction, crash after COMMIT
  test(`the engine's old submit: an input without its title (${mode.name})`, {
    timeout: CRASH_SWEEP_TEST_TIMEOUT_MS,
  }, async () => {
    const halves = (await sweep(OLD[0]!, mode, 6)).filter((at) => at.amount === "half");
    expect(halves.map((at) => at.what)).toContainEqual({ inputs: [TEXT], title: undefined });
  });
  test(`the tab's old edit-and-resend at a later message: a fork without the resent text (${mode.name})`, {
    timeout: CRASH_SWEEP_TEST_TIMEOUT_MS,
  }, async () => {
    const halves = (await sweep(OLD[1]!, mode, 5)).filter((at) => at.amount === "half");
    expect(halves.map((at) => at.what)).toContainEqual([
      expect.objectContaining({ title: "plan the trip (fork)", inputs: [] }),
    ]);
  });
  test(`the tab's old edit-and-resend of a first message: a conversation without its settings or its input (${mode.name})`, {
    timeout: CRASH_SWEEP_TEST_TIMEOUT_MS,
  }, async () => {
    const halves = (await sweep(OLD[2]!, mode, 9)).filter((at) => at.amount === "half");
    const what = halves.map((at) => at.what);
    expect(what).toContainEqual([expect.objectContaining({ agent: {}, inputs: [], title: undefined })]);
    expect(what).toContainEqual([
      expect.objectContaining({ agent: SOLO_AGENT, inputs: [EDITED_FIRST], title: undefined }),
    ]);
  });
});

describe("each intent is one transaction", () => {
  test("submit-with-title, both resends, a titled new conversation and an import each commit once", async () => {
    const s = await seeded;
    const store = await memoryStore(s.image);
    // Paused: no task runs, so every transaction counted is the intent's.
    const h = await AgentHarness.open(store, { ...options, paused: true });
    const commits = async (intent: () => Promise<unknown>) => {
      const before = store.stats.transactions;
      await intent();
      return store.stats.transactions - before;
    };
    const exported = await exportConversation(h, 1, { documents: [], secrets: [] });
    expect(await commits(() => submitWithTitle(h, 2, { text: TEXT }))).toBe(1);
    expect(await commits(() => resendAsFork(h, 1, s.second, EDITED))).toBe(1);
    expect(await commits(() => resendAsFork(h, 3, s.soloFirst, EDITED_FIRST))).toBe(1);
    expect(await commits(() => createTitled(h, "  a   named one "))).toBe(1);
    expect(await commits(() => importTitled(h, exported, { documents: [TITLE_DOC] }))).toBe(1);
    const [fork, renewed, named, imported] = await made(h);
    expect(await looks.submitted(h)).toMatchObject({ amount: "all" });
    expect(fork).toMatchObject({ title: "plan the trip (fork)", inputs: [EDITED] });
    expect(renewed).toMatchObject({ title: EDITED_FIRST, inputs: [EDITED_FIRST], agent: SOLO_AGENT });
    expect(named).toMatchObject({ title: "a named one", inputs: [] });
    expect(imported).toMatchObject({
      title: "Imported conversation",
      inputs: ["plan the trip", "which hotel?"],
    });
    // The runs the intents started answer once the harness runs.
    h.resume();
    await h.waitForIdle();
    expect((await h.requireConversation(fork!.id).entries()).map((e) => textOf(messageOf(e)))).toEqual([
      "plan the trip",
      "echo: plan the trip",
      EDITED,
      `echo: ${EDITED}`,
    ]);
    await h.close();
  });

  test("a refused intent writes nothing: an unknown entry, a blank text, a blank title", async () => {
    const s = await seeded;
    const store = await memoryStore(s.image);
    const h = await AgentHarness.open(store, { ...options, paused: true });
    const before = store.stats.transactions;
    await expect(resendAsFork(h, 1, s.second, "   ")).rejects.toThrow(TypeError);
    await expect(resendAsFork(h, 99, s.second, EDITED)).rejects.toMatchObject({
      name: "UnknownConversation",
    });
    await expect(createTitled(h, " \n ")).rejects.toThrow(TypeError);
    expect(store.stats.transactions).toBe(before);
    expect(await made(h)).toEqual([]);
    await h.close();
  });
});

describe("the submit intent's mode", () => {
  test("submit-with-title queues by the request's mode on a busy conversation: steer as a steer, followUp and none as follow-ups, in the inbox and in each record (draw 37b)", async () => {
    // Draw 37bC: every queued-mode test submitted through the engine's own handles; the app's
    // submit intent always asking for a follow-up (its request's mode dropped) passed them all.
    const h = await AgentHarness.open(await memoryStore(), { ...options, paused: true });
    const c = (await h.root()).id;
    // Paused: the first input is placed and its run started, so the conversation stays busy.
    expect((await submitWithTitle(h, c, { text: "first" })).status).toBe("placed");
    const steer = await submitWithTitle(h, c, { text: "steer now", mode: "steer" });
    const follow = await submitWithTitle(h, c, { text: "after that", mode: "followUp" });
    const plain = await submitWithTitle(h, c, { text: "and then" });
    expect([steer, follow, plain].map((s) => [s.status, s.mode])).toEqual([
      ["queued", "steer"],
      ["queued", "followUp"],
      ["queued", "followUp"],
    ]);
    const inbox = (await h.doc(c, "pi.inbox")) as { items: Array<{ id: number; mode: string }> };
    expect(inbox.items.map((i) => [i.id, i.mode])).toEqual([
      [steer.id, "steer"],
      [follow.id, "followUp"],
      [plain.id, "followUp"],
    ]);
    await h.close();
  });
});
