/**
 * The browser engine's side of moving conversations to and from the configured server (issue 27,
 * item 4): a `MovePeer` (moves.ts) over the server space's `moves` group, on a WebSocket the engine
 * opens itself (worker/protocol/socket.ts `connectServer`, the same reconnecting client the tabs
 * use), and the `homes` group its tabs call. Invariants:
 * - the address and token are the server setting's (remote.ts); the token travels only in the
 *   socket's subprotocol list, never in an intent, an error or a log;
 * - a move is started only with the server connected and the token accepted: otherwise it is
 *   refused with `HomeUnavailable` (`no_server`, `unauthorized`, `unreachable`) before anything is
 *   written; a refusal of the move itself is `MoveRefused` (also before anything is written when
 *   the conversation's entries alone are over what the server takes in parts, MAX_STAGED_BYTES:
 *   `too_large`); a package over the server's message limit is sent in parts (`moves.stage`,
 *   `moves.adoptStaged`);
 * - once started, a move is the orchestrator's (moves.ts): a lost server leaves it `pending`, and
 *   `resume()` finishes it when the engine opens (`start`) and each time the connection comes back;
 * - a peer call the server's door refused unread or unchecked (too large, malformed, bad
 *   arguments, an unknown method: the server never ran it) is a final `MoveRefused` (moves.ts
 *   `peerError`); a lost connection or a rate limit is not (the orchestrator retries).
 * The peer is named by the space's socket address: a move started with one server is finished only
 * with that one (another setting leaves it pending until the setting is back).
 */
import type { AgentHarness } from "../agent/harness.ts";
import { MoveRefused } from "../core/errors.ts";
import { MAX_STAGED_BYTES } from "../core/move.ts";
import type { HomesApi, MovesApi, MoveView } from "../protocol/index.ts";
import { SERVER_MAX_MESSAGE_CHARS, SERVER_MAX_VALUE_BYTES } from "../protocol/server-socket.ts";
import {
  type BackoffOptions,
  connectServer,
  probeServer,
  type ServerConnection,
  type ServerState,
  type SocketConstructor,
  spaceAddress,
} from "../protocol/socket.ts";
import { type MoveIntent, type MovePeer, Moves, protocolPeer } from "./moves.ts";
import { remoteApi } from "./remote.ts";

/** Why a move could not start: the server is not configured, refused the token, or did not answer. */
export class HomeUnavailable extends Error {
  override readonly name = "HomeUnavailable";
  constructor(
    readonly code: "no_server" | "unauthorized" | "unreachable",
    message: string,
  ) {
    super(message);
  }
}

/** Room for the call around a package in one message (`{"id":N,"method":"moves.adopt","args":[...]}`). */
const MESSAGE_OVERHEAD = 1_000;
/** The largest package the server takes in one message. */
export const MAX_PACKAGE_CHARS = SERVER_MAX_MESSAGE_CHARS - MESSAGE_OVERHEAD;

/**
 * A MovePeer over a server space's `moves` group (`api()`: the connection's, which waits for a
 * lost connection): moves.ts `protocolPeer`, whose errors keep refusals typed.
 */
export function serverPeer(api: () => MovesApi): MovePeer {
  return protocolPeer({
    prepare: (transfer, c) => api().prepare(transfer, c),
    adopt: (pkg) => api().adopt(pkg),
    stage: (transfer, index, count, part) => api().stage(transfer, index, count, part),
    adoptStaged: (transfer) => api().adoptStaged(transfer),
    finish: (transfer, c) => api().finish(transfer, c),
    refuse: (transfer) => api().refuse(transfer),
    cancel: (transfer) => api().cancel(transfer),
  });
}

/** A move intent as the tabs see it. */
export function moveView(intent: MoveIntent): MoveView {
  return {
    transfer: intent.transfer,
    direction: intent.direction === "out" ? "toServer" : "back",
    ...(intent.local !== undefined ? { local: intent.local } : {}),
    ...(intent.remote !== undefined ? { remote: intent.remote } : {}),
    status: intent.step === "done" ? "done" : intent.step === "cancelled" ? "cancelled" : "pending",
    ...(intent.reason !== undefined ? { reason: intent.reason } : {}),
  };
}

