/**
 * The server engine: one Durable Object per user space (a named set of conversations), running the
 * agent harness on the object's own SQLite (do-store.ts). The agent it runs is composed by the layer
 * above (`OpenSpaceHarness`: the app's demo model, tools and keys; see worker/app/space-agent.ts),
 * since this room may not import the app's. What this class owns is the platform:
 *
 * - **Opening = recovering.** The first event an instance receives (a request or its alarm) opens
 *   the store and the harness; opening puts every task the previous instance left `running` back to
 *   `pending` and continues from its last commit, exactly as a tab reload does in the browser. One
 *   open per instance, shared by whatever arrives meanwhile; a fatal store drops it, so the next
 *   event opens afresh.
 * - **Wake-ups by alarm.** A Durable Object may be evicted (or its process killed) at any time, and
 *   its in-process timers go with it. So whatever the engine waits on by timer is also armed as the
 *   object's alarm (one per object, persisted with it): a durable deadline a task waits for (the
 *   harness's `wakeAt` port: a retry's backoff, a deferred poll), and, while any task is live, a
 *   heartbeat `heartbeatMs` ahead (a task asleep on a durable timer, a schedule, needs none: the
 *   harness's `onTimer` arms the alarm for the earliest due timer instead; nor does a tool call waiting
 *   for a person's approval, whose decision arrives by a request that opens the object, nor a task
 *   waiting only for such tasks), so that an object evicted in the middle of a run (a model call
 *   in flight, a tool running) comes back by itself and recovers. The alarm is only ever moved
 *   earlier while it is armed; when it fires, the handler opens the harness (recovering if the
 *   instance is new) and arms the next one if work is still live. A space with no live work and
 *   no deadline has no alarm and costs nothing.
 * - **Tabs attach over a WebSocket** (`GET .../socket` with `Upgrade: websocket`), accepted with
 *   the Hibernation API (`ctx.acceptWebSocket`: an idle space with open sockets costs nothing) and
 *   served by the protocol's door (worker/protocol/door.ts) over socket.ts's transport, on the
 *   engine service the composition makes, plus the `moves` group (a move's steps, for a browser
 *   engine moving a conversation here or taking one back: `#moveSteps`) (the app's HarnessEngine: every call, each tab's watches),
 *   and the engine's `mcp` group when it has one (the space's own MCP servers).
 *   Each socket is a tab of its own to the engine (`socket-<n>`, whatever tab id it says): its
 *   close (or error) drops that tab's watches, and a tab that reconnects is not confused with its dead socket. A socket's tab id
 *   and its open watches are kept in its attachment (`serializeAttachment`); an instance that finds
 *   sockets it did not accept (it woke from hibernation, or the previous instance died: their
 *   watches died with it) closes them with `RECONNECT_CLOSE` (4001), and the tab reconnects and
 *   opens its watches again. A fatal store failure does the same to every socket. The `debug`
 *   group is never served here. Who may enter is checked before a request reaches the object (the
 *   front door: worker/entry/server.ts, worker/server/token.ts).
 * - **Routes** for the tests and the local server (behind the same token check): `POST /submit
 *   {conversation?, text, requestId?}` submits an input (to a new conversation when none is named;
 *   a known `requestId` is the same submission), `GET /view?conversation=N` answers the committed
 *   entries and whether work is live, `GET /status` how this instance was opened (`by`: "fetch" |
 *   "alarm"), the alarm armed and the sockets it serves, `POST
 *   /rearm` arms the stored alarm again without opening the engine (see `rearm`: a local runtime's
 *   restart forgets the schedule).
 */
import type { AgentHarness } from "../agent/harness.ts";
import { waitsForPerson } from "../agent/tools/approval.ts";
import { errorMessage } from "../core/errors.ts";
import type { TaskGraph } from "../core/inspect.ts";
import type { ConversationId } from "../core/types.ts";
import {
  DEFAULT_LIMITS,
  type DoorLimits,
  type EngineService,
  serveConnection,
  type TabCalls,
} from "../protocol/door.ts";
import type { EngineStatus, MovesApi, TabHello } from "../protocol/index.ts";
import {
  RECONNECT_CLOSE,
  SERVER_MAX_MESSAGE_CHARS,
  SERVER_MAX_PARTED_CHARS,
  SPACE_SUBPROTOCOL,
} from "../protocol/server-socket.ts";
import { type DoStorage, type DoStore, openDoStore } from "./do-store.ts";
import { DEFAULT_RATE, type RateLimit, type SocketConnection, socketTransport } from "./socket.ts";

