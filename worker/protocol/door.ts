/**
 * The engine's door: serves one connection (one tab) over any `Transport` (wire.ts). Every incoming
 * message is checked before anything runs: that it is plain JSON data of bounded size and depth, that
 * it is a call or an acknowledgement (schema.ts), that the method exists and that its arguments have
 * the method's types. What fails gets a reply `{ id, ok: false, error }` with `name: "BadRequest"`
 * and a `code` saying which check (`malformed`, `too-large`, `unknown-method`, `bad-args`,
 * `duplicate-id`, `no-hello`), and the engine goes on serving the connection's next message: no
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
import type { DebugApi, EngineApi, EngineStatus, Hello, Listener, MethodName, TabHello } from "./api.ts";
import { AckSchema, type ArgsOf, CallSchema, isMethodName, METHODS, type Methods } from "./schema.ts";
import { type EngineMessage, type Transport, type WireError, wireError } from "./wire.ts";

/** The calls of one tab (after its hello). */
export type TabCalls = Omit<EngineApi, "hello" | "debug">;

/** What the door serves: the engine, as one tab reaches it. */
export interface EngineService {
  hello(tab: TabHello): Promise<Hello>;
  /** The calls of tab `tabId` (its watches end when the tab goes away). */
  tab(tabId: string): TabCalls;
  /** Call `listener` with the status now and at every change, until the tab goes away. */
  onStatus(tabId: string, listener: (status: EngineStatus) => void): void;
  /** The test endpoints, on a `?debug=1` engine only. */
  readonly debug?: DebugApi;
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
    readonly code: "malformed" | "too-large" | "unknown-method" | "bad-args" | "duplicate-id" | "no-hello",
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
  const { transport, engine } = options;
  const limits = options.limits ?? DEFAULT_LIMITS;
  let tab: { tabId: string; calls: TabCalls } | undefined;
  let helloing: Promise<void> | undefined;
  let statusSent = false;
  let closed = false;
  const busy = new Set<number>();
  const watches = new Map<number, OpenWatch>();

  const reply = (id: number | null, outcome: { value: unknown } | { error: WireError }) => {
    if (closed) return;
    if ("value" in outcome) {
      if (id !== null) transport.send({ id, ok: true, value: outcome.value ?? null });
    } else transport.send({ id, ok: false, error: outcome.error });
  };
  const refuse = (id: number | null, error: BadRequest) => reply(id, { error: wireError(error) });

  /** A listener that pushes each value as a frame of watch `id` and resolves on its acknowledgement. */
  const frames =
    <T>(id: number): Listener<T> =>
    (data) =>
      new Promise<void>((resolve, reject) => {
        const watch = watches.get(id);
        if (closed || !watch) return resolve();
        const seq = ++watch.seq;
        watch.waiting = {
          seq,
          done: (failed) => (failed ? reject(new Error("the tab's listener failed")) : resolve()),
        };
        transport.send({ push: "frame", watch: id, seq, data });
      });

  const release = (watch: OpenWatch) => {
    const waiting = watch.waiting;
    watch.waiting = undefined;
    waiting?.done(false);
  };

  /** Open a watch for call `id`: its frames carry `id`, and so does the reply. */
  const openWatch = async (id: number, open: () => Promise<number>): Promise<number> => {
    const watch: OpenWatch = { cancelled: false, seq: 0 };
    watches.set(id, watch);
    try {
      watch.engineId = await open();
    } catch (error) {
      watches.delete(id);
      throw error;
    }
    if (watch.cancelled || closed) await tab?.calls.watches.unwatch(watch.engineId);
    return id;
  };

  const unwatch = async (id: number): Promise<void> => {
    const watch = watches.get(id);
    if (!watch) return;
    watches.delete(id);
    release(watch);
    if (watch.engineId === undefined) watch.cancelled = true;
    else await tab?.calls.watches.unwatch(watch.engineId);
  };

  /** The test endpoints, for a tab that said hello to a `?debug=1` engine. */
  const debug = (): DebugApi => {
    if (!engine.debug) throw new BadRequest("unknown-method", "this engine serves no debug endpoints");
    calls();
    return engine.debug;
  };

  /** Answer a hello; a tab of this protocol is served from here on and hears the engine's status. */
  const hello = async (given: TabHello): Promise<Hello> => {
    const answer = await engine.hello(given);
    if (answer.protocol !== given.protocol) return answer; // answered (it can say "reload"), never served
    tab ??= { tabId: given.tabId, calls: engine.tab(given.tabId) };
    if (!statusSent) {
      statusSent = true;
      engine.onStatus(given.tabId, (status) => {
        if (!closed) transport.send({ push: "status", status });
      });
    }
    return answer;
  };

