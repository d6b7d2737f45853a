/**
 * A fake engine for the protocol's tests: every method records its call (so a test can show that a
 * refused message ran nothing) and answers a fixed value; the watches deliver frames a test pushes,
 * each after the previous one's listener promise resolved, as the engine's watches do. Also the
 * transports the tests speak over: a raw in-memory pair (any JavaScript value, for the door's
 * refusals) and a JSON pair (every message through JSON.stringify/parse, as a WebSocket carries it).
 */
import type { EngineService, TabCalls } from "../../../worker/protocol/door.ts";
import type { EngineStatus, Hello, Listener, TabHello, WatchFrame } from "../../../worker/protocol/index.ts";
import { PROTOCOL_VERSION } from "../../../worker/protocol/index.ts";
import type { EngineMessage, TabMessage, Transport } from "../../../worker/protocol/wire.ts";

/** The first frame of a fake watch (no change: the fake has no view to send). */
const EMPTY_FRAME: WatchFrame = { seq: 0, ops: [] };

/** A typed error like the engine's (a `name` literal and a stable `code`). */
export class UnknownConversation extends Error {
  override readonly name = "UnknownConversation";
  readonly code = "unknown_conversation";
}

/** A watch's frames as the fake pushes them: `push(v)` resolves once the listener's promise did. */
export interface FakeWatch {
  readonly id: number;
  push(value: unknown): Promise<void>;
  stopped: boolean;
}

export interface FakeEngine extends EngineService {
  /** Every call that ran, as `method(args as JSON)`. */
  readonly log: string[];
  readonly watches: FakeWatch[];
  setStatus(status: EngineStatus): void;
}