/** The part of a Durable Object's `ctx.storage` the space uses: the store's, and the alarm. */
export interface SpaceStorage extends DoStorage {
  setAlarm(scheduledTime: number): Promise<void>;
  getAlarm(): Promise<number | null>;
}

/** The part of a workerd WebSocket (server end) the space uses. */
export interface SpaceSocket {
  send(message: string): void;
  close(code?: number, reason?: string): void;
  serializeAttachment(value: unknown): void;
  deserializeAttachment(): unknown;
}

/** The part of a Durable Object's `ctx` the space uses. */
export interface SpaceState {
  readonly storage: SpaceStorage;
  /** The Hibernation API (absent where the runtime has none: sockets are then refused). */
  acceptWebSocket?(ws: SpaceSocket): void;
  getWebSockets?(): SpaceSocket[];
}

/** The engine service a space serves on its sockets (the app's HarnessEngine). */
export interface SpaceEngine extends EngineService {
  readonly status: EngineStatus;
  setStatus(status: EngineStatus): void;
  /** The harness stopped: every watch ends. */
  stopAll(): void;
  dropTab(tabId: string): void;
}

/** Makes the space's engine service on its harness (the composition's; the server's room may not import the app's). */
export type MakeSpaceEngine = (options: { harness(): Promise<AgentHarness>; build: string }) => SpaceEngine;

export interface SpaceOptions {
  /** The engine service its sockets are served; without one, sockets are refused (501). */
  readonly engine?: MakeSpaceEngine;
}

export { RECONNECT_CLOSE };

/**
 * The largest message a socket may send: a million characters of JSON text, refused unparsed above
 * (socket.ts). Below the runtime's own limit, so that a message just over it gets a typed refusal:
 * workerd (1.20250718, run locally) closes a socket whose message is over 1 MiB of UTF-8 with code
 * 1009 before the space sees it; Cloudflare's platform limit applies there. A longer call comes in
 * parts (server-socket.ts `messageFrames`), joined by the socket's transport up to
 * `SERVER_MAX_PARTED_CHARS`, the door's bound for a socket (decision 0016).
 * `SPACE_MAX_MESSAGE_CHARS` lowers the frame's limit.
 */
export const SERVER_LIMITS: DoorLimits = {
  maxChars: SERVER_MAX_MESSAGE_CHARS,
  maxDepth: DEFAULT_LIMITS.maxDepth,
};

/** What a socket's attachment keeps (it survives hibernation; at most 2 KiB). */
interface SocketNote {
  readonly tabId: string | null;
  /** Its open watches, as `<method> <args as JSON>` (the first 20). */
  readonly watches: readonly string[];
}

/**
 * The object's environment (its bindings and secrets). Read here: `SPACE_HEARTBEAT_MS`,
 * `SPACE_BUILD` (the build a hello answers), `SPACE_MAX_MESSAGE_CHARS`, `SPACE_RATE_PER_SECOND` and
 * `SPACE_RATE_BURST` (a socket's limits: socket.ts). The composition reads the model keys (`<PROVIDER>_API_KEY`, see `apiKeyFromEnv`).
 */
export type SpaceEnv = Readonly<Record<string, unknown>>;

/** What the space hands the harness it opens. */
export interface SpacePorts {
  /** Arm a wake-up at this time (AgentHarnessOptions.wakeAt). */
  readonly wakeAt: (at: number) => void;
  /** The earliest durable timer changed (HarnessOptions.onTimer): the alarm follows it. */
  readonly onTimer?: (at: number | undefined) => void;
  /** Model keys from the server's own secrets (AgentHarnessOptions.apiKey); a browser's never come here. */
  readonly apiKey: (provider: string) => string | undefined;
  readonly onReport: (error: unknown) => void;
  readonly onFatal: (error: Error) => void;
}