export interface ServerHomeOptions {
  readonly harness: () => Promise<AgentHarness>;
  /** The WebSocket constructor (default: the platform's). */
  readonly WebSocket?: SocketConstructor;
  /** The fetch that probes a refused socket's token (default: the platform's). */
  readonly fetch?: typeof fetch;
  readonly backoff?: BackoffOptions;
  /** How long a move waits for the server before it is refused `unreachable` (default 15 s). */
  readonly connectMs?: number;
  /** How long a step waits for a lost connection before the move is left pending (default 15 s). */
  readonly waitMs?: number;
  /** The largest package the server takes (default MAX_PACKAGE_CHARS). */
  readonly maxPackageChars?: number;
  /** The most bytes of a package the server takes in parts (default MAX_STAGED_BYTES, 64 MiB). */
  readonly maxStagedBytes?: number;
  /** The largest document or task the server stores in one row (default SERVER_MAX_VALUE_BYTES). */
  readonly maxValueBytes?: number;
  /** Wraps the peer each step uses (tests: a lost answer, the server killed mid-move). */
  readonly wrapPeer?: (peer: MovePeer) => MovePeer;
  /** Told each unexpected failure of a background resume (never with the token). */
  readonly onReport?: (error: unknown) => void;
}

interface Open {
  readonly peer: string;
  readonly connection: ServerConnection;
  /** Whoever waits for the next state change. */
  readonly changed: Set<() => void>;
}

/** The server connection the engine keeps for moves, the orchestrator on it, and the tabs' `homes` group. */
export class ServerHome {
  readonly #options: ServerHomeOptions;
  #moves: Promise<Moves> | undefined;
  #open: Open | undefined;
  #closed = false;

  constructor(options: ServerHomeOptions) {
    this.#options = options;
  }

