/**
 * Moving a conversation between two homes (worker/core/move.ts, worker/app/moves.ts): two harnesses
 * on two memory stores in one process, joined by `harnessPeer` (every call through JSON). The
 * conversation moves in the middle of a tool round (launch done, stamp running) with a second input
 * queued; the steps' idempotency, cancel, and every refusal (bad package, unknown transfer, writes
 * to a moved conversation, a subagent running, a task kind without a hook) are asserted here; the
 * crash sweep over every step is moves-crash-sweep.test.ts.
 */
import { Value } from "typebox/value";
import { describe, expect, test } from "vitest";
import { moveOps, protocolPeer } from "../../../worker/app/moves.ts";
import {
  ConversationMoved,
  defineTask,
  harnessPeer,
  type MovePackage,
  MoveRefused,
  Moves,
} from "../../../worker/index.ts";
import type { MovesApi } from "../../../worker/protocol/api.ts";
import { MOVES_METHODS } from "../../../worker/protocol/schema.ts";
import { EngineError, wireError } from "../../../worker/protocol/wire.ts";
import { memoryStore } from "../../../worker/testing.ts";
import {
  FIRST,
  type Home,
  midToolRound,
  movesSuite,
  openHome,
  release,
  SECOND,
  transcript,
  World,
} from "./moves-fixtures.ts";

const suite = movesSuite();

async function homes(
  world = new World(),
  now?: () => number,
): Promise<{ browser: Home; server: Home; world: World }> {
  const browser = await openHome(
    { name: "browser", held: true },
    await memoryStore(),
    world,
    suite.faux,
    now ? { now } : {},
  );
  const server = await openHome({ name: "server", held: false }, await memoryStore(), world, suite.faux);
  suite.track(browser, server);
  return { browser, server, world };
}

const EXPECTED = [
  "pi.user user: first",
  "pi.system system: ",
  "pi.assistant assistant: call launch|call stamp",
  "pi.tool-result toolResult: launch applied rocket",
  "pi.tool-result toolResult: stamp applied invoice-7",
  "pi.assistant assistant: done first",
  "pi.user user: second",
  "pi.assistant assistant: done second",
];

async function answered(home: Home, c: number): Promise<void> {
  const h = home.harness;
  await h.waitForConversationIdle(c);
  for (const requestId of ["r1", "r2"])
    expect((await h.submissionByRequest(c, requestId))?.status, requestId).toBe("done");
}