export function fakeEngine(options: { debug?: boolean } = {}): FakeEngine {
  const log: string[] = [];
  const watches: FakeWatch[] = [];
  const statusListeners: ((s: EngineStatus) => void)[] = [];
  let status: EngineStatus = { phase: "starting", detail: "fake" };
  let nextWatch = 100;
  const ran = (name: string, args: readonly unknown[]) => log.push(`${name}(${JSON.stringify(args)})`);
  const answer =
    <T>(name: string, value: T) =>
    async (...args: unknown[]): Promise<T> => {
      ran(name, args);
      return value;
    };
  const absent =
    (name: string) =>
    async (...args: unknown[]): Promise<never> => {
      ran(name, args);
      throw new Error(`${name} is not in this fake`);
    };
  const watch = <T>(
    name: string,
    first: T,
    args: readonly unknown[],
    listener: Listener<T>,
  ): Promise<number> => {
    ran(name, args);
    const id = nextWatch++;
    const w: FakeWatch = {
      id,
      stopped: false,
      push: async (value) => {
        if (!w.stopped) await listener(value as T);
      },
    };
    watches.push(w);
    return Promise.resolve(listener(first)).then(() => id);
  };
  const calls: TabCalls = {
    conversations: {
      list: answer("conversations.list", [{ id: 1, title: "Main", busy: false }]),
      watch: (listener) => watch("conversations.watch", [], [], listener),
      create: answer("conversations.create", 7),
      fork: async (conversationId, entryId) => {
        ran("conversations.fork", [conversationId, entryId]);
        throw new UnknownConversation(`no conversation ${conversationId}`);
      },
      delete: answer("conversations.delete", undefined),
      rename: answer("conversations.rename", undefined),
      search: answer("conversations.search", [1]),
      watchPage: (options, listener) =>
        watch("conversations.watchPage", { items: [], total: 0 }, [options], listener),
      searchPage: answer("conversations.searchPage", { items: [] }),
      export: answer("conversations.export", { fileName: "main.json", text: "{}" }),
      import: async (text) => {
        ran("conversations.import", [text.length]);
        return 9;
      },
    },
    run: {
      submit: answer("run.submit", 3),
      resendAsFork: answer("run.resendAsFork", 8),
      abort: answer("run.abort", undefined),
      withdraw: answer("run.withdraw", "withdrawn"),
      reset: answer("run.reset", 4),
      compact: answer("run.compact", { status: "nothing" }),
    },
    settings: {
      agent: answer("settings.agent", {}),
      configure: answer("settings.configure", undefined),
      setModel: answer("settings.setModel", undefined),
      models: answer("settings.models", []),
      extensions: answer("settings.extensions", []),
      setExtensionEnabled: answer("settings.setExtensionEnabled", undefined),
      demoSpeed: answer("settings.demoSpeed", "normal"),
      setDemoSpeed: answer("settings.setDemoSpeed", undefined),
    },
    keys: {
      set: answer("keys.set", undefined),
      has: answer("keys.has", false),
      list: answer("keys.list", []),
      test: absent("keys.test"),
    },
    workspace: {
      files: answer("workspace.files", []),
      read: answer("workspace.read", "text"),
      delete: answer("workspace.delete", undefined),
    },
    userTools: {
      list: answer("userTools.list", []),
      save: absent("userTools.save"),
      remove: answer("userTools.remove", undefined),
      enableEverywhere: answer("userTools.enableEverywhere", undefined),
    },
    watches: {
      conversation: (conversationId, listener) =>
        watch("watches.conversation", EMPTY_FRAME, [conversationId], listener),
      events: (conversationId, listener) => watch("watches.events", [], [conversationId], listener),
      taskGraph: (listener) => watch("watches.taskGraph", { tasks: {} }, [], listener),
      unwatch: async (watchId) => {
        ran("watches.unwatch", [watchId]);
        for (const w of watches) if (w.id === watchId) w.stopped = true;
      },
      entries: answer("watches.entries", []),
      entriesBefore: absent("watches.entriesBefore"),
    },
    tasks: {
      graph: answer("tasks.graph", { tasks: {} }),
      inspect: absent("tasks.inspect"),
      abort: answer("tasks.abort", "marked"),
    },
    usage: {
      total: absent("usage.total"),
      conversation: absent("usage.conversation"),
      days: absent("usage.days"),
    },
    traces: {
      export: absent("traces.export"),
    },
    approvals: {
      decide: answer("approvals.decide", { status: "decided", decision: "approve" }),
      policies: answer("approvals.policies", []),
      setPolicy: answer("approvals.setPolicy", undefined),
    },
    schedules: {
      preview: answer("schedules.preview", { description: "At 09:00 (UTC)", next: [] }),
      create: answer("schedules.create", {} as never),
      update: answer("schedules.update", {} as never),
      setPaused: answer("schedules.setPaused", {} as never),
      delete: answer("schedules.delete", undefined),
    },
    timeline: {
      page: absent("timeline.page"),
      watch: absent("timeline.watch"),
      detail: absent("timeline.detail"),
      rerunTool: absent("timeline.rerunTool"),
    },
  };
  return {
    log,
    watches,
    setStatus(next) {
      status = next;
      for (const l of statusListeners) l(next);
    },
    async hello(tab: TabHello): Promise<Hello> {
      ran("hello", [tab]);
      return { protocol: PROTOCOL_VERSION, build: "fake", status };
    },
    tab: () => calls,
    onStatus(_tabId, listener) {
      statusListeners.push(listener);
      listener(status);
    },
    ...(options.debug
      ? {
          debug: {
            startTicker: answer("debug.startTicker", 1),
            ticker: absent("debug.ticker"),
            stats: absent("debug.stats"),
            recordPartials: answer("debug.recordPartials", undefined),
            partials: answer("debug.partials", []),
            bench: answer("debug.bench", {}),
            seed: absent("debug.seed"),
            seedChat: answer("debug.seedChat", 2),
            seedGrowth: absent("debug.seedGrowth"),
            memory: absent("debug.memory"),
            commitLatency: absent("debug.commitLatency"),
            runScript: absent("debug.runScript"),
            scriptWorkers: absent("debug.scriptWorkers"),
          },
        }
      : {}),
  };
}

/** Two connected ends; `encode` is what a message goes through on its way (asynchronously). */
function pair<A, B>(encode: (m: unknown) => unknown): [Transport<A>, Transport<B>] {
  const make = <Out>(): Transport<Out> & {
    deliver(m: unknown): void;
    peer?: { deliver(m: unknown): void };
  } => {
    const held: unknown[] = [];
    let receive: ((m: unknown) => void) | undefined;
    let closed: (() => void) | undefined;
    const end: Transport<Out> & { deliver(m: unknown): void; peer?: { deliver(m: unknown): void } } = {
      deliver: (m) => (receive ? receive(m) : held.push(m)),
      send: (m) => {
        const sent = encode(m);
        setTimeout(() => end.peer?.deliver(sent), 0);
      },
      onMessage: (r) => {
        receive = r;
        for (const m of held.splice(0)) r(m);
      },
      onClose: (c) => {
        closed = c;
      },
      close: () => closed?.(),
    };
    return end;
  };
  const a = make<A>();
  const b = make<B>();
  a.peer = b;
  b.peer = a;
  return [a, b];
}

/** The tab's end and the engine's end, every message through JSON text (a WebSocket's frames). */
export const jsonPair = () => pair<TabMessage, EngineMessage>((m) => JSON.parse(JSON.stringify(m)));

/** The same, with no encoding at all: a test may send any JavaScript value to the door. */
export const rawPair = () => pair<unknown, EngineMessage>((m) => m);