/** Opens the agent harness a space runs (the composition: models, tools, workspace). */
export type OpenSpaceHarness = (store: DoStore, ports: SpacePorts) => Promise<AgentHarness>;

/** How often an object with live work is woken at the latest (Cloudflare evicts an idle object after about a minute). */
export const DEFAULT_HEARTBEAT_MS = 30_000;

/**
 * The key of `provider` from the environment's secrets: `<PROVIDER>_API_KEY`, upper case, dashes as
 * underscores (`anthropic` -> `ANTHROPIC_API_KEY`, `google-vertex` -> `GOOGLE_VERTEX_API_KEY`).
 */
export function apiKeyFromEnv(env: SpaceEnv, provider: string): string | undefined {
  const value = env[`${provider.toUpperCase().replace(/[^A-Z0-9]/g, "_")}_API_KEY`];
  return typeof value === "string" && value !== "" ? value : undefined;
}

interface Opened {
  readonly harness: AgentHarness;
  readonly by: "fetch" | "alarm";
  readonly at: number;
}

class BadRequest extends Error {
  override name = "BadRequest";
}

export class Space {
  readonly #state: SpaceState;
  readonly #env: SpaceEnv;
  readonly #open: OpenSpaceHarness;
  readonly #heartbeatMs: number;
  readonly #makeEngine: MakeSpaceEngine | undefined;
  #engine: SpaceEngine | undefined;
  /** The sockets this instance accepted, each with its connection and its tab's key in the engine. */
  readonly #sockets = new Map<SpaceSocket, { socket: SocketConnection; key: string; note: SocketNote }>();
  #nextSocket = 1;
  #opened: Promise<Opened> | undefined;
  /** The alarm as this instance last armed or read it (undefined: none). */
  #armedAt: number | undefined;
  /** Deadlines the harness announced that are still ahead. */
  #deadlines = new Set<number>();
  /** The earliest durable timer the harness announced (core/timers.ts). */
  #timerAt: number | undefined;
  /** Alarm writes, one at a time and in order. */
  #arming: Promise<void> = Promise.resolve();

  constructor(state: SpaceState, env: SpaceEnv, open: OpenSpaceHarness, options: SpaceOptions = {}) {
    this.#state = state;
    this.#env = env;
    this.#open = open;
    this.#makeEngine = options.engine;
    const heartbeat = Number(env["SPACE_HEARTBEAT_MS"]);
    this.#heartbeatMs = Number.isFinite(heartbeat) && heartbeat > 0 ? heartbeat : DEFAULT_HEARTBEAT_MS;
    // Sockets a previous instance accepted (this one woke from hibernation, or that one died): their
    // watches are gone; the tabs reconnect and open them again.
    for (const ws of state.getWebSockets?.() ?? []) this.#reconnect(ws);
  }

  async fetch(request: Request): Promise<Response> {
    const url = new URL(request.url);
    try {
      if (url.pathname.endsWith("/socket")) return this.#accept(request);
      if (request.method === "POST" && url.pathname.endsWith("/rearm"))
        return Response.json(await this.rearm());
      const { harness, by, at } = await this.#harness("fetch");
      switch (`${request.method} ${url.pathname.replace(/^.*(\/[a-z]+)$/, "$1")}`) {
        case "POST /submit":
          return Response.json(await this.#submit(harness, await request.json()));
        case "GET /view":
          return Response.json(await this.#view(harness, conversationParam(url)));
        case "GET /status":
          return Response.json({
            by,
            at,
            alarm: await this.#state.storage.getAlarm(),
            sockets: this.#sockets.size,
          });
        default:
          return Response.json({ error: "no such route" }, { status: 404 });
      }
    } catch (error) {
      const status = error instanceof BadRequest ? 400 : 500;
      return Response.json({ error: errorMessage(error), name: (error as Error)?.name }, { status });
    }
  }

  // --- Sockets ---------------------------------------------------------------------------------

  /** The engine service of this instance (made once; its harness opened on first use). */
  #service(): SpaceEngine | undefined {
    if (!this.#makeEngine) return undefined;
    this.#engine ??= this.#makeEngine({
      harness: () => this.harness(),
      build: this.#build(),
    });
    const engine = this.#engine;
    // A harness opened before the engine was made (a route opened it) makes no status change itself.
    void this.#harness("fetch").then(
      () => engine.status.phase !== "ready" && engine.setStatus(this.#readyStatus()),
      () => undefined,
    );
    return engine;
  }

