/**
 * The engine's door: serves one connection (one tab) over any `Transport` (wire.ts). Every incoming
 * message is checked before anything runs: that it is plain JSON data of bounded size and depth, that
 * it is a call or an acknowledgement (schema.ts), that the method exists and that its arguments have
 * the method's types. What fails gets a reply `{ id, ok: false, error }` with `name: "BadRequest"`
 * and a `code` saying which check (`malformed`, `too-large`, `unknown-method`, `bad-args`,
 * `duplicate-id`, `no-hello`; a transport may refuse a frame before it is parsed with `too-large`,
 * `malformed` or `rate-limited`: worker/server/socket.ts), and the engine goes on serving the connection's next message: no
 * call runs, so nothing is written. Invariants:
 * - `hello` comes first; calls that arrive while it is answered wait for it; after an accepted hello
 *   the connection gets the engine's status pushed at once and at every change;
 * - a watch's frames are pushed addressed by the id of the call that opened it, numbered from 1, and
 *   the engine's listener resolves only when the tab acknowledged that frame (its bounded backlog, at
 *   most 100 frames then one whole view, stays the engine's: core/observe.ts);
 * - a thrown error is replied as `{ name, message, code? }` (wire.ts); never a crash of the door;
 * - `close()` (or the transport's close) ends the connection's watches and releases their frames.
 * This module and schema.ts are engine-only: the tab never loads them.
 */

import type { TSchema } from "typebox";
import { Value } from "typebox/value";
import type { MovePackage } from "../core/move.ts";
import type {
  DebugApi,
  EngineApi,
  EngineStatus,
  Hello,
  HomesApi,
  Listener,
  McpApi,
  MethodName,
  MovesApi,
  RemoteApi,
  StoreApi,
  TabHello,
} from "./api.ts";
import { AckSchema, type ArgsOf, CallSchema, isMethodName, METHODS, type Methods } from "./schema.ts";
import { type EngineMessage, type Transport, type WireError, wireError } from "./wire.ts";

/** The calls of one tab (after its hello). */
export type TabCalls = Omit<EngineApi, "hello" | "debug" | "remote" | "mcp" | "homes" | "moves" | "store">;

/** What the door serves: the engine, as one tab reaches it. */
export interface EngineService {
  hello(tab: TabHello): Promise<Hello>;
  /** The calls of tab `tabId` (its watches end when the tab goes away). */
  tab(tabId: string): TabCalls;
  /** Call `listener` with the status now and at every change, until the tab goes away. */
  onStatus(tabId: string, listener: (status: EngineStatus) => void): void;
  /** The test endpoints, on a `?debug=1` engine only. */
  readonly debug?: DebugApi;
  /** The server setting (the browser engine's; a server space serves none). */
  readonly remote?: RemoteApi;
  /** MCP servers (the browser engine's; a server space serves none). */
  readonly mcp?: McpApi;
  /** Moving conversations to and from the server (the browser engine's, for its tabs). */
  readonly homes?: HomesApi;
  /** A move's steps (a server space's, for the browser engine that drives a move). */
  readonly moves?: MovesApi;
  /** The browser engine's store before it is ready (start fresh after the browser discarded it). */
  readonly store?: StoreApi;
}

export interface DoorLimits {
  /** The largest message, in characters of its JSON (strings counted by length). */
  readonly maxChars: number;
  /** The deepest nesting of arrays and objects. */
  readonly maxDepth: number;
}

/**
 * Larger than the largest legitimate call, an import of 64 MiB (app/transfer.ts `MAX_IMPORT_CHARS`),
 * so an import is refused by its own rule with its own words; anything larger stops here.
 */
export const DEFAULT_LIMITS: DoorLimits = { maxChars: 65 * 1024 * 1024, maxDepth: 64 };

const noop = () => undefined;

/** A refusal at the door. */
export class BadRequest extends Error {
  override readonly name = "BadRequest";
  constructor(
    readonly code:
      | "malformed"
      | "too-large"
      | "unknown-method"
      | "bad-args"
      | "duplicate-id"
      | "no-hello"
      | "rate-limited"
      | "bad-parts",
    message: string,
  ) {
    super(message);
  }
}

/**
 * Why `value` is not plain JSON data within the limits, or undefined when it is. One walk, which
 * stops at the first problem: a function, a symbol, a bigint, `undefined` in an array, a non-finite
 * number, an object that is not a plain object or array (a Map, a Date, a port), a cycle (too deep),
 * too deep, or too large.
 */