describe("moving a conversation", () => {
  test("moveOut in the middle of a tool round with a queued input: whole in the new home, read-only here", async () => {
    // The browser runs on its own clock (break 31D: lifecycle times across a move).
    let clock = 5_000_000;
    const { browser, server, world } = await homes(new World(), () => clock);
    const c = await midToolRound(browser);
    const live = (await browser.harness.tasks()).filter((t) => t.state.status !== "terminal");
    expect(live.length).toBeGreaterThan(0);
    expect(live.map((t) => t.startedAt)).toEqual(live.map(() => 5_000_000));
    clock = 6_000_000;
    const moves = new Moves(browser.harness, { peer: () => harnessPeer(() => server.harness) });
    const result = await moves.moveOut(c, "server");
    expect(result.status).toBe("done");
    const remote = (result as { remote: number }).remote;
    await answered(server, remote);
    // Ended here by the move on this harness's clock, their start kept; carried there with their
    // start (the server's own clock would stamp a new one).
    for (const t of live)
      expect(await browser.harness.getTask(t.id)).toMatchObject({ startedAt: 5_000_000, endedAt: 6_000_000 });
    expect(
      (await server.harness.tasks()).filter((t) => t.startedAt === 5_000_000).length,
    ).toBeGreaterThanOrEqual(live.length);
    const there = server.harness.requireConversation(remote);
    expect(transcript(await there.entries())).toEqual(EXPECTED);
    // The queued input moved with its request id, and was answered there.
    expect((await server.harness.submissionByRequest(remote, "r2"))?.status).toBe("done");
    // Each tool's effect once: launch ran before the move, stamp ran again (safe) in the new home.
    expect(world.launch.calls).toBe(1);
    expect(world.stamp.applied.map((a) => a.key)).toEqual(["stamp:call-stamp"]);
    expect(world.violations).toEqual([]);
    // Here: a read-only copy marked as living there, its tasks ended, nothing of it runs.
    expect(browser.harness.awayOf(c)).toMatchObject({ status: "done", remote });
    const local = browser.harness.requireConversation(c);
    expect(transcript(await local.entries())).toEqual(EXPECTED.slice(0, 4));
    expect((await browser.harness.tasks()).filter((t) => t.state.status !== "terminal")).toEqual([]);
    // Ended, they carry no memos (spec §5.1; the stamp tool's task held one when it moved).
    expect((await browser.harness.tasks()).filter((t) => t.memos !== undefined)).toEqual([]);
    // A wait on a submission left here ends: it is answered in the new home.
    const left = await browser.harness.submissionByRequest(c, "r2");
    expect(await (await browser.harness.submission(left!.id))!.wait()).toMatchObject({
      status: "unanswered",
      reason: "moved",
    });
    const refused = await local.submit({ type: "input", content: "more" }).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(ConversationMoved);
    expect(refused).toMatchObject({ status: "moved", remote });
    await expect(local.configure({ instructions: "x" })).rejects.toBeInstanceOf(ConversationMoved);
    await expect(local.abort()).rejects.toBeInstanceOf(ConversationMoved);
  });

  test("bringBack from the server: the browser's intent drives the server's steps 1 and 3", async () => {
    const world = new World();
    const browser = await openHome({ name: "browser", held: false }, await memoryStore(), world, suite.faux);
    const server = await openHome({ name: "server", held: true }, await memoryStore(), world, suite.faux);
    suite.track(browser, server);
    const remote = await midToolRound(server);
    const moves = new Moves(browser.harness, { peer: () => harnessPeer(() => server.harness) });
    const result = await moves.bringBack(remote, "server");
    expect(result.status).toBe("done");
    const local = (result as { local: number }).local;
    await answered(browser, local);
    expect(transcript(await browser.harness.requireConversation(local).entries())).toEqual(EXPECTED);
    expect(server.harness.awayOf(remote)).toMatchObject({ status: "done", remote: local });
    expect(world.launch.calls).toBe(1);
    expect(world.stamp.applied).toHaveLength(1);
    expect(world.violations).toEqual([]);
  });

  test("each step is idempotent: step 1 gives the same package, adopt the same conversation, finish nothing new", async () => {
    const { browser, server } = await homes();
    const c = await midToolRound(browser);
    const first = await browser.harness.prepareMove("T-1", c);
    const again = await browser.harness.prepareMove("T-1", c);
    expect(again).toEqual(first);
    // The package carries the live tasks (stamp as running: it was), and the finished launch the
    // generation waits on, with the queued input.
    const kinds = first.tasks.map((t) => `${t.kind}:${t.state.status}`);
    expect(kinds).toEqual(["pi.generation:waiting", "pi.tool:terminal", "pi.tool:running"]);
    expect(first.submissions.map((s) => [s.requestId, s.status])).toEqual([
      ["r1", "placed"],
      ["r2", "queued"],
    ]);
    const before = server.harness.conversationRecords().length;
    const adopted = await server.harness.adoptMove(JSON.parse(JSON.stringify(first)));
    expect(await server.harness.adoptMove(first)).toBe(adopted);
    expect(server.harness.conversationRecords()).toHaveLength(before + 1);
    await browser.harness.finishMove("T-1", adopted);
    await browser.harness.finishMove("T-1", adopted);
    await expect(browser.harness.finishMove("T-1", adopted + 1)).rejects.toMatchObject({ reason: "moved" });
    // Entries renumbered in order, heads and waits pointing at the new ids.
    const moved = await server.harness.requireConversation(adopted).entries();
    expect(moved.map((e) => e.id)).toEqual([...moved.map((e) => e.id)].sort((a, b) => a - b));
    await answered(server, adopted);
  });

  test("cancel after the receiver refused: the conversation runs here again, each effect once", async () => {
    const { browser, server, world } = await homes();
    const c = await midToolRound(browser);
    await browser.harness.prepareMove("T-2", c);
    await expect(
      browser.harness.requireConversation(c).submit({ type: "input", content: "x" }),
    ).rejects.toMatchObject({
      status: "moving",
    });
    expect(await server.harness.refuseMove("T-2")).toEqual({ status: "refused" });
    await browser.harness.cancelMove("T-2");
    await browser.harness.cancelMove("T-2");
    release(browser);
    await answered(browser, c);
    expect(transcript(await browser.harness.requireConversation(c).entries())).toEqual(EXPECTED);
    expect(world.stamp.applied).toHaveLength(1);
    expect(world.launch.calls).toBe(1);
    // Refused forever: the package of T-2 is never adopted there.
    await expect(
      server.harness.adoptMove({ ...(await packageOf(browser, c, "T-3")), transfer: "T-2" }),
    ).rejects.toMatchObject({ reason: "refused" });
    expect(world.violations).toEqual([]);
  });

  test("step 1 gives the same package after the sender reopened (its running tool back to pending there)", async () => {
    const world = new World();
    const { browser } = await homes(world);
    const c = await midToolRound(browser);
    const before = await browser.harness.prepareMove("T-o", c);
    const image = browser.store.image();
    await browser.harness.close();
    await openHome(browser, await memoryStore(image), world, suite.faux);
    const stamp = before.tasks.find((t) => t.state.status === "running")!;
    // Recovery turned it back to pending here, and nothing runs it: the conversation is away.
    expect((await browser.harness.getTask(stamp.id))?.state.status).toBe("pending");
    expect(await browser.harness.prepareMove("T-o", c)).toEqual(before);
    await browser.harness.cancelMove("T-o");
    await expect(browser.harness.prepareMove("T-o", c)).rejects.toMatchObject({ reason: "cancelled" });
  });

  test("refuse after adopt answers the adopted id (the sender finishes instead of cancelling)", async () => {
    const { browser, server } = await homes();
    const c = await midToolRound(browser);
    const pkg = await browser.harness.prepareMove("T-4", c);
    const adopted = await server.harness.adoptMove(pkg);
    expect(await server.harness.refuseMove("T-4")).toEqual({ status: "adopted", conversationId: adopted });
  });

  test("the orchestrator cancels a move the receiver refuses for good", async () => {
    const { browser, server } = await homes();
    const c = await midToolRound(browser);
    await server.harness.refuseMove("T-5");
    const moves = new Moves(browser.harness, {
      peer: () => harnessPeer(() => server.harness),
      newTransfer: () => "T-5",
    });
    const result = await moves.moveOut(c, "server");
    expect(result).toMatchObject({ status: "cancelled", transfer: "T-5" });
    expect(browser.harness.awayOf(c)).toBeUndefined();
    release(browser);
    await answered(browser, c);
  });

  test("a lost peer leaves the move pending; resume finishes it", async () => {
    const { browser, server } = await homes();
    const c = await midToolRound(browser);
    let reachable = false;
    const moves = new Moves(browser.harness, {
      peer: () => (reachable ? harnessPeer(() => server.harness) : undefined),
    });
    await expect(moves.moveOut(c, "server")).rejects.toMatchObject({ code: "peer_unavailable" });
    expect(browser.harness.awayOf(c)?.status).toBe("pending");
    expect(moves.list()).toMatchObject([{ direction: "out", step: "prepared", local: c }]);
    reachable = true;
    const [settled] = await moves.resume();
    expect(settled).toMatchObject({ status: "fulfilled", value: { status: "done" } });
    const remote = (settled as PromiseFulfilledResult<{ remote: number }>).value.remote;
    await answered(server, remote);
  });
});

