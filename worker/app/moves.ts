/**
 * Moving a conversation between the browser's home and a server space's (worker/core/move.ts holds
 * the steps and their rules). Two parts:
 * - the engine side, as plain functions over a harness (`moveOps`), which a protocol group serves:
 *   `prepare` (step 1, sender), `adopt` (step 2, receiver), `finish` (step 3, sender), `refuse`
 *   (receiver), `cancel` (sender); and `harnessPeer`, a `MovePeer` over another harness in the same
 *   process (tests), every call carrying JSON;
 * - the orchestrator (`Moves`), on the initiating side (the browser, in both directions), driven by
 *   a durable intent per transfer id in the settings conversation's `app.moves` document, written in
 *   the same commit as each local step. `moveOut` (browser -> server): local step 1 with the intent,
 *   the peer adopts, local step 3. `bringBack` (server -> browser): the intent first, the peer's step
 *   1, local adopt (with the intent), the peer's step 3. `resume()` continues every unfinished intent
 *   (the steps are idempotent), so a lost peer or a crash leaves a move pending and resumable, never
 *   half-done.
 * Invariants: a move is undone only after the receiver durably refused its transfer (`refuse`
 * answered `refused`; if it answers the id it adopted the transfer as, the move is finished
 * instead), or when its package was never sent. A package larger than the peer takes in one message
 * (`maxPackageChars`) goes in parts to a peer that stages them (`maxStagedBytes` set: `stage` each
 * part of its JSON text, cut the same way every time by `cutPackage`, then `adoptStaged`); one over
 * that bound, or over the message limit of a peer that takes no parts, is never sent by any path
 * (the package of a pending transfer is the same every time), so it is cancelled here at once
 * (`too_large`); a conversation whose entries alone are larger is refused before step 1, nothing
 * written. So is, after step 1, one holding a document or a task over the peer's row bound
 * (`maxValueBytes`); entries and submissions the peer keeps out of line (decision 0016). Only a `MoveRefused` from a step is final, any other failure (the peer unreachable, a
 * crash, a part lost) is retried by `resume()`, which sends the parts again (each is idempotent).
 */
import type { AgentHarness } from "../agent/harness.ts";
import { SETTINGS_CONVERSATION } from "../agent/models/keys.ts";
import type { Tx } from "../core/define.ts";
import { HarnessError, type MoveRefusal, MoveRefused } from "../core/errors.ts";
import type { MovePackage, RefuseAnswer, StageAnswer } from "../core/move.ts";
import type { ConversationId, Json } from "../core/types.ts";
import type { MovesApi } from "../protocol/api.ts";
import { DEFAULT_LIMITS, jsonProblem } from "../protocol/door.ts";

export const MOVES_DOC = "app.moves";

/** The engine side of the protocol's `moves` group: each one step, over this engine's harness. */
export const moveOps = {
  /** Step 1 (this engine sends): the package, as JSON. */
  prepare: (h: AgentHarness, transfer: string, conversationId: ConversationId): Promise<MovePackage> =>
    h.prepareMove(transfer, conversationId),
  /** Step 2 (this engine receives): the conversation's id here. */
  adopt: async (h: AgentHarness, pkg: unknown): Promise<{ conversationId: ConversationId }> => ({
    conversationId: await h.adoptMove(pkg),
  }),
  /** Step 2 in parts, first half (this engine receives): store one part of the package's text. */
  stage: (
    h: AgentHarness,
    transfer: string,
    index: number,
    count: number,
    part: string,
  ): Promise<StageAnswer> => h.stageMovePart(transfer, index, count, part),
  /** Step 2 in parts: adopt the staged parts; the conversation's id here. */
  adoptStaged: async (h: AgentHarness, transfer: string): Promise<{ conversationId: ConversationId }> => ({
    conversationId: await h.adoptStagedMove(transfer),
  }),
  /** Step 3 (this engine sent): done, living in the receiver's `conversationId`. */
  finish: (h: AgentHarness, transfer: string, conversationId: ConversationId): Promise<void> =>
    h.finishMove(transfer, conversationId),
  /** Never adopt `transfer` here (or the id it was adopted as). */
  refuse: (h: AgentHarness, transfer: string): Promise<RefuseAnswer> => h.refuseMove(transfer),
  /** Undo a pending send, after the receiver refused it. */
  cancel: (h: AgentHarness, transfer: string): Promise<void> => h.cancelMove(transfer),
};