export function jsonProblem(value: unknown, limits: DoorLimits): BadRequest | undefined {
  let chars = 0;
  const walk = (v: unknown, depth: number): BadRequest | undefined => {
    if (depth > limits.maxDepth) return new BadRequest("malformed", `nested deeper than ${limits.maxDepth}`);
    if (v === null || typeof v === "boolean") chars += 5;
    else if (typeof v === "number") {
      if (!Number.isFinite(v)) return new BadRequest("malformed", "a number that JSON cannot carry");
      chars += 24;
    } else if (typeof v === "string") chars += v.length + 2;
    else if (Array.isArray(v)) {
      chars += 2;
      for (const item of v) {
        if (item === undefined) return new BadRequest("malformed", "undefined in an array");
        const problem = walk(item, depth + 1);
        if (problem) return problem;
      }
    } else if (typeof v === "object") {
      const proto = Object.getPrototypeOf(v);
      if (proto !== Object.prototype && proto !== null)
        return new BadRequest("malformed", "an object that is not plain data");
      chars += 2;
      for (const [key, item] of Object.entries(v)) {
        if (item === undefined) continue;
        chars += key.length + 4;
        const problem = walk(item, depth + 1);
        if (problem) return problem;
      }
    } else return new BadRequest("malformed", `a ${typeof v}, which JSON cannot carry`);
    if (chars > limits.maxChars)
      return new BadRequest("too-large", `the message is larger than ${limits.maxChars} characters`);
    return undefined;
  };
  return walk(value, 0);
}

/** The first schema error, in words: where, and what was expected. */
function firstError(schema: TSchema, value: unknown): string {
  const [error] = Value.Errors(schema, value);
  if (!error) return "it does not match";
  return `${error.instancePath || "the value"} ${error.message}`;
}

interface OpenWatch {
  /** The engine's id of the watch, once its opening call returned. */
  engineId?: number;
  /** Unwatched before its opening call returned: end it as soon as it does. */
  cancelled: boolean;
  /** The number of the last frame sent. */
  seq: number;
  /** The frame waiting for the tab's acknowledgement. */
  waiting?: { seq: number; done(failed: boolean): void } | undefined;
}

export interface DoorOptions {
  readonly transport: Transport<EngineMessage>;
  readonly engine: EngineService;
  readonly limits?: DoorLimits;
}

/** Serve one connection; `close()` ends it (its watches too). */
export function serveConnection(options: DoorOptions): { close(): void } {
  const connection = new Connection(options);
  return { close: () => connection.close({ transport: true }) };
}

/** One tab's connection: its hello, its open calls and watches, and the checks every message passes. */
class Connection {
  readonly #transport: Transport<EngineMessage>;
  readonly #engine: EngineService;
  readonly #limits: DoorLimits;
  readonly #table: Dispatch;
  #tab: { tabId: string; calls: TabCalls } | undefined;
  #helloing: Promise<void> | undefined;
  #statusSent = false;
  #closed = false;
  /** Ids of the calls still running. */
  readonly #busy = new Set<number>();
  /** Open watches, by the id of the call that opened them. */
  readonly #watches = new Map<number, OpenWatch>();

