/**
 * The crash sweep over a move (worker/core/move.ts, worker/app/moves.ts): two homes, each an
 * AgentHarness on its own memory store, joined by `harnessPeer`; the browser's orchestrator drives
 * the move. The conversation moves in the middle of a tool round (launch done, stamp running in the
 * sender and held there) with a second input queued, in both directions (`moveOut`: browser ->
 * server; `bringBack`: server -> browser). For each direction, each side and each crash mode of the
 * kit (CRASH_MODES), the scenario runs once uncrashed (counting the side's transactions from the
 * move's first step to the new home's last answer), then once per transaction k, the side's store
 * dying at k; the dead home is reopened on what was committed, and the browser resumes (or, when it
 * never wrote its intent, starts the move again), until the moved run has answered both inputs.
 * A second sweep loses each peer call in turn (before it reaches the peer, or its answer after it
 * was applied). Every run must end with:
 * - the conversation whole in exactly one home (the receiver's, owning it; the sender's copy
 *   read-only, marked as living there), the uncrashed transcript there, both inputs answered once;
 * - each tool call's effect once (launch once; stamp's keyed effect under one key), and no tool run
 *   by a home that did not own the conversation at that instant;
 * - at every published commit of either live home, at most one home owning it;
 * - one move intent, done; no task left live in either store.
 */
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import type { ConversationId, MoveResult } from "../../../worker/index.ts";
import { harnessPeer, type MovePeer, Moves } from "../../../worker/index.ts";
import { StoreClosed } from "../../../worker/store/types.ts";
import {
  CRASH_MODES,
  CRASH_SWEEP_TEST_TIMEOUT_MS,
  type CrashMode,
  type FauxAgentModel,
  memoryStore,
  within,
} from "../../../worker/testing.ts";
import { type Home, makeFaux, midToolRound, openHome, transcript, World } from "./moves-fixtures.ts";

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

type Direction = "moveOut" | "bringBack";
type Side = "browser" | "server";
/** What is cut: a home's store at its k-th transaction, or the k-th call to the peer. */
type Cut =
  | { kind: "crash"; side: Side; mode: CrashMode; at: number | undefined }
  | { kind: "lose"; when: "request" | "answer"; at: number | undefined };

let faux: FauxAgentModel;
beforeAll(() => {
  faux = makeFaux();
});
afterAll(() => faux.unregister());

interface Outcome {
  /** Transactions of the cut side (or peer calls) from the move's start to the end. */
  count: number;
  cut: boolean;
}

/** The conversation in a home that owns it (present, not away), if any. */
function owned(home: Home, id: ConversationId | undefined): boolean {
  return (
    id !== undefined &&
    home.harness.conversationRecord(id) !== undefined &&
    home.harness.awayOf(id) === undefined
  );
}

