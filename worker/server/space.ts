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
 *   heartbeat `heartbeatMs` ahead, so that an object evicted in the middle of a run (a model call
 *   in flight, a tool running) comes back by itself and recovers. The alarm is only ever moved
 *   earlier while it is armed; when it fires, the handler opens the harness (recovering if the
 *   instance is new) and arms the next one if work is still live. A space with no live work and
 *   no deadline has no alarm and costs nothing.
 * - **Routes** (for the tests for now; the WebSocket protocol door and tokens come later, so
 *   nothing here is authenticated): `POST /submit {conversation?, text, requestId?}` submits an
 *   input (to a new conversation when none is named; a known `requestId` is the same submission),
 *   `GET /view?conversation=N` answers the committed entries and whether work is live, `GET
 *   /status` how this instance was opened (`by`: "fetch" | "alarm") and the alarm armed, `POST
 *   /rearm` arms the stored alarm again without opening the engine (see `rearm`: a local runtime's
 *   restart forgets the schedule).
 */
import type { AgentHarness } from "../agent/harness.ts";
import { errorMessage } from "../core/errors.ts";
import type { ConversationId } from "../core/types.ts";
import { type DoStorage, type DoStore, openDoStore } from "./do-store.ts";

/** The part of a Durable Object's `ctx.storage` the space uses: the store's, and the alarm. */
export interface SpaceStorage extends DoStorage {
  setAlarm(scheduledTime: number): Promise<void>;
  getAlarm(): Promise<number | null>;
}

/** The part of a Durable Object's `ctx` the space uses. */
export interface SpaceState {
  readonly storage: SpaceStorage;
}

/**
 * The object's environment (its bindings and secrets). Read here: `SPACE_HEARTBEAT_MS`. The
 * composition reads the model keys (`<PROVIDER>_API_KEY`, see `apiKeyFromEnv`).
 */
export type SpaceEnv = Readonly<Record<string, unknown>>;

/** What the space hands the harness it opens. */
export interface SpacePorts {
  /** Arm a wake-up at this time (AgentHarnessOptions.wakeAt). */
  readonly wakeAt: (at: number) => void;
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
  #opened: Promise<Opened> | undefined;
  /** The alarm as this instance last armed or read it (undefined: none). */
  #armedAt: number | undefined;
  /** Deadlines the harness announced that are still ahead. */
  #deadlines = new Set<number>();
  /** Alarm writes, one at a time and in order. */
  #arming: Promise<void> = Promise.resolve();

  constructor(state: SpaceState, env: SpaceEnv, open: OpenSpaceHarness) {
    this.#state = state;
    this.#env = env;
    this.#open = open;
    const heartbeat = Number(env["SPACE_HEARTBEAT_MS"]);
    this.#heartbeatMs = Number.isFinite(heartbeat) && heartbeat > 0 ? heartbeat : DEFAULT_HEARTBEAT_MS;
  }

  async fetch(request: Request): Promise<Response> {
    const url = new URL(request.url);
    try {
      if (request.method === "POST" && url.pathname.endsWith("/rearm"))
        return Response.json(await this.rearm());
      const { harness, by, at } = await this.#harness("fetch");
      switch (`${request.method} ${url.pathname.replace(/^.*(\/[a-z]+)$/, "$1")}`) {
        case "POST /submit":
          return Response.json(await this.#submit(harness, await request.json()));
        case "GET /view":
          return Response.json(await this.#view(harness, conversationParam(url)));
        case "GET /status":
          return Response.json({ by, at, alarm: await this.#state.storage.getAlarm() });
        default:
          return Response.json({ error: "no such route" }, { status: 404 });
      }
    } catch (error) {
      const status = error instanceof BadRequest ? 400 : 500;
      return Response.json({ error: errorMessage(error), name: (error as Error)?.name }, { status });
    }
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
        apiKey: (provider) => apiKeyFromEnv(this.#env, provider),
        onReport: (error) => console.warn("space:", errorMessage(error)),
        onFatal: (error) => {
          console.error("space: the store failed:", errorMessage(error));
          this.#opened = undefined;
        },
      });
      // Live work from now on keeps a wake-up armed; the recovered work too.
      harness.subscribe((change) => {
        if (change.tasks.some((t) => t.state.status !== "terminal"))
          this.#want(Date.now() + this.#heartbeatMs);
      });
      this.#armNext(harness);
      return { harness, by, at: Date.now() };
    } catch (error) {
      this.#opened = undefined;
      await store?.close().catch(() => undefined);
      throw error;
    }
  }

  /** The next wake-up: the earliest deadline ahead, or a heartbeat while work is live. */
  #armNext(harness: AgentHarness): void {
    const now = Date.now();
    for (const at of this.#deadlines) if (at <= now) this.#deadlines.delete(at);
    const next = Math.min(
      ...this.#deadlines,
      Object.keys(harness.taskGraph().tasks).length > 0 ? now + this.#heartbeatMs : Infinity,
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
        : harness.conversation(conversation as ConversationId);
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
    const handle = harness.conversation(conversation);
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

function conversationParam(url: URL): ConversationId {
  const value = Number(url.searchParams.get("conversation"));
  if (!Number.isSafeInteger(value) || value <= 0) throw new BadRequest("conversation: an id");
  return value;
}