async function packageOf(home: Home, c: number, transfer: string): Promise<MovePackage> {
  return home.harness.prepareMove(transfer, c).finally(() => undefined);
}

describe("the sender from step 1", () => {
  test("a running phase is stopped, its later commit refused and its stored state untouched; nothing is claimed until cancel", async () => {
    const { browser, server } = await homes();
    const h = browser.harness;
    let release!: () => void;
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    let started!: () => void;
    const running = new Promise<void>((resolve) => {
      started = resolve;
    });
    const refusals: unknown[] = [];
    let refused!: () => void;
    const wasRefused = new Promise<void>((resolve) => {
      refused = resolve;
    });
    const runs: string[] = [];
    const slow = defineTask<{ n: number }, { phase: "work" } | { phase: "end" }>({
      name: "test.slow",
      version: 1,
      initial: () => ({ phase: "work" }),
      moveIds: { input: (i) => i, checkpoint: (cp) => cp },
      phases: {
        work: async (task, runtime) => {
          runs.push(`${task.input.n}${runtime.resumed ? " resumed" : ""}`);
          if (task.input.n === 1 && runs.length === 1) {
            started();
            await gate;
          }
          await runtime
            .commit(() => ({ status: "running", checkpoint: { phase: "end" } }))
            .catch((error: unknown) => {
              refusals.push(error);
              refused();
              throw error;
            });
        },
        end: async (_t, runtime) => {
          await runtime.commit(() => ({
            status: "terminal",
            outcome: { status: "completed", result: null },
          }));
        },
      },
      abort: async (_t, runtime) => {
        await runtime.commit(() => ({ status: "terminal", outcome: { status: "aborted" } }));
      },
    });
    const c = (await h.createConversation({ ownership: { kind: "ownerless" } })).id;
    const first = await h.createTask(
      slow,
      { n: 1 },
      { ownership: { kind: "conversation" }, conversationId: c },
    );
    await running;
    const pkg = await h.prepareMove("T-r", c);
    expect(pkg.tasks.map((t) => t.state)).toEqual([{ status: "running", checkpoint: { phase: "work" } }]);
    // No new work starts in it.
    await expect(
      h.createTask(slow, { n: 2 }, { ownership: { kind: "conversation" }, conversationId: c }),
    ).rejects.toBeInstanceOf(ConversationMoved);
    release();
    await wasRefused;
    expect(refusals[0]).toMatchObject({ name: "CommitRefused", reason: "moved" });
    expect((await h.getTask(first))?.state).toEqual({ status: "running", checkpoint: { phase: "work" } });
    // Nothing claims it while away (the drain passes it over).
    await h.waitForIdle();
    expect(runs).toEqual(["1"]);
    // The receiver refuses; the sender cancels; it runs here again, as an interrupted phase.
    expect(await server.harness.refuseMove("T-r")).toEqual({ status: "refused" });
    await h.cancelMove("T-r");
    expect((await h.waitForTask(first)).state).toMatchObject({
      status: "terminal",
      outcome: { status: "completed" },
    });
    expect(runs).toEqual(["1", "1 resumed"]);
  });
});