  /** Accept a WebSocket (the front door checked its token) and serve the protocol on it. */
  #accept(request: Request): Response {
    if (request.headers.get("upgrade")?.toLowerCase() !== "websocket")
      return Response.json(
        { error: "a WebSocket upgrade is expected here", code: "not-websocket" },
        { status: 426 },
      );
    const engine = this.#service();
    const Pair = (globalThis as { WebSocketPair?: new () => Record<0 | 1, SpaceSocket> }).WebSocketPair;
    if (!engine || !Pair || !this.#state.acceptWebSocket)
      return Response.json({ error: "this space serves no sockets", code: "no-sockets" }, { status: 501 });
    const offered = (request.headers.get("sec-websocket-protocol") ?? "").split(",").map((p) => p.trim());
    if (offered[0] !== "" && !offered.includes(SPACE_SUBPROTOCOL))
      return Response.json(
        { error: `offer the subprotocol ${SPACE_SUBPROTOCOL}`, code: "bad-subprotocol" },
        { status: 400 },
      );
    const pair = new Pair();
    const client = pair[0];
    const ws = pair[1];
    this.#state.acceptWebSocket(ws);
    const socket = socketTransport(ws, {
      limits: this.#limits(),
      rate: this.#rate(),
      maxPartedChars: SERVER_MAX_PARTED_CHARS,
    });
    const key = `socket-${this.#nextSocket++}`;
    const entry = { socket, key, note: { tabId: null, watches: [] } as SocketNote };
    this.#sockets.set(ws, entry);
    this.#note(ws, entry.note);
    serveConnection({
      transport: socket.transport,
      engine: this.#socketEngine(engine, ws, key),
      // A frame is bounded by the transport; a call sent in parts is bounded by its joined size.
      limits: { ...this.#limits(), maxChars: SERVER_MAX_PARTED_CHARS },
    });
    return new Response(null, {
      status: 101,
      webSocket: client,
      ...(offered[0] !== "" ? { headers: { "sec-websocket-protocol": SPACE_SUBPROTOCOL } } : {}),
    } as ResponseInit);
  }

  /**
   * The engine as one socket reaches it: the tab is `key` to the engine (its own, whatever tab id it
   * says), its watches are noted in the socket's attachment, and there is no `debug` group.
   */
  #socketEngine(engine: SpaceEngine, ws: SpaceSocket, key: string): EngineService {
    const noted = new Map<number, string>();
    const update = (tabId?: string) => {
      const entry = this.#sockets.get(ws);
      if (!entry) return;
      entry.note = { tabId: tabId ?? entry.note.tabId, watches: [...noted.values()].slice(0, 20) };
      this.#note(ws, entry.note);
    };
    const noting =
      <A extends unknown[]>(what: string, open: (...args: A) => Promise<number>) =>
      async (...args: A): Promise<number> => {
        const id = await open(...args);
        noted.set(id, `${what} ${JSON.stringify(args.filter((a) => typeof a !== "function"))}`);
        update();
        return id;
      };
    return {
      moves: this.#moveSteps(),
      // The space's MCP servers, when the composition's engine keeps them (worker/app/space-agent.ts).
      ...(engine.mcp ? { mcp: engine.mcp } : {}),
      hello: async (tab: TabHello) => {
        const answer = await engine.hello({ ...tab, tabId: key });
        update(tab.tabId.slice(0, 100));
        return answer;
      },
      onStatus: (_tabId, listener) => engine.onStatus(key, listener),
      tab: (): TabCalls => {
        const calls = engine.tab(key);
        return {
          ...calls,
          conversations: {
            ...calls.conversations,
            watch: noting("conversations.watch", calls.conversations.watch),
          },
          watches: {
            ...calls.watches,
            conversation: noting("watches.conversation", calls.watches.conversation),
            events: noting("watches.events", calls.watches.events),
            taskGraph: noting("watches.taskGraph", calls.watches.taskGraph),
            unwatch: async (watchId: number) => {
              await calls.watches.unwatch(watchId);
              if (noted.delete(watchId)) update();
            },
          },
        };
      },
    };
  }