async function run(direction: Direction, cut: Cut, label: string): Promise<Outcome> {
  const world = new World();
  const groupCommit = cut.kind === "crash" ? cut.mode.groupCommit : true;
  const senderSide: Side = direction === "moveOut" ? "browser" : "server";
  const browser = await openHome(
    { name: "browser", held: senderSide === "browser" },
    await memoryStore(),
    world,
    faux,
    {
      groupCommit,
    },
  );
  const server = await openHome(
    { name: "server", held: senderSide === "server" },
    await memoryStore(),
    world,
    faux,
    {
      groupCommit,
    },
  );
  const homes = { browser, server };
  const sender = homes[senderSide];
  const receiver = senderSide === "browser" ? server : browser;
  const c = await midToolRound(sender);
  // The receiver's copy: its one conversation besides the root (it starts with none).
  // (In memory: the watcher below runs inside a publish; a reopened receiver loads it with its live work.)
  const adopted = () => receiver.harness.conversationRecords().find((r) => r.id !== 1)?.id;
  // The same from the store (a reopen loads conversation records on demand).
  const adoptedStored = async () =>
    (await receiver.harness.store.read((sql) => sql.all("SELECT id FROM conversations WHERE id <> 1"))).map(
      (row) => Number(row["id"]),
    );
  const violations: string[] = [];
  const watch = (home: Home) =>
    home.harness.subscribe(() => {
      const owners = [sender, receiver].filter((h) => !h.dead && owned(h, h === sender ? c : adopted()));
      if (owners.length > 1) violations.push(`${label}: owned by ${owners.map((h) => h.name).join(" and ")}`);
    });
  watch(browser);
  watch(server);

  // The cut: a store dying at its k-th transaction from here, or a peer call lost.
  const target = cut.kind === "crash" ? homes[cut.side] : undefined;
  const base = target?.store.stats.transactions ?? 0;
  let crashed = false;
  let image: ReturnType<Home["store"]["image"]> | undefined;
  let signal!: () => void;
  const crash = new Promise<void>((resolve) => {
    signal = resolve;
  });
  if (target && cut.kind === "crash")
    target.store.setFaultHook((point, { transaction }) => {
      if (cut.at === undefined || crashed || point !== cut.mode.point || transaction !== base + cut.at)
        return;
      crashed = true;
      image = target.store.image();
      target.dead = true;
      target.store.kill(label);
      signal();
      throw new StoreClosed(label);
    });
  let calls = 0;
  let lost = false;
  const peer = (): MovePeer | undefined => {
    if (server.dead) return undefined;
    const real = harnessPeer(() => server.harness);
    if (cut.kind !== "lose") return real;
    const wrap =
      <A extends unknown[], R>(call: (...args: A) => Promise<R>) =>
      async (...args: A): Promise<R> => {
        const n = ++calls;
        const loseIt = cut.at === n && !lost;
        if (loseIt && cut.when === "request") {
          lost = true;
          throw new Error(`${label}: the request was lost`);
        }
        const answer = await call(...args);
        if (loseIt) {
          lost = true;
          throw new Error(`${label}: the answer was lost`);
        }
        return answer;
      };
    return {
      prepare: wrap(real.prepare),
      adopt: wrap(real.adopt),
      finish: wrap(real.finish),
      refuse: wrap(real.refuse),
      cancel: wrap(real.cancel),
    };
  };
  let transfers = 0;
  const orchestrator = () => new Moves(browser.harness, { peer, newTransfer: () => `T${++transfers}` });

  /** Like the app: resume the browser's move, or start it when no intent was ever written. */
  const drive = async (): Promise<MoveResult> => {
    const moves = orchestrator();
    const intents = moves.list();
    if (intents.length === 0)
      return direction === "moveOut" ? moves.moveOut(c, "server") : moves.bringBack(c, "server");
    await moves.resume();
    const [intent] = moves.list();
    if (intent?.step !== "done") throw new Error(`${label}: the move is ${intent?.step}`);
    return { status: "done", transfer: intent.transfer, local: intent.local!, remote: intent.remote! };
  };
  /** Drive the move to its end (retrying a lost peer), then wait for the moved run's answers. */
  const finish = async (): Promise<ConversationId> => {
    let result: MoveResult | undefined;
    for (let attempt = 0; !result; attempt++) {
      try {
        result = await drive();
      } catch (error) {
        if (cut.kind !== "lose" || attempt > 3) throw error;
      }
    }
    if (result.status !== "done") throw new Error(`${label}: the move ended ${result.status}`);
    const id = direction === "moveOut" ? result.remote! : result.local!;
    await receiver.harness.waitForConversationIdle(id);
    return id;
  };

  let id: ConversationId | undefined;
  const first = finish();
  try {
    id = await within(Promise.race([first, crash.then(() => undefined)]), 10_000, label);
  } catch (error) {
    if (!crashed) throw error;
  }
  if (crashed && target) {
    await within(
      first.catch(() => undefined),
      10_000,
      `${label}: the first driver`,
    );
    await target.harness.close().catch(() => undefined);
    const reopened = await memoryStore(image);
    await openHome(target, reopened, world, faux, { groupCommit });
    watch(target);
    id = await within(finish(), 10_000, `${label}, reopened`);
  }
  const count = cut.kind === "crash" ? target!.store.stats.transactions - (crashed ? 0 : base) : calls;
  try {
    // Whole in the receiver, which owns it; read-only in the sender, marked as living there.
    expect([id], label).toEqual(await adoptedStored());
    expect(
      transcript(await (await receiver.harness.requireLoadedConversation(id!)).entries()),
      label,
    ).toEqual(EXPECTED);
    for (const requestId of ["r1", "r2"])
      expect(
        (await receiver.harness.submissionByRequest(id!, requestId))?.status,
        `${label}: ${requestId}`,
      ).toBe("done");
    expect(owned(receiver, id), label).toBe(true);
    expect(sender.harness.awayOf(c), label).toMatchObject({ status: "done", remote: id });
    expect(transcript(await (await sender.harness.requireLoadedConversation(c)).entries()), label).toEqual(
      EXPECTED.slice(0, 4),
    );
    // Each tool call's effect once, each run by the home that owned the conversation.
    expect(world.launch.calls, label).toBe(1);
    expect(
      world.stamp.applied.map((a) => a.key),
      label,
    ).toEqual(["stamp:call-stamp"]);
    expect(world.violations, label).toEqual([]);
    expect(violations, label).toEqual([]);
    // One move, done; nothing left live anywhere.
    expect(
      orchestrator()
        .list()
        .map((i) => i.step),
      label,
    ).toEqual(["done"]);
    for (const home of [browser, server])
      expect(
        (await home.harness.tasks())
          .filter((t) => t.state.status !== "terminal")
          .map((t) => `${t.kind} ${t.id}`),
        `${label}: ${home.name}`,
      ).toEqual([]);
  } finally {
    await browser.harness.close().catch(() => undefined);
    await server.harness.close().catch(() => undefined);
  }
  return { count, cut: crashed || lost };
}