describe("over the protocol's moves group", () => {
  test("the group's schemas refuse malformed arguments; a peer over it keeps refusals typed", async () => {
    const ok = (method: keyof typeof MOVES_METHODS, args: unknown[]) =>
      Value.Check(MOVES_METHODS[method], args);
    expect(ok("moves.prepare", ["T-1", 2])).toBe(true);
    expect(ok("moves.prepare", ["T 1", 2])).toBe(false);
    expect(ok("moves.prepare", ["", 2])).toBe(false);
    expect(ok("moves.prepare", ["T-1", 2.5])).toBe(false);
    // The package's shape is bounded at the door (its format, ids, lists); adopt checks it whole.
    expect(ok("moves.adopt", [{ format: "x" }])).toBe(false);
    expect(ok("moves.adopt", ["text"])).toBe(false);
    expect(ok("moves.refuse", ["T-1", 3])).toBe(false);
    // The other home's engine behind a wire: arguments, answers and errors cross as JSON.
    const { browser, server } = await homes();
    const c = await midToolRound(browser);
    const across =
      <A extends unknown[], R>(method: keyof typeof MOVES_METHODS, run: (...args: A) => Promise<R>) =>
      async (...args: A): Promise<R> => {
        const sent = JSON.parse(JSON.stringify(args)) as A;
        if (!Value.Check(MOVES_METHODS[method], sent as unknown))
          throw new EngineError({ name: "BadRequest", code: "bad-args", message: method });
        try {
          const answer = await run(...sent);
          return answer === undefined ? answer : (JSON.parse(JSON.stringify(answer)) as R);
        } catch (error) {
          throw new EngineError(JSON.parse(JSON.stringify(wireError(error))));
        }
      };
    const api: MovesApi = {
      prepare: across("moves.prepare", (t: string, id: number) => moveOps.prepare(server.harness, t, id)),
      adopt: across("moves.adopt", (pkg: MovePackage) => moveOps.adopt(server.harness, pkg)),
      stage: across("moves.stage", (t: string, i: number, n: number, part: string) =>
        moveOps.stage(server.harness, t, i, n, part),
      ),
      adoptStaged: across("moves.adoptStaged", (t: string) => moveOps.adoptStaged(server.harness, t)),
      finish: across("moves.finish", (t: string, id: number) => moveOps.finish(server.harness, t, id)),
      refuse: across("moves.refuse", (t: string) => moveOps.refuse(server.harness, t)),
      cancel: across("moves.cancel", (t: string) => moveOps.cancel(server.harness, t)),
    };
    const peer = protocolPeer(api);
    await expect(peer.adopt({ format: "nonsense" })).rejects.toBeInstanceOf(MoveRefused);
    await expect(peer.adopt({ format: "nonsense" })).rejects.toMatchObject({ reason: "bad_package" });
    const moves = new Moves(browser.harness, { peer: () => peer });
    const result = await moves.moveOut(c, "server");
    expect(result.status).toBe("done");
    await answered(server, (result as { remote: number }).remote);
  });
});