  /** Open the orchestrator and, when a move is unfinished, the connection (which resumes it). */
  async start(): Promise<void> {
    const moves = await this.#orchestrator();
    if (!moves.list().some((i) => i.step !== "done" && i.step !== "cancelled")) return;
    // No server set (any more): the moves wait for it.
    await this.#connect().catch((error: unknown) => {
      if (!(error instanceof HomeUnavailable)) throw error;
    });
  }

  /** The server setting changed: the old connection goes; unfinished moves wait for theirs. */
  async settingsChanged(): Promise<void> {
    this.#drop();
    await this.start();
  }

  close(): void {
    this.#closed = true;
    this.#drop();
  }

  /** The `homes` group its tabs call. */
  readonly api: HomesApi = {
    toServer: async (conversationId) => {
      const { moves, peer } = await this.#ready();
      const before = new Set(moves.list().map((i) => i.transfer));
      try {
        return moveView(this.#intentOf(moves, (await moves.moveOut(conversationId, peer)).transfer));
      } catch (error) {
        if (error instanceof MoveRefused) throw error;
        // Step 1 committed, then the server was lost: the move is pending, finished later.
        const started = moves.list().find((i) => !before.has(i.transfer) && i.local === conversationId);
        if (!started) throw error;
        return moveView(started);
      }
    },
    bringBack: async (remote) => {
      const { moves, peer } = await this.#ready();
      const before = new Set(moves.list().map((i) => i.transfer));
      try {
        return moveView(this.#intentOf(moves, (await moves.bringBack(remote, peer)).transfer));
      } catch (error) {
        if (error instanceof MoveRefused) throw error;
        const started = moves.list().find((i) => !before.has(i.transfer) && i.remote === remote);
        if (!started) throw error;
        return moveView(started);
      }
    },
    list: async () => (await this.#orchestrator()).list().map(moveView),
  };

  #intentOf(moves: Moves, transfer: string): MoveIntent {
    const intent = moves.intent(transfer);
    if (!intent) throw new Error(`move ${transfer} has no intent`);
    return intent;
  }

  #orchestrator(): Promise<Moves> {
    this.#moves ??= this.#options.harness().then(
      (harness) =>
        new Moves(harness, {
          peer: (name) => {
            const open = this.#open;
            if (!open || open.peer !== name) return undefined;
            const peer = serverPeer(() => open.connection.api.moves);
            return this.#options.wrapPeer ? this.#options.wrapPeer(peer) : peer;
          },
          maxPackageChars: () => this.#options.maxPackageChars ?? MAX_PACKAGE_CHARS,
          maxStagedBytes: () => this.#options.maxStagedBytes ?? MAX_STAGED_BYTES,
          maxValueBytes: () => this.#options.maxValueBytes ?? SERVER_MAX_VALUE_BYTES,
        }),
    );
    return this.#moves;
  }

  /** The orchestrator and the connected server, or a `HomeUnavailable` refusal. */
  async #ready(): Promise<{ moves: Moves; peer: string }> {
    const moves = await this.#orchestrator();
    const open = await this.#connect();
    const state = await this.#settled(open);
    if (state.state === "unauthorized")
      throw new HomeUnavailable("unauthorized", `the server refused the token: ${state.message}`);
    if (state.state !== "connected")
      throw new HomeUnavailable(
        "unreachable",
        state.state === "incompatible"
          ? `the server cannot be used: ${state.message}`
          : "the server did not answer: check that it runs and its address",
      );
    return { moves, peer: open.peer };
  }

  /** Wait (bounded) for the connection to be connected, or refused for good. */
  #settled(open: Open): Promise<ServerState> {
    const done = (s: ServerState) => s.state !== "connecting" && s.state !== "reconnecting";
    if (done(open.connection.state)) return Promise.resolve(open.connection.state);
    return new Promise((resolve) => {
      const timer = setTimeout(() => finish(), this.#options.connectMs ?? 15_000);
      const check = () => {
        if (done(open.connection.state)) finish();
      };
      const finish = () => {
        clearTimeout(timer);
        open.changed.delete(check);
        resolve(open.connection.state);
      };
      open.changed.add(check);
    });
  }

  /** The connection to the configured server (opened once per setting), or `no_server`. */
  async #connect(): Promise<Open> {
    if (this.#closed) throw new HomeUnavailable("unreachable", "the engine is closing");
    const harness = await this.#options.harness();
    const credentials = await remoteApi(async () => harness).credentials();
    if (!credentials)
      throw new HomeUnavailable("no_server", "no server is set: add its address and token in the settings");
    let address: ReturnType<typeof spaceAddress>;
    try {
      address = spaceAddress(credentials.url, credentials.token);
    } catch (error) {
      throw new HomeUnavailable("no_server", error instanceof Error ? error.message : String(error));
    }
    if (this.#open?.peer === address.socketUrl) return this.#open;
    this.#drop();
    const changed = new Set<() => void>();
    const { token } = credentials;
    const WebSocket = this.#options.WebSocket;
    const fetcher = this.#options.fetch;
    const connection = connectServer({
      url: address.socketUrl,
      token,
      tabId: "engine-moves",
      ...(WebSocket ? { WebSocket } : {}),
      ...(this.#options.backoff ? { backoff: this.#options.backoff } : {}),
      waitMs: this.#options.waitMs ?? 15_000,
      probe: () => probeServer(address.checkUrl, token, fetcher),
      onState: (state) => {
        for (const c of [...changed]) c();
        // The server is back (or reached for the first time): finish what is unfinished.
        if (state.state === "connected") void this.#resume();
      },
    });
    this.#open = { peer: address.socketUrl, connection, changed };
    return this.#open;
  }

  async #resume(): Promise<void> {
    const moves = await this.#orchestrator();
    for (const outcome of await moves.resume())
      if (outcome.status === "rejected") this.#options.onReport?.(outcome.reason);
  }

  #drop(): void {
    const open = this.#open;
    this.#open = undefined;
    open?.connection.close();
    for (const c of open?.changed ?? []) c();
  }

  /** The moves that are not finished (tests, the debug page). */
  async pending(): Promise<MoveView[]> {
    return (await this.#orchestrator())
      .list()
      .filter((i) => i.step !== "done" && i.step !== "cancelled")
      .map(moveView);
  }
}