/**
 * The other home, as the orchestrator calls it: plain async calls carrying JSON. A refusal rejects
 * with `MoveRefused` (a transport rebuilds it from the error's code); anything else is taken as the
 * peer being unreachable for now.
 */
export interface MovePeer {
  prepare(transfer: string, conversationId: ConversationId): Promise<Json>;
  adopt(pkg: Json): Promise<{ conversationId: ConversationId }>;
  /** Store one part of a package too large for one message (a peer that takes packages in parts). */
  stage?(transfer: string, index: number, count: number, part: string): Promise<StageAnswer>;
  /** Adopt the package whose parts were staged. */
  adoptStaged?(transfer: string): Promise<{ conversationId: ConversationId }>;
  finish(transfer: string, conversationId: ConversationId): Promise<void>;
  refuse(transfer: string): Promise<RefuseAnswer>;
  cancel(transfer: string): Promise<void>;
}

/** The door's refusals of a call it never ran (worker/protocol/door.ts `BadRequest` codes). */
const UNRUN = new Set(["too-large", "malformed", "bad-args", "unknown-method"]);

/**
 * An error crossing a transport as `{ name, code, message }`, rebuilt: MoveRefused stays typed, and
 * a call the other home's door refused unread or unchecked (`BadRequest` `too-large`, `malformed`,
 * `bad-args`, `unknown-method`: it never ran there, and never will as sent) is a final `MoveRefused`
 * too (`too_large`, else `bad_package`). Anything else (a lost connection, a rate limit) is not.
 */
export function peerError(error: unknown): Error {
  const e = error as { name?: unknown; code?: unknown; message?: unknown };
  if (e?.name === "MoveRefused" && typeof e.code === "string" && e.code.startsWith("move_refused:"))
    return new MoveRefused(e.code.slice("move_refused:".length) as MoveRefusal, String(e.message));
  if (e?.name === "BadRequest" && typeof e.code === "string" && UNRUN.has(e.code))
    return new MoveRefused(
      e.code === "too-large" ? "too_large" : "bad_package",
      `the other home refused the move's message: ${String(e.message)}`,
    );
  return error instanceof Error ? error : new Error(String(error));
}

/** A MovePeer over a harness of this process: arguments and answers go through JSON, as on a wire. */
export function harnessPeer(h: () => AgentHarness): MovePeer {
  const wire = async <T>(call: () => Promise<T>): Promise<T> => {
    try {
      const value = await call();
      return value === undefined ? value : (JSON.parse(JSON.stringify(value)) as T);
    } catch (error) {
      const e = error as { name?: string; code?: string; message?: string };
      throw peerError(JSON.parse(JSON.stringify({ name: e?.name, code: e?.code, message: e?.message })));
    }
  };
  return {
    prepare: (transfer, c) => wire(async () => (await moveOps.prepare(h(), transfer, c)) as unknown as Json),
    adopt: (pkg) => wire(() => moveOps.adopt(h(), JSON.parse(JSON.stringify(pkg)))),
    stage: (transfer, index, count, part) => wire(() => moveOps.stage(h(), transfer, index, count, part)),
    adoptStaged: (transfer) => wire(() => moveOps.adoptStaged(h(), transfer)),
    finish: (transfer, c) => wire(() => moveOps.finish(h(), transfer, c)),
    refuse: (transfer) => wire(() => moveOps.refuse(h(), transfer)),
    cancel: (transfer) => wire(() => moveOps.cancel(h(), transfer)),
  };
}