  /**
   * A move's steps on this space's harness (worker/core/move.ts), for the browser engine that
   * drives a move (worker/app/moves.ts): each idempotent under its transfer id, a refusal a typed
   * `MoveRefused`. A package over the socket's limit arrives in parts (`stage`, then
   * `adoptStaged`), stored in the space until adopted or refused.
   */
  #moveSteps(): MovesApi {
    return {
      prepare: async (transfer, conversationId) =>
        (await this.harness()).prepareMove(transfer, conversationId),
      adopt: async (pkg) => ({ conversationId: await (await this.harness()).adoptMove(pkg) }),
      stage: async (transfer, index, count, part) =>
        (await this.harness()).stageMovePart(transfer, index, count, part),
      adoptStaged: async (transfer) => ({
        conversationId: await (await this.harness()).adoptStagedMove(transfer),
      }),
      finish: async (transfer, conversationId) => (await this.harness()).finishMove(transfer, conversationId),
      refuse: async (transfer) => (await this.harness()).refuseMove(transfer),
      cancel: async (transfer) => (await this.harness()).cancelMove(transfer),
    };
  }

  #note(ws: SpaceSocket, note: SocketNote): void {
    try {
      ws.serializeAttachment(note);
    } catch (error) {
      console.warn("space: could not note a socket:", errorMessage(error));
    }
  }

  #limits(): DoorLimits {
    const chars = Number(this.#env["SPACE_MAX_MESSAGE_CHARS"]);
    return Number.isSafeInteger(chars) && chars > 0 && chars < SERVER_LIMITS.maxChars
      ? { ...SERVER_LIMITS, maxChars: chars }
      : SERVER_LIMITS;
  }

  #rate(): RateLimit {
    const rate = Number(this.#env["SPACE_RATE_PER_SECOND"]);
    const burst = Number(this.#env["SPACE_RATE_BURST"]);
    return {
      ratePerSecond: Number.isFinite(rate) && rate > 0 ? rate : DEFAULT_RATE.ratePerSecond,
      burst: Number.isFinite(burst) && burst >= 1 ? burst : DEFAULT_RATE.burst,
    };
  }

  /** Close a socket so that its tab reconnects (and opens its watches again). */
  #reconnect(ws: SpaceSocket): void {
    try {
      ws.close(RECONNECT_CLOSE, "the space restarted: reconnect");
    } catch {
      // Already closed.
    }
  }

  /** A frame from a socket (Hibernation API). */
  webSocketMessage(ws: SpaceSocket, message: string | ArrayBuffer): void {
    const entry = this.#sockets.get(ws);
    if (entry) entry.socket.receive(message);
    else this.#reconnect(ws);
  }

  /** A socket closed: its tab is gone (its watches end). */
  webSocketClose(ws: SpaceSocket, code: number, _reason: string, _wasClean: boolean): void {
    this.#drop(ws);
    try {
      // Answer the close (1004, 1005, 1006 and 1015 only report one: they are never sent).
      ws.close([1004, 1005, 1006, 1015].includes(code) ? 1000 : code, "closed");
    } catch {
      // Already closed.
    }
  }

  webSocketError(ws: SpaceSocket, _error: unknown): void {
    this.#drop(ws);
  }

  #drop(ws: SpaceSocket): void {
    const entry = this.#sockets.get(ws);
    if (!entry) return;
    this.#sockets.delete(ws);
    entry.socket.closed();
    this.#engine?.dropTab(entry.key);
  }

  /**
   * Arm the stored alarm again, without opening the engine: the local runtime's stand-in for
   * Cloudflare's durable alarm scheduler. workerd run locally (1.20250718, through miniflare 3)
   * keeps the schedule of a SQLite-backed object's alarm in memory: after its process restarts, a
   * stored alarm fires only once it is set again (to another time: setting the stored one is a
   * no-op), so the local server touches each space at start (`POST .../rearm`). On Cloudflare the
   * stored alarm fires by itself.
   */
  async rearm(): Promise<{ alarm: number | null }> {
    const stored = await this.#state.storage.getAlarm();
    if (stored === null) return { alarm: null };
    this.#armedAt = stored + 1;
    await this.#state.storage.setAlarm(stored + 1);
    return { alarm: stored + 1 };
  }

  /** The alarm: open (recovering a new instance's tasks), then arm the next wake-up if work is live. */
  async alarm(): Promise<void> {
    this.#armedAt = undefined;
    const { harness } = await this.#harness("alarm");
    this.#armNext(harness);
  }

  /** The harness this instance runs, opened (and recovered) by the first caller. */
  protected async harness(): Promise<AgentHarness> {
    return (await this.#harness("fetch")).harness;
  }

  #harness(by: Opened["by"]): Promise<Opened> {
    this.#opened ??= this.#openHarness(by);
    return this.#opened;
  }

  async #openHarness(by: Opened["by"]): Promise<Opened> {
    let store: DoStore | undefined;
    try {
      this.#armedAt = (await this.#state.storage.getAlarm()) ?? undefined;
      store = await openDoStore({ storage: this.#state.storage, name: "space" });
      const harness = await this.#open(store, {
        wakeAt: (at) => {
          this.#deadlines.add(at);
          this.#want(at);
        },
        // A durable timer (a schedule) is a deadline too: the alarm wakes the object for it.
        onTimer: (at) => {
          this.#timerAt = at;
          if (at !== undefined) this.#want(at);
        },
        apiKey: (provider) => apiKeyFromEnv(this.#env, provider),
        onReport: (error) => console.warn("space:", errorMessage(error)),
        onFatal: (error) => {
          console.error("space: the store failed:", errorMessage(error));
          this.#opened = undefined;
          this.#engine?.setStatus({
            phase: "failed",
            stage: "run",
            reason: "unknown",
            message: `the space's store failed: ${errorMessage(error)}`,
            advice: "Reconnect: the space opens its store again.",
          });
          this.#engine?.stopAll();
          for (const ws of [...this.#sockets.keys()]) {
            this.#drop(ws);
            this.#reconnect(ws);
          }
        },
      });
      // Live work from now on keeps a wake-up armed; the recovered work too.
      harness.subscribe((change) => {
        if (
          change.tasks.some(
            (t) => t.state.status !== "terminal" && !sleeping(t.state) && !waitsForPerson(asNode(t)),
          )
        )
          this.#want(Date.now() + this.#heartbeatMs);
      });
      this.#armNext(harness);
      this.#engine?.setStatus(this.#readyStatus());
      return { harness, by, at: Date.now() };
    } catch (error) {
      this.#opened = undefined;
      await store?.close().catch(() => undefined);
      throw error;
    }
  }

  #readyStatus(): EngineStatus {
    return {
      phase: "ready",
      storeKind: "durable-object",
      build: this.#build(),
      jspi: false,
      persisted: true,
    };
  }

  #build(): string {
    const build = this.#env["SPACE_BUILD"];
    return typeof build === "string" && build !== "" ? build : "server";
  }

  /** The next wake-up: the earliest deadline ahead, or a heartbeat while work is live. */
  #armNext(harness: AgentHarness): void {
    const now = Date.now();
    for (const at of this.#deadlines) if (at <= now) this.#deadlines.delete(at);
    // A task asleep on a durable timer needs no heartbeat: the timer's own alarm wakes it; nor does
    // one waiting for a person (a tool call's approval: the decision arrives by a request, which
    // opens the object), nor one that only waits for such tasks.
    const working = heartbeatNeeded(harness.taskGraph());
    const timer = this.#timerAt ?? harness.nextTimer();
    const next = Math.min(
      ...this.#deadlines,
      timer !== undefined && timer > now ? timer : Infinity,
      working ? now + this.#heartbeatMs : Infinity,
    );
    if (Number.isFinite(next)) this.#want(next);
  }

  /** Arm the alarm at `at` unless one is armed earlier (and not yet due). */
  #want(at: number): void {
    // A deadline already passed needs no alarm: the task's own timer fires at once.
    if (at <= Date.now()) return;
    const armed = this.#armedAt;
    if (armed !== undefined && armed <= at && armed > Date.now()) return;
    this.#armedAt = at;
    this.#arming = this.#arming
      .then(() => this.#state.storage.setAlarm(at))
      .catch((error: unknown) => console.warn("space: could not arm the alarm:", errorMessage(error)));
  }

  async #submit(harness: AgentHarness, body: unknown): Promise<Record<string, unknown>> {
    if (typeof body !== "object" || body === null) throw new BadRequest("the body is a JSON object");
    const { conversation, text, requestId } = body as Record<string, unknown>;
    if (typeof text !== "string" || text === "") throw new BadRequest("text: a non-empty string");
    if (requestId !== undefined && typeof requestId !== "string") throw new BadRequest("requestId: a string");
    if (conversation !== undefined && !Number.isSafeInteger(conversation))
      throw new BadRequest("conversation: an id");
    const handle =
      conversation === undefined
        ? await harness.createConversation({ ownership: { kind: "ownerless" } })
        : await harness.loadedConversation(conversation as ConversationId);
    if (!handle) throw new BadRequest(`no conversation ${String(conversation)}`);
    const submission = await handle.submit({
      type: "input",
      content: text,
      ...(requestId === undefined ? {} : { requestId }),
    });
    const record = await submission.record();
    return { conversation: handle.id, submission: record.id, status: record.status };
  }

  async #view(harness: AgentHarness, conversation: ConversationId): Promise<Record<string, unknown>> {
    const handle = await harness.loadedConversation(conversation);
    if (!handle) throw new BadRequest(`no conversation ${conversation}`);
    const entries = await handle.entries();
    return {
      conversation,
      busy: handle.busy,
      live: Object.keys(harness.taskGraph().tasks).length,
      entries: entries.map(({ id, kind, data, model }) => ({ id, kind, data, model })),
    };
  }
}