/**
 * The cut points each sweep covered when it was written (crash modes in CRASH_MODES order; lost
 * calls: request, answer): the floor it must not fall below, so a change that sweeps fewer fails.
 */
const FLOOR: Record<`${Direction} ${Side}`, readonly number[]> &
  Record<`${Direction} lost`, readonly number[]> = {
  "moveOut browser": [3, 3, 3],
  "moveOut server": [6, 12, 6],
  "bringBack browser": [7, 14, 7],
  "bringBack server": [2, 2, 2],
  "moveOut lost": [1, 1],
  "bringBack lost": [2, 2],
};

let covered = 0;

describe("move crash sweep", () => {
  for (const direction of ["moveOut", "bringBack"] as const)
    for (const side of ["browser", "server"] as const)
      for (const [m, mode] of CRASH_MODES.entries())
        test(`${direction}, ${side} store dies at each transaction (${mode.name})`, {
          timeout: CRASH_SWEEP_TEST_TIMEOUT_MS,
        }, async () => {
          const baseline = await run(
            direction,
            { kind: "crash", side, mode, at: undefined },
            "the uncrashed run",
          );
          expect(baseline.count).toBeGreaterThanOrEqual(FLOOR[`${direction} ${side}`][m]!);
          for (let k = 1; k <= baseline.count; k++) {
            const label = `${direction}: ${side} dies at ${mode.point} of its transaction ${k}`;
            const outcome = await run(direction, { kind: "crash", side, mode, at: k }, label);
            expect(outcome.cut, `${label} was never reached`).toBe(true);
          }
          console.log(
            `move crash sweep: ${direction}, ${side} (${mode.name}): ${baseline.count} crash points`,
          );
          covered += baseline.count;
        });

  for (const direction of ["moveOut", "bringBack"] as const)
    for (const when of ["request", "answer"] as const)
      test(`${direction}, each peer call's ${when} lost once`, {
        timeout: CRASH_SWEEP_TEST_TIMEOUT_MS,
      }, async () => {
        const baseline = await run(direction, { kind: "lose", when, at: undefined }, "the run with no loss");
        expect(baseline.count).toBeGreaterThanOrEqual(
          FLOOR[`${direction} lost`][when === "request" ? 0 : 1]!,
        );
        for (let k = 1; k <= baseline.count; k++) {
          const label = `${direction}: peer call ${k}'s ${when} lost`;
          const outcome = await run(direction, { kind: "lose", when, at: k }, label);
          expect(outcome.cut, `${label} was never reached`).toBe(true);
        }
        console.log(`move lost-call sweep: ${direction}, ${when}: ${baseline.count} peer calls`);
        covered += baseline.count;
      });
});

afterAll(() => {
  console.log(`move crash sweep: ${covered} cut points covered`);
});