/** A MovePeer over the protocol's `moves` group (api.ts `MovesApi`) of the other home's engine. */
export function protocolPeer(moves: MovesApi): MovePeer {
  const call = async <T>(work: () => Promise<T>): Promise<T> => {
    try {
      return await work();
    } catch (error) {
      throw peerError(error);
    }
  };
  return {
    prepare: (transfer, c) => call(async () => (await moves.prepare(transfer, c)) as unknown as Json),
    adopt: (pkg) => call(() => moves.adopt(pkg as unknown as MovePackage)),
    stage: (transfer, index, count, part) => call(() => moves.stage(transfer, index, count, part)),
    adoptStaged: (transfer) => call(() => moves.adoptStaged(transfer)),
    finish: (transfer, c) => call(() => moves.finish(transfer, c)),
    refuse: (transfer) => call(() => moves.refuse(transfer)),
    cancel: (transfer) => call(() => moves.cancel(transfer)),
  };
}

/** One move the orchestrator drives, as stored in `app.moves`. */
export interface MoveIntent {
  readonly transfer: string;
  /** `out`: this home's conversation goes to the peer; `back`: the peer's comes here. */
  readonly direction: "out" | "back";
  /** The peer's name (what `peers` resolves). */
  readonly peer: string;
  /** The conversation here (out: from the start; back: once adopted). */
  readonly local?: ConversationId;
  /** The conversation in the peer (back: from the start; out: once adopted). */
  readonly remote?: ConversationId;
  /**
   * out: `prepared` (step 1 here) -> `done` | `cancelled`. back: `asked` (nothing written anywhere
   * else yet) -> `adopted` (step 2 here) -> `done`, or `cancelling` (refused here; the peer's step 1
   * to undo) -> `cancelled`.
   */
  readonly step: "asked" | "prepared" | "adopted" | "done" | "cancelling" | "cancelled";
  /** Why it was cancelled. */
  readonly reason?: string;
}

export type MoveResult =
  | { status: "done"; transfer: string; local?: ConversationId; remote?: ConversationId }
  | { status: "cancelled"; transfer: string; reason: string };

const finished = (i: MoveIntent) => i.step === "done" || i.step === "cancelled";

function intents(tx: Tx): Record<string, MoveIntent> {
  return (tx.readDoc(SETTINGS_CONVERSATION, MOVES_DOC) as unknown as Record<string, MoveIntent>) ?? {};
}

function putIntent(tx: Tx, intent: MoveIntent): void {
  tx.writeDoc(SETTINGS_CONVERSATION, MOVES_DOC, {
    ...intents(tx),
    [intent.transfer]: intent,
  } as unknown as Json);
}

/**
 * Whether a package is over `limit`, as the bytes of its JSON text in UTF-8 (workerd closes a socket
 * over 1 MiB of them; never fewer than its characters, which the space's transport counts) or as
 * the door counts a message (door.ts `jsonProblem`, which counts every number as 24): any of them
 * would refuse it there, and a socket closed for it would be retried for ever.
 */
export function packageTooLarge(pkg: MovePackage, limit: number): boolean {
  return (
    new TextEncoder().encode(JSON.stringify(pkg)).length > limit ||
    jsonProblem(pkg, { maxChars: limit, maxDepth: DEFAULT_LIMITS.maxDepth - 4 }) !== undefined
  );
}

/** The refusal of a conversation larger than the other home takes in one message. */
export function tooLarge(limit: number): MoveRefused {
  return new MoveRefused(
    "too_large",
    `this conversation is too large to move: the server takes at most ${limit.toLocaleString("en")} characters in one message`,
  );
}

/** The refusal of a conversation larger than the other home takes in parts. */
export function tooLargeStaged(bound: number): MoveRefused {
  return new MoveRefused(
    "too_large",
    `this conversation is too large to move: the server takes at most ${bound.toLocaleString("en")} bytes of it`,
  );
}