/** A task record as the graph shows it: its kind, status and phase. */
function asNode(t: { kind: string; state: { status: string; checkpoint?: unknown } }) {
  const phase = (t.state.checkpoint as { phase?: unknown } | undefined)?.phase;
  return { kind: t.kind, state: { status: t.state.status, ...(typeof phase === "string" ? { phase } : {}) } };
}

/**
 * Whether live work needs the heartbeat: not when every live task sleeps on its timer, waits for a
 * person, or waits only for tasks that do (to a fixed point: a generation waiting for its calls).
 */
export function heartbeatNeeded(graph: TaskGraph): boolean {
  const nodes = Object.values(graph.tasks);
  const still = new Set<number>();
  for (const t of nodes) if (sleeping(t.state) || waitsForPerson(t)) still.add(t.id);
  for (let grew = true; grew; ) {
    grew = false;
    for (const t of nodes) {
      if (still.has(t.id) || t.state.status !== "waiting") continue;
      const on = t.state.on;
      if (on.length > 0 && on.every((id) => still.has(id))) {
        still.add(t.id);
        grew = true;
      }
    }
  }
  return !nodes.every((t) => still.has(t.id));
}

/** A task that only waits for its durable timer (no task in its wait): nothing runs until then. */
function sleeping(state: { status: string; on?: readonly unknown[]; until?: number }): boolean {
  return state.status === "waiting" && state.until !== undefined && (state.on?.length ?? 0) === 0;
}

function conversationParam(url: URL): ConversationId {
  const value = Number(url.searchParams.get("conversation"));
  if (!Number.isSafeInteger(value) || value <= 0) throw new BadRequest("conversation: an id");
  return value;
}