describe("refusals", () => {
  test("step 1 refuses, changing nothing: unknown conversation, bad transfer id, moving twice", async () => {
    const { browser } = await homes();
    await expect(browser.harness.prepareMove("T", 999)).rejects.toMatchObject({
      reason: "unknown_conversation",
    });
    const c = (await browser.harness.createConversation({ ownership: { kind: "ownerless" } })).id;
    await expect(browser.harness.prepareMove("bad id with spaces", c)).rejects.toBeInstanceOf(MoveRefused);
    await browser.harness.prepareMove("T-a", c);
    await expect(browser.harness.prepareMove("T-b", c)).rejects.toMatchObject({ reason: "moving" });
    await expect(browser.harness.finishMove("T-unknown", 3)).rejects.toMatchObject({
      reason: "unknown_transfer",
    });
    await expect(browser.harness.cancelMove("T-unknown")).rejects.toMatchObject({
      reason: "unknown_transfer",
    });
  });

  test("a live task whose kind has no moveIds hook refuses the move at step 1", async () => {
    const { browser } = await homes();
    const parked = defineTask<Record<string, never>, { phase: "wait" }>({
      name: "test.parked",
      version: 1,
      initial: () => ({ phase: "wait" }),
      phases: {
        wait: (_t, _r, signal) =>
          new Promise<void>((resolve) => signal.addEventListener("abort", () => resolve(), { once: true })),
      },
      abort: async (_t, runtime) => {
        await runtime.commit(() => ({ status: "terminal", outcome: { status: "aborted" } }));
      },
    });
    const c = (await browser.harness.createConversation({ ownership: { kind: "ownerless" } })).id;
    await browser.harness.createTask(parked, {}, { ownership: { kind: "conversation" }, conversationId: c });
    await expect(browser.harness.prepareMove("T-k", c)).rejects.toMatchObject({ reason: "task_kind" });
    expect(browser.harness.awayOf(c)).toBeUndefined();
    expect(browser.harness.moveRecord("out", "T-k")).toBeUndefined();
  });

  test("a subagent still working refuses the move; a subagent's own conversation cannot move alone", async () => {
    const { browser } = await homes();
    const parked = defineTask<Record<string, never>, { phase: "wait" }>({
      name: "test.owner",
      version: 1,
      initial: () => ({ phase: "wait" }),
      phases: {
        wait: (_t, _r, signal) =>
          new Promise<void>((resolve) => signal.addEventListener("abort", () => resolve(), { once: true })),
      },
      moveIds: { input: (i) => i, checkpoint: (cp) => cp },
      abort: async (_t, runtime) => {
        await runtime.commit(() => ({ status: "terminal", outcome: { status: "aborted" } }));
      },
    });
    const c = (await browser.harness.createConversation({ ownership: { kind: "ownerless" } })).id;
    const owner = await browser.harness.createTask(
      parked,
      {},
      { ownership: { kind: "conversation" }, conversationId: c },
    );
    const child = await browser.harness.createConversation({ ownership: { kind: "task", taskId: owner } });
    await expect(browser.harness.prepareMove("T-s", c)).rejects.toMatchObject({ reason: "subagent" });
    await expect(browser.harness.prepareMove("T-s", child.id)).rejects.toMatchObject({ reason: "owned" });
    expect(browser.harness.awayOf(c)).toBeUndefined();
  });

  test("bringBack of a conversation the server cannot send ends cancelled, nothing changed there", async () => {
    const { browser, server } = await homes();
    const owner = defineTask<Record<string, never>, { phase: "wait" }>({
      name: "test.owner",
      version: 1,
      initial: () => ({ phase: "wait" }),
      phases: {
        wait: (_t, _r, signal) =>
          new Promise<void>((resolve) => signal.addEventListener("abort", () => resolve(), { once: true })),
      },
      moveIds: { input: (i) => i, checkpoint: (cp) => cp },
      abort: async (_t, runtime) => {
        await runtime.commit(() => ({ status: "terminal", outcome: { status: "aborted" } }));
      },
    });
    const remote = (await server.harness.createConversation({ ownership: { kind: "ownerless" } })).id;
    const task = await server.harness.createTask(
      owner,
      {},
      { ownership: { kind: "conversation" }, conversationId: remote },
    );
    await server.harness.createConversation({ ownership: { kind: "task", taskId: task } });
    const moves = new Moves(browser.harness, {
      peer: () => harnessPeer(() => server.harness),
      newTransfer: () => "T-b",
    });
    const result = await moves.bringBack(remote, "server");
    expect(result).toMatchObject({ status: "cancelled", transfer: "T-b" });
    expect(result.status === "cancelled" && result.reason).toMatch(/subagent/);
    expect(server.harness.awayOf(remote)).toBeUndefined();
    expect(browser.harness.moveRecord("in", "T-b")).toMatchObject({ status: "refused" });
    expect(moves.list()).toMatchObject([{ transfer: "T-b", step: "cancelled" }]);
  });

  test("adopt checks the package whole and writes nothing for a bad one", async () => {
    const { browser, server } = await homes();
    const c = await midToolRound(browser);
    const pkg = JSON.parse(JSON.stringify(await browser.harness.prepareMove("T-p", c))) as MovePackage;
    const before = server.harness.conversationRecords().length;
    expect(pkg.tasks.some((t) => t.owner !== undefined)).toBe(true);
    const bad: unknown[] = [
      null,
      "text",
      { ...pkg, format: "other" },
      { ...pkg, version: 2 },
      { ...pkg, transfer: "" },
      { ...pkg, entries: [...pkg.entries].reverse() },
      { ...pkg, entries: pkg.entries.map((e, i) => (i === 1 ? { ...e, head: 99999 } : e)) },
      { ...pkg, tasks: pkg.tasks.map((t, i) => (i === 1 ? { ...t, owner: 99999 } : t)) },
      // A task-owned task may not be background (spec §5.5), also when a package brings it (draw 32d).
      { ...pkg, tasks: pkg.tasks.map((t) => (t.owner !== undefined ? { ...t, background: true } : t)) },
      { ...pkg, tasks: pkg.tasks.map((t) => ({ ...t, kind: "test.unknown" })) },
      { ...pkg, submissions: pkg.submissions.map((s) => ({ ...s, entry: 99999 })) },
      { ...pkg, documents: [...pkg.documents, pkg.documents[0]] },
    ];
    for (const [i, value] of bad.entries()) {
      const error = await server.harness.adoptMove(value).catch((e: unknown) => e);
      expect(error, `bad package ${i}`).toBeInstanceOf(MoveRefused);
    }
    // A package naming an id it does not carry (a tool slot's task) is refused by the id maps.
    const live = pkg.documents.find((d) => d.name === "pi.live")!;
    const dangling = {
      ...pkg,
      documents: pkg.documents.map((d) =>
        d === live ? { ...d, value: { ...(d.value as object), run: { taskId: 99999, inputs: [] } } } : d,
      ),
    };
    await expect(server.harness.adoptMove(dangling)).rejects.toMatchObject({ reason: "bad_package" });
    expect(server.harness.conversationRecords()).toHaveLength(before);
    expect(server.harness.moveRecord("in", "T-p")).toBeUndefined();
    // The good one still adopts.
    const adopted = await server.harness.adoptMove(pkg);
    expect(server.harness.moveRecord("in", "T-p")).toMatchObject({
      status: "adopted",
      conversationId: adopted,
    });
  });

  test("an idle conversation moves with its built-in documents: the adopted one has pi.live {} and the others as they were (draw 37b)", async () => {
    // Draw 37bC: every move carried a conversation mid-round, whose pi.live holds something; an
    // adoption that skipped empty documents (an idle conversation's pi.live {}) passed every test.
    const { browser, server } = await homes();
    const c = (await browser.harness.createConversation({ ownership: { kind: "ownerless" } })).id;
    const docs = async (home: Home, id: number) =>
      Object.fromEntries(
        await Promise.all(
          ["pi.live", "pi.inbox", "pi.usage", "pi.provider"].map(async (name) => [
            name,
            await home.harness.doc(id, name),
          ]),
        ),
      );
    const sent = await docs(browser, c);
    expect(sent["pi.live"]).toEqual({});
    const pkg = JSON.parse(JSON.stringify(await browser.harness.prepareMove("T-idle", c))) as MovePackage;
    const adopted = await server.harness.adoptMove(pkg);
    expect(await docs(server, adopted)).toEqual(sent);
    const view = await (await server.harness.requireLoadedConversation(adopted)).viewState();
    expect(view.docs["pi.live"]).toEqual({});
  });

  test("submitting to a moving conversation is refused with where it stands; other conversations go on", async () => {
    const { browser } = await homes();
    const c = await midToolRound(browser);
    await browser.harness.prepareMove("T-w", c);
    const conversation = browser.harness.requireConversation(c);
    await expect(conversation.submit({ ...SECOND, requestId: "r3" })).rejects.toMatchObject({
      name: "ConversationMoved",
      status: "moving",
    });
    await expect(browser.harness.deleteConversation(c)).rejects.toBeInstanceOf(ConversationMoved);
    const other = await browser.harness.createConversation({ ownership: { kind: "ownerless" } });
    const submission = await other.submit({ ...FIRST, requestId: "other" });
    release(browser);
    expect((await submission.wait()).status).toBe("done");
    await browser.harness.waitForIdle();
  });
});