/**
 * The largest value of the package the receiver stores whole in one row (a Durable Object's SQLite
 * takes at most 2 MB in one), in UTF-8 bytes of its JSON: a document or a task. Entries and
 * submissions are not counted: a receiver with bounded rows keeps their long strings out of line
 * (worker/core/spill.ts, decision 0016).
 */
export function largestValueBytes(pkg: Pick<MovePackage, "documents" | "tasks">): number {
  let largest = 0;
  for (const values of [pkg.documents, pkg.tasks])
    for (const value of values as readonly unknown[])
      largest = Math.max(largest, utf8Bytes(JSON.stringify(value)));
  return largest;
}

/** The refusal of a conversation holding one value larger than the other home stores in one row. */
export function tooLargeValue(bytes: number, bound: number): MoveRefused {
  return new MoveRefused(
    "too_large",
    `this conversation is too large to move: one of its documents is ${bytes.toLocaleString("en")} bytes, and the server stores at most ${bound.toLocaleString("en")} bytes in one`,
  );
}

/**
 * The package's JSON text cut into parts, each of which goes in one message under `limit` (the
 * peer's, as `packageTooLarge` counts it): at most (limit - 200) / 6 characters each, since one
 * character of the text takes at most 6 bytes in a message (an escaped lone surrogate; a quote or a
 * backslash takes 2, a character outside ASCII at most 3), never cutting a surrogate pair. The same
 * text is cut the same way every time.
 */
export function cutPackage(text: string, limit: number): string[] {
  const size = Math.max(2, Math.floor((limit - 200) / 6));
  const parts: string[] = [];
  for (let at = 0; at < text.length; ) {
    let end = Math.min(text.length, at + size);
    const last = text.charCodeAt(end - 1);
    if (end < text.length && last >= 0xd800 && last <= 0xdbff) end--;
    parts.push(text.slice(at, end));
    at = end;
  }
  return parts.length > 0 ? parts : [""];
}

const utf8Bytes = (text: string): number => new TextEncoder().encode(text).length;

const isRefusal = (error: unknown): error is MoveRefused => error instanceof MoveRefused;

export class Moves {
  readonly #running = new Map<string, Promise<MoveResult>>();

  constructor(
    readonly harness: AgentHarness,
    readonly options: {
      /** The peer of a name, or undefined when it cannot be reached now. */
      peer: (name: string) => MovePeer | undefined;
      /** A new transfer id (default: a random UUID). */
      newTransfer?: () => string;
      /**
       * The largest package (characters of its JSON) the peer takes in one message (default: no
       * limit). A larger one is refused `too_large` and never sent.
       */
      maxPackageChars?: (peer: string) => number | undefined;
      /**
       * When defined, a package over `maxPackageChars` goes to a peer that takes parts (`stage`,
       * `adoptStaged`) in parts, up to this many bytes of its JSON text in all (default: none; a
       * larger one is refused `too_large`).
       */
      maxStagedBytes?: (peer: string) => number | undefined;
      /**
       * The largest document or task (UTF-8 bytes of its JSON) the peer stores in one row (default:
       * no limit); its entries and submissions are not bounded by it, since the peer keeps their long
       * strings out of line (worker/core/spill.ts). A conversation holding a larger document or task
       * is cancelled `too_large` right after step 1, never sent: the peer's adopt would fail on it
       * every time it is retried.
       */
      maxValueBytes?: (peer: string) => number | undefined;
    },
  ) {}

  /** Every intent, finished ones included. */
  list(): MoveIntent[] {
    const stored = this.harness.docNow(SETTINGS_CONVERSATION, MOVES_DOC) as unknown as
      | Record<string, MoveIntent>
      | undefined;
    return Object.values(stored ?? {});
  }

  intent(transfer: string): MoveIntent | undefined {
    return this.list().find((i) => i.transfer === transfer);
  }