  /** The tab's calls (after an accepted hello). */
  const calls = (): TabCalls => {
    if (!tab) throw new BadRequest("no-hello", "say hello first (with this engine's protocol)");
    return tab.calls;
  };
  /** Every method, run with its checked arguments (`id`: the call's, which also names its watch). */
  const table: { [K in MethodName]: (a: ArgsOf<K>, id: number) => Promise<unknown> } = {
    hello: ([given]) => hello(given),
    "conversations.list": () => calls().conversations.list(),
    "conversations.watch": (_, id) => openWatch(id, () => calls().conversations.watch(frames(id))),
    "conversations.create": (a) => calls().conversations.create(...a),
    "conversations.fork": ([c, e]) => calls().conversations.fork(c, e),
    "conversations.delete": ([c]) => calls().conversations.delete(c),
    "conversations.rename": ([c, title]) => calls().conversations.rename(c, title),
    "conversations.search": ([text]) => calls().conversations.search(text),
    "conversations.export": ([c]) => calls().conversations.export(c),
    "conversations.import": ([text]) => calls().conversations.import(text),
    "run.submit": ([c, request]) => calls().run.submit(c, request),
    "run.resendAsFork": ([c, e, text]) => calls().run.resendAsFork(c, e, text),
    "run.abort": ([c]) => calls().run.abort(c),
    "run.withdraw": ([c, s]) => calls().run.withdraw(c, s),
    "run.reset": ([c]) => calls().run.reset(c),
    "run.compact": ([c]) => calls().run.compact(c),
    "settings.agent": ([c]) => calls().settings.agent(c),
    "settings.configure": ([c, change]) => calls().settings.configure(c, change),
    "settings.setModel": ([c, model]) => calls().settings.setModel(c, model),
    "settings.models": () => calls().settings.models(),
    "settings.extensions": ([c]) => calls().settings.extensions(c),
    "settings.setExtensionEnabled": ([c, name, on]) => calls().settings.setExtensionEnabled(c, name, on),
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
    "watches.conversation": ([c], id) => openWatch(id, () => calls().watches.conversation(c, frames(id))),
    "watches.events": ([c], id) => openWatch(id, () => calls().watches.events(c, frames(id))),
    "watches.taskGraph": (_, id) => openWatch(id, () => calls().watches.taskGraph(frames(id))),
    "watches.unwatch": ([watchId]) => unwatch(watchId),
    "watches.entries": ([c]) => calls().watches.entries(c),
    "watches.entriesBefore": ([c, before, limit]) => calls().watches.entriesBefore(c, before, limit),
    "tasks.graph": () => calls().tasks.graph(),
    "tasks.inspect": () => calls().tasks.inspect(),
    "tasks.abort": ([taskId]) => calls().tasks.abort(taskId),
    "usage.total": () => calls().usage.total(),
    "usage.conversation": ([c]) => calls().usage.conversation(c),
    "debug.startTicker": ([request]) => debug().startTicker(request),
    "debug.ticker": ([taskId]) => debug().ticker(taskId),
    "debug.stats": () => debug().stats(),
    "debug.recordPartials": () => debug().recordPartials(),
    "debug.partials": () => debug().partials(),
    "debug.bench": ([o]) => debug().bench(o),
    "debug.seed": ([o]) => debug().seed(o),
    "debug.seedChat": ([o]) => debug().seedChat(o),
    "debug.runScript": ([request]) => debug().runScript(request),
    "debug.scriptWorkers": () => debug().scriptWorkers(),
  };

  /** Check a call's arguments and run it (generic, so each method gets its own argument types). */
  const call = async <M extends MethodName>(id: number, method: M, args: unknown): Promise<void> => {
    const schema: Methods[M] = METHODS[method];
    if (!Value.Check(schema, args)) {
      refuse(id, new BadRequest("bad-args", `${method}: ${firstError(schema, args)}`));
      return;
    }
    if (busy.has(id) || watches.has(id)) {
      refuse(id, new BadRequest("duplicate-id", `call ${id} is still open`));
      return;
    }
    busy.add(id);
    try {
      // Calls wait for the hello being answered (a tab sends it first, but it takes time).
      if (method !== "hello") await helloing;
      const running = table[method](args, id);
      if (method === "hello") helloing = running.then(noop, noop);
      reply(id, { value: await running });
    } catch (error) {
      reply(id, { error: wireError(error) });
    } finally {
      busy.delete(id);
    }
  };

  const receive = (message: unknown): void => {
    const id =
      typeof message === "object" && message !== null && "id" in message && Number.isSafeInteger(message.id)
        ? Number(message.id)
        : null;
    const malformed = jsonProblem(message, limits);
    if (malformed) {
      refuse(id, malformed);
      return;
    }
    if (Value.Check(AckSchema, message)) {
      const watch = watches.get(message.ack);
      const waiting = watch?.waiting;
      if (watch && waiting?.seq === message.seq) {
        watch.waiting = undefined;
        waiting.done(message.failed === true);
      }
      return;
    }
    if (!Value.Check(CallSchema, message)) {
      const why = `neither a call nor an acknowledgement: ${firstError(CallSchema, message)}`;
      refuse(id, new BadRequest("malformed", why));
    } else if (!isMethodName(message.method))
      refuse(message.id, new BadRequest("unknown-method", `no method "${message.method}"`));
    else void call(message.id, message.method, message.args);
  };

  const close = () => {
    if (closed) return;
    closed = true;
    for (const id of [...watches.keys()]) void unwatch(id).catch(() => undefined);
  };
  transport.onMessage((message) => {
    try {
      receive(message);
    } catch (error) {
      refuse(null, new BadRequest("malformed", `the message could not be read: ${wireError(error).message}`));
    }
  });
  transport.onClose(close);
  return {
    close() {
      close();
      transport.close();
    },
  };
}