  constructor(options: DoorOptions) {
    this.#transport = options.transport;
    this.#engine = options.engine;
    this.#limits = options.limits ?? DEFAULT_LIMITS;
    this.#table = dispatch(this);
    this.#transport.onMessage((message) => {
      try {
        this.#receive(message);
      } catch (error) {
        const why = `the message could not be read: ${wireError(error).message}`;
        this.#refuse(null, new BadRequest("malformed", why));
      }
    });
    this.#transport.onClose(() => this.close({ transport: false }));
  }

  /** End the connection: its watches end, their waiting frames are released. */
  close(options: { transport: boolean }): void {
    if (!this.#closed) {
      this.#closed = true;
      for (const id of [...this.#watches.keys()]) void this.unwatch(id).catch(() => undefined);
    }
    if (options.transport) this.#transport.close();
  }

  #reply(id: number | null, outcome: { value: unknown } | { error: WireError }): void {
    if (this.#closed) return;
    if ("value" in outcome) {
      if (id !== null) this.#transport.send({ id, ok: true, value: outcome.value ?? null });
    } else this.#transport.send({ id, ok: false, error: outcome.error });
  }

  #refuse(id: number | null, error: BadRequest): void {
    this.#reply(id, { error: wireError(error) });
  }

  /** Check one incoming message and act on it: an acknowledgement, a call, or a refusal. */
  #receive(message: unknown): void {
    const id =
      typeof message === "object" && message !== null && "id" in message && Number.isSafeInteger(message.id)
        ? Number(message.id)
        : null;
    const malformed = jsonProblem(message, this.#limits);
    if (malformed) {
      this.#refuse(id, malformed);
      return;
    }
    if (Value.Check(AckSchema, message)) {
      this.#acknowledge(message.ack, message.seq, message.failed === true);
      return;
    }
    if (!Value.Check(CallSchema, message)) {
      const why = `neither a call nor an acknowledgement: ${firstError(CallSchema, message)}`;
      this.#refuse(id, new BadRequest("malformed", why));
    } else if (!isMethodName(message.method))
      this.#refuse(message.id, new BadRequest("unknown-method", `no method "${message.method}"`));
    else void this.#call(message.id, message.method, message.args);
  }

  /** The tab acknowledged frame `seq` of watch `watchId`: its listener resolves (or fails). */
  #acknowledge(watchId: number, seq: number, failed: boolean): void {
    const watch = this.#watches.get(watchId);
    const waiting = watch?.waiting;
    if (watch && waiting?.seq === seq) {
      watch.waiting = undefined;
      waiting.done(failed);
    }
  }

  /** Check a call's arguments and run it (generic, so each method gets its own argument types). */
  async #call<M extends MethodName>(id: number, method: M, args: unknown): Promise<void> {
    const schema: Methods[M] = METHODS[method];
    if (!Value.Check(schema, args)) {
      this.#refuse(id, new BadRequest("bad-args", `${method}: ${firstError(schema, args)}`));
      return;
    }
    if (this.#busy.has(id) || this.#watches.has(id)) {
      this.#refuse(id, new BadRequest("duplicate-id", `call ${id} is still open`));
      return;
    }
    this.#busy.add(id);
    try {
      // Calls wait for the hello being answered (a tab sends it first, but it takes time).
      if (method !== "hello") await this.#helloing;
      const running = this.#table[method](args, id);
      if (method === "hello") this.#helloing = running.then(noop, noop);
      this.#reply(id, { value: await running });
    } catch (error) {
      this.#reply(id, { error: wireError(error) });
    } finally {
      this.#busy.delete(id);
    }
  }

  /** Answer a hello; a tab of this protocol is served from here on and hears the engine's status. */
  async hello(given: TabHello): Promise<Hello> {
    const answer = await this.#engine.hello(given);
    if (answer.protocol !== given.protocol) return answer; // answered (it can say "reload"), never served
    this.#tab ??= { tabId: given.tabId, calls: this.#engine.tab(given.tabId) };
    if (!this.#statusSent) {
      this.#statusSent = true;
      this.#engine.onStatus(given.tabId, (status) => {
        if (!this.#closed) this.#transport.send({ push: "status", status });
      });
    }
    return answer;
  }

  /** The tab's calls (after an accepted hello). */
  calls(): TabCalls {
    if (!this.#tab) throw new BadRequest("no-hello", "say hello first (with this engine's protocol)");
    return this.#tab.calls;
  }

  /** The test endpoints, for a tab that said hello to a `?debug=1` engine. */
  debug(): DebugApi {
    if (!this.#engine.debug) throw new BadRequest("unknown-method", "this engine serves no debug endpoints");
    this.calls();
    return this.#engine.debug;
  }

  /** The server setting, on an engine that keeps one (the browser's). */
  remote(): RemoteApi {
    if (!this.#engine.remote) throw new BadRequest("unknown-method", "this engine keeps no server setting");
    this.calls();
    return this.#engine.remote;
  }

  /** MCP servers, on an engine that keeps them (the browser's). */
  mcp(): McpApi {
    if (!this.#engine.mcp) throw new BadRequest("unknown-method", "this engine keeps no MCP servers");
    this.calls();
    return this.#engine.mcp;
  }

  /** Moving conversations, on an engine that drives moves (the browser's). */
  homes(): HomesApi {
    if (!this.#engine.homes) throw new BadRequest("unknown-method", "this engine moves no conversations");
    this.calls();
    return this.#engine.homes;
  }

  /** The store's own calls, on an engine that owns a browser store. */
  store(): StoreApi {
    if (!this.#engine.store) throw new BadRequest("unknown-method", "this engine owns no browser store");
    this.calls();
    return this.#engine.store;
  }

  /** A move's steps, on an engine that is another home's peer (a server space). */
  moves(): MovesApi {
    if (!this.#engine.moves) throw new BadRequest("unknown-method", "this engine serves no move steps");
    this.calls();
    return this.#engine.moves;
  }

  /** A listener that pushes each value as a frame of watch `id` and resolves on its acknowledgement. */
  frames<T>(id: number): Listener<T> {
    return (data) =>
      new Promise<void>((resolve, reject) => {
        const watch = this.#watches.get(id);
        if (this.#closed || !watch) return resolve();
        const seq = ++watch.seq;
        watch.waiting = {
          seq,
          done: (failed) => (failed ? reject(new Error("the tab's listener failed")) : resolve()),
        };
        this.#transport.send({ push: "frame", watch: id, seq, data });
      });
  }

  /** Open a watch for call `id`: its frames carry `id`, and so does the reply. */
  async openWatch(id: number, open: () => Promise<number>): Promise<number> {
    const watch: OpenWatch = { cancelled: false, seq: 0 };
    this.#watches.set(id, watch);
    try {
      watch.engineId = await open();
    } catch (error) {
      this.#watches.delete(id);
      throw error;
    }
    if (watch.cancelled || this.#closed) await this.#tab?.calls.watches.unwatch(watch.engineId);
    return id;
  }

  async unwatch(id: number): Promise<void> {
    const watch = this.#watches.get(id);
    if (!watch) return;
    this.#watches.delete(id);
    const waiting = watch.waiting;
    watch.waiting = undefined;
    waiting?.done(false);
    if (watch.engineId === undefined) watch.cancelled = true;
    else await this.#tab?.calls.watches.unwatch(watch.engineId);
  }
}

/** Every method, run with its checked arguments (`id`: the call's, which also names its watch). */
type Dispatch = { [K in MethodName]: (a: ArgsOf<K>, id: number) => Promise<unknown> };

/** The dispatch table of one connection: each method onto the tab's calls, a watch or the debug API. */
function dispatch(c: Connection): Dispatch {
  const calls = () => c.calls();
  const debug = () => c.debug();
  const watch = (id: number, open: () => Promise<number>) => c.openWatch(id, open);
  return {
    hello: ([given]) => c.hello(given),
    "conversations.list": () => calls().conversations.list(),
    "conversations.watch": (_, id) => watch(id, () => calls().conversations.watch(c.frames(id))),
    "conversations.create": (a) => calls().conversations.create(...a),
    "conversations.fork": ([conversation, e]) => calls().conversations.fork(conversation, e),
    "conversations.delete": ([conversation]) => calls().conversations.delete(conversation),
    "conversations.rename": ([conversation, title]) => calls().conversations.rename(conversation, title),
    "conversations.search": ([text]) => calls().conversations.search(text),
    "conversations.watchPage": ([options], id) =>
      watch(id, () => calls().conversations.watchPage(options, c.frames(id))),
    "conversations.searchPage": ([text, options]) => calls().conversations.searchPage(text, options),
    "conversations.export": ([conversation]) => calls().conversations.export(conversation),
    "conversations.import": ([text]) => calls().conversations.import(text),
    "run.submit": ([conversation, request]) => calls().run.submit(conversation, request),
    "run.resendAsFork": ([conversation, e, text, keep]) =>
      calls().run.resendAsFork(conversation, e, text, keep),
    "run.abort": ([conversation]) => calls().run.abort(conversation),
    "run.withdraw": ([conversation, s]) => calls().run.withdraw(conversation, s),
    "run.reset": ([conversation]) => calls().run.reset(conversation),
    "run.compact": ([conversation]) => calls().run.compact(conversation),
    "settings.agent": ([conversation]) => calls().settings.agent(conversation),
    "settings.configure": ([conversation, change]) => calls().settings.configure(conversation, change),
    "settings.setModel": ([conversation, model]) => calls().settings.setModel(conversation, model),
    "settings.models": () => calls().settings.models(),
    "settings.extensions": ([conversation]) => calls().settings.extensions(conversation),
    "settings.setExtensionEnabled": ([conversation, name, on]) =>
      calls().settings.setExtensionEnabled(conversation, name, on),
    "settings.demoSpeed": () => calls().settings.demoSpeed(),
    "settings.setDemoSpeed": ([speed]) => calls().settings.setDemoSpeed(speed),
    "keys.set": ([provider, key]) => calls().keys.set(provider, key),
    "keys.has": ([provider]) => calls().keys.has(provider),
    "keys.list": () => calls().keys.list(),
    "keys.test": ([provider]) => calls().keys.test(provider),
    "workspace.files": () => calls().workspace.files(),
    "workspace.read": ([path]) => calls().workspace.read(path),
    "workspace.delete": ([path]) => calls().workspace.delete(path),
    "userTools.list": () => calls().userTools.list(),
    "userTools.save": ([draft]) => calls().userTools.save(draft),
    "userTools.remove": ([name]) => calls().userTools.remove(name),
    "userTools.enableEverywhere": ([name]) => calls().userTools.enableEverywhere(name),
    "watches.conversation": ([conversation], id) =>
      watch(id, () => calls().watches.conversation(conversation, c.frames(id))),
    "watches.events": ([conversation], id) =>
      watch(id, () => calls().watches.events(conversation, c.frames(id))),
    "watches.taskGraph": (_, id) => watch(id, () => calls().watches.taskGraph(c.frames(id))),
    "watches.unwatch": ([watchId]) => c.unwatch(watchId),
    "watches.entries": ([conversation]) => calls().watches.entries(conversation),
    "watches.entriesBefore": ([conversation, before, limit]) =>
      calls().watches.entriesBefore(conversation, before, limit),
    "tasks.graph": () => calls().tasks.graph(),
    "tasks.inspect": () => calls().tasks.inspect(),
    "tasks.abort": ([taskId]) => calls().tasks.abort(taskId),
    "usage.total": () => calls().usage.total(),
    "usage.conversation": ([conversation]) => calls().usage.conversation(conversation),
    "usage.days": ([query]) => calls().usage.days(query),
    "traces.export": ([conversation]) => calls().traces.export(conversation),
    "approvals.decide": ([conversation, request]) => calls().approvals.decide(conversation, request),
    "approvals.policies": (a) => calls().approvals.policies(...a),
    "approvals.setPolicy": ([tool, policy, conversation]) =>
      calls().approvals.setPolicy(tool, policy, conversation),
    "schedules.preview": ([draft]) => calls().schedules.preview(draft),
    "schedules.create": ([conversation, draft]) => calls().schedules.create(conversation, draft),
    "schedules.update": ([conversation, id, draft]) => calls().schedules.update(conversation, id, draft),
    "schedules.setPaused": ([conversation, id, paused]) =>
      calls().schedules.setPaused(conversation, id, paused),
    "schedules.delete": ([conversation, id]) => calls().schedules.delete(conversation, id),
    "timeline.page": ([conversation, range]) => calls().timeline.page(conversation, range),
    "timeline.watch": ([conversation, range], id) =>
      watch(id, () => calls().timeline.watch(conversation, range, c.frames(id))),
    "timeline.detail": ([conversation, taskId]) => calls().timeline.detail(conversation, taskId),
    "timeline.rerunTool": ([conversation, request]) => calls().timeline.rerunTool(conversation, request),
    "remote.get": () => c.remote().get(),
    "remote.credentials": () => c.remote().credentials(),
    "remote.set": ([url, token]) => c.remote().set(url, token),
    "mcp.list": () => c.mcp().list(),
    "mcp.add": ([draft]) => c.mcp().add(draft),
    "mcp.update": ([name, change]) => c.mcp().update(name, change),
    "mcp.refresh": ([name]) => c.mcp().refresh(name),
    "mcp.remove": ([name]) => c.mcp().remove(name),
    "homes.toServer": ([conversation]) => c.homes().toServer(conversation),
    "homes.bringBack": ([remote]) => c.homes().bringBack(remote),
    "homes.list": () => c.homes().list(),
    "store.startFresh": () => c.store().startFresh(),
    "moves.prepare": ([transfer, conversation]) => c.moves().prepare(transfer, conversation),
    "moves.adopt": ([pkg]) => c.moves().adopt(pkg as unknown as MovePackage),
    "moves.stage": ([transfer, index, count, part]) => c.moves().stage(transfer, index, count, part),
    "moves.adoptStaged": ([transfer]) => c.moves().adoptStaged(transfer),
    "moves.finish": ([transfer, conversation]) => c.moves().finish(transfer, conversation),
    "moves.refuse": ([transfer]) => c.moves().refuse(transfer),
    "moves.cancel": ([transfer]) => c.moves().cancel(transfer),
    "debug.startTicker": ([request]) => debug().startTicker(request),
    "debug.ticker": ([taskId]) => debug().ticker(taskId),
    "debug.stats": () => debug().stats(),
    "debug.recordPartials": () => debug().recordPartials(),
    "debug.partials": () => debug().partials(),
    "debug.bench": ([o]) => debug().bench(o),
    "debug.seed": ([o]) => debug().seed(o),
    "debug.seedChat": ([o]) => debug().seedChat(o),
    "debug.seedGrowth": ([o]) => debug().seedGrowth(o),
    "debug.memory": () => debug().memory(),
    "debug.commitLatency": ([o]) => debug().commitLatency(o),
    "debug.runScript": ([request]) => debug().runScript(request),
    "debug.scriptWorkers": () => debug().scriptWorkers(),
  };
}