  /** Move conversation `local` to the peer. Rejects (the move stays pending) when the peer is lost. */
  async moveOut(local: ConversationId, peer: string): Promise<MoveResult> {
    const limit = this.options.maxPackageChars?.(peer);
    const bound = this.options.maxStagedBytes?.(peer);
    const handle = await this.harness.loadedConversation(local);
    if (limit !== undefined && handle) {
      const entries = JSON.stringify(await handle.entries());
      if (bound === undefined && entries.length > limit) throw tooLarge(limit);
      if (bound !== undefined && utf8Bytes(entries) > bound) throw tooLargeStaged(bound);
    }
    const transfer = this.#newTransfer();
    await this.harness.prepareMove(transfer, local, {
      also: (tx) => putIntent(tx, { transfer, direction: "out", peer, local, step: "prepared" }),
    });
    return this.#drive(transfer);
  }

  /** Bring the peer's conversation `remote` here. Rejects (resumable) when the peer is lost. */
  async bringBack(remote: ConversationId, peer: string): Promise<MoveResult> {
    const transfer = this.#newTransfer();
    await this.harness.transaction((tx) =>
      putIntent(tx, { transfer, direction: "back", peer, remote, step: "asked" }),
    );
    return this.#drive(transfer);
  }

  /** Continue every unfinished move; resolves with their results (a lost peer's rejection included). */
  async resume(): Promise<Array<PromiseSettledResult<MoveResult>>> {
    const open = this.list().filter((i) => !finished(i));
    return Promise.allSettled(open.map((i) => this.#drive(i.transfer)));
  }

  #newTransfer(): string {
    return this.options.newTransfer?.() ?? crypto.randomUUID();
  }

  /** One driver per transfer at a time. */
  #drive(transfer: string): Promise<MoveResult> {
    let running = this.#running.get(transfer);
    if (!running) {
      running = this.#advance(transfer).finally(() => this.#running.delete(transfer));
      this.#running.set(transfer, running);
    }
    return running;
  }

  #peer(intent: MoveIntent): MovePeer {
    const peer = this.options.peer(intent.peer);
    if (!peer) throw new HarnessError("peer_unavailable", `the home ${intent.peer} cannot be reached now`);
    return peer;
  }

  async #advance(transfer: string): Promise<MoveResult> {
    for (;;) {
      const intent = this.intent(transfer);
      if (!intent) throw new HarnessError("unknown_move", `no move ${transfer} was started here`);
      if (intent.step === "done")
        return {
          status: "done",
          transfer,
          ...(intent.local !== undefined ? { local: intent.local } : {}),
          ...(intent.remote !== undefined ? { remote: intent.remote } : {}),
        };
      if (intent.step === "cancelled") return { status: "cancelled", transfer, reason: intent.reason ?? "" };
      if (intent.direction === "out") await this.#out(intent);
      else await this.#back(intent);
    }
  }

  /** browser -> peer, from `prepared`: the peer adopts, then step 3 here (or cancel after its refusal). */
  async #out(intent: MoveIntent): Promise<void> {
    const h = this.harness;
    const { transfer } = intent;
    const pkg = await h.prepareMove(transfer, intent.local!);
    const limit = this.options.maxPackageChars?.(intent.peer);
    const bound = this.options.maxStagedBytes?.(intent.peer);
    let parts: string[] | undefined;
    const valueBound = this.options.maxValueBytes?.(intent.peer);
    const largest = valueBound === undefined ? 0 : largestValueBytes(pkg);
    if (valueBound !== undefined && largest > valueBound) {
      // As a package over the bound below: never sent, the same every time, so cancelled here.
      const refusal = tooLargeValue(largest, valueBound);
      await h.cancelMove(transfer, {
        also: (tx) => putIntent(tx, { ...intent, step: "cancelled", reason: refusal.message }),
      });
      return;
    }
    if (limit !== undefined && packageTooLarge(pkg, limit)) {
      const text = JSON.stringify(pkg);
      const refusal =
        bound === undefined ? tooLarge(limit) : utf8Bytes(text) > bound ? tooLargeStaged(bound) : undefined;
      if (refusal) {
        // Never sent (no path sends it: it is the same package every time), so nothing to refuse there.
        await h.cancelMove(transfer, {
          also: (tx) => putIntent(tx, { ...intent, step: "cancelled", reason: refusal.message }),
        });
        return;
      }
      parts = cutPackage(text, limit);
    }
    const peer = this.#peer(intent);
    let remote: ConversationId;
    try {
      remote = parts
        ? await this.#sendParts(peer, transfer, parts)
        : (await peer.adopt(pkg as unknown as Json)).conversationId;
    } catch (error) {
      if (!isRefusal(error)) throw error;
      // Final: make the peer's refusal durable (or learn it adopted after all), then undo or finish.
      const answer = await peer.refuse(transfer);
      if (answer.status === "refused") {
        await h.cancelMove(transfer, {
          also: (tx) => putIntent(tx, { ...intent, step: "cancelled", reason: error.message }),
        });
        return;
      }
      remote = answer.conversationId;
    }
    await h.finishMove(transfer, remote, {
      also: (tx) => putIntent(tx, { ...intent, remote, step: "done" }),
    });
  }

  /**
   * Stage every part on the peer (each idempotent: a retry sends them again, and the peer keeps the
   * first copy), then adopt them there. A peer that adopted the transfer already says so at once.
   */
  async #sendParts(peer: MovePeer, transfer: string, parts: string[]): Promise<ConversationId> {
    if (!peer.stage || !peer.adoptStaged)
      throw new MoveRefused("too_large", "the other home takes no package in parts");
    const stage = peer.stage.bind(peer);
    for (const [index, part] of parts.entries()) {
      // A peer that limits its calls' rate (a server space's socket) is waited for, a second a time.
      let answer: StageAnswer | undefined;
      for (let waited = 0; answer === undefined; waited++)
        answer = await stage(transfer, index, parts.length, part).catch(async (error: unknown) => {
          if ((error as { code?: unknown })?.code !== "rate-limited" || waited >= 60) throw error;
          await new Promise((resolve) => setTimeout(resolve, 1_000));
          return undefined;
        });
      if (answer.status === "adopted") return answer.conversationId;
    }
    return (await peer.adoptStaged(transfer)).conversationId;
  }

  /** peer -> browser: `asked` (the peer's step 1, adopt here), `adopted` (the peer's step 3), `cancelling`. */
  async #back(intent: MoveIntent): Promise<void> {
    const h = this.harness;
    const { transfer } = intent;
    const peer = this.#peer(intent);
    if (intent.step === "adopted") {
      await peer.finish(transfer, intent.local!);
      await h.transaction((tx) => putIntent(tx, { ...intent, step: "done" }));
      return;
    }
    if (intent.step === "cancelling") {
      await peer.cancel(transfer).catch((error: unknown) => {
        // Nothing to undo there: its step 1 never committed.
        if (!(isRefusal(error) && error.reason === "unknown_transfer")) throw error;
      });
      await h.transaction((tx) => putIntent(tx, { ...intent, step: "cancelled" }));
      return;
    }
    let refusal: MoveRefused | undefined;
    try {
      const pkg = await peer.prepare(transfer, intent.remote!);
      await h.adoptMove(pkg, {
        also: (tx, local) => putIntent(tx, { ...intent, local, step: "adopted" }),
      });
      return;
    } catch (error) {
      if (!isRefusal(error)) throw error;
      refusal = error;
    }
    // Final: refuse here durably (a later adopt can never happen), then undo the peer's step 1.
    const answer = await h.refuseMove(transfer, {
      also: (tx) => putIntent(tx, { ...intent, step: "cancelling", reason: refusal.message }),
    });
    if (answer.status === "adopted")
      await h.transaction((tx) =>
        putIntent(tx, { ...intent, local: answer.conversationId, step: "adopted" }),
      );
  }
}
