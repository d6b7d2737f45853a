/**
 * The engine's door (worker/protocol/door.ts): every message a tab sends is checked before anything
 * runs. Malformed messages of many shapes (generated, property-style, and by hand), unknown methods,
 * wrong argument types, missing arguments and oversized messages each get exactly one typed
 * `BadRequest` reply naming what was wrong; nothing runs for them (the fake engine's log stays as it
 * was: no partial write is possible), and the door serves the next valid call.
 */
import { describe, expect, test } from "vitest";
import { DEFAULT_LIMITS, jsonProblem, serveConnection } from "../../../worker/protocol/door.ts";
import { PROTOCOL_VERSION } from "../../../worker/protocol/index.ts";
import { METHODS } from "../../../worker/protocol/schema.ts";
import type { EngineMessage, ReplyMessage } from "../../../worker/protocol/wire.ts";
import { type FakeEngine, fakeEngine, rawPair } from "./fixtures.ts";

const isReply = (m: EngineMessage): m is ReplyMessage => "ok" in m;

/** A door over a raw pair: `send` any value, `next()` the next reply (pushes are kept apart). */
function door(options: { engine?: FakeEngine; limits?: typeof DEFAULT_LIMITS } = {}) {
  const engine = options.engine ?? fakeEngine();
  const [tab, side] = rawPair();
  serveConnection({ transport: side, engine, ...(options.limits ? { limits: options.limits } : {}) });
  const replies: ReplyMessage[] = [];
  const waiting: ((r: ReplyMessage) => void)[] = [];
  const pushes: EngineMessage[] = [];
  tab.onMessage((m) => {
    const message = m as EngineMessage;
    if (!isReply(message)) pushes.push(message);
    else {
      const w = waiting.shift();
      if (w) w(message);
      else replies.push(message);
    }
  });
  const next = () =>
    new Promise<ReplyMessage>((resolve) => {
      const r = replies.shift();
      if (r) resolve(r);
      else waiting.push(resolve);
    });
  let id = 1000;
  const call = async (method: string, ...args: unknown[]) => {
    tab.send({ id: ++id, method, args });
    return next();
  };
  return { engine, send: (m: unknown) => tab.send(m), next, call, pushes };
}

/** A door whose tab said hello. */
async function greeted(options: Parameters<typeof door>[0] = {}) {
  const d = door(options);
  const hello = await d.call("hello", { tabId: "tab-1", protocol: PROTOCOL_VERSION });
  expect(hello.ok).toBe(true);
  return d;
}

function expectRefused(reply: ReplyMessage, code: string, id: number | null = reply.id) {
  expect(reply.ok).toBe(false);
  if (reply.ok) return;
  expect(reply.id).toBe(id);
  expect(reply.error.name).toBe("BadRequest");
  expect(reply.error.code).toBe(code);
  expect(reply.error.message.length).toBeGreaterThan(0);
}

/** A small deterministic generator of values: JSON-ish and not. */
function randomValues(seed: number, count: number): unknown[] {
  let s = seed;
  const rand = () => {
    s = (s * 1103515245 + 12345) % 2 ** 31;
    return s / 2 ** 31;
  };
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)]!;
  const value = (depth: number): unknown => {
    const kind = Math.floor(rand() * (depth > 3 ? 6 : 9));
    switch (kind) {
      case 0:
        return null;
      case 1:
        return rand() < 0.5;
      case 2:
        return pick([0, -1, 1.5, 2 ** 53, Number.NaN, Number.POSITIVE_INFINITY, 42]);
      case 3:
        return pick(["", "hello", "conversations.create", "x".repeat(300)]);
      case 4:
        return pick([undefined, () => 1, Symbol("s"), 10n, new Map([[1, 2]]), new Date(0)]);
      case 5:
        return pick([{}, [], [undefined]]);
      case 6:
        return Array.from({ length: Math.floor(rand() * 4) }, () => value(depth + 1));
      default: {
        const o: Record<string, unknown> = {};
        for (const key of ["id", "method", "args", "ack", "seq", "extra"])
          if (rand() < 0.5) o[key] = value(depth + 1);
        return o;
      }
    }
  };
  return Array.from({ length: count }, () => value(0));
}

describe("the door refuses, and goes on serving", () => {
  test("malformed messages by hand: each gets one BadRequest, and the next call is served", async () => {
    const d = await greeted();
    const cyclic: Record<string, unknown> = { id: 1, method: "conversations.list" };
    cyclic.args = [cyclic];
    let deep: unknown = [];
    for (let i = 0; i < 200; i++) deep = [deep];
    const cases: [unknown, string][] = [
      [null, "malformed"],
      [42, "malformed"],
      ["conversations.list", "malformed"],
      [[], "malformed"],
      [{}, "malformed"],
      [{ id: 1 }, "malformed"],
      [{ id: "1", method: "conversations.list", args: [] }, "malformed"],
      [{ id: 1, method: 5, args: [] }, "malformed"],
      [{ id: 1, method: "conversations.list" }, "malformed"],
      [{ id: 1, method: "conversations.list", args: {} }, "malformed"],
      [{ id: -1, method: "conversations.list", args: [] }, "malformed"],
      [{ id: 1.5, method: "conversations.list", args: [] }, "malformed"],
      [{ id: 1, method: "conversations.list", args: [], extra: true }, "malformed"],
      [{ ack: "x", seq: 1 }, "malformed"],
      [{ ack: 1, seq: 0 }, "malformed"],
      [{ id: 1, method: "conversations.list", args: [() => 1] }, "malformed"],
      [{ id: 1, method: "conversations.list", args: [undefined] }, "malformed"],
      [{ id: 1, method: "conversations.list", args: [Number.NaN] }, "malformed"],
      [{ id: 1, method: "conversations.list", args: [10n] }, "malformed"],
      [{ id: 1, method: "conversations.list", args: [new Map()] }, "malformed"],
      [{ id: 1, method: "conversations.list", args: [new Date()] }, "malformed"],
      [{ id: 1, method: "conversations.list", args: [Symbol("s")] }, "malformed"],
      [new Map([["id", 1]]), "malformed"],
      [cyclic, "malformed"],
      [{ id: 1, method: "conversations.list", args: [deep] }, "malformed"],
    ];
    const before = d.engine.log.length;
    for (const [message, code] of cases) {
      d.send(message);
      expectRefused(await d.next(), code);
      expect((await d.call("conversations.list")).ok).toBe(true);
    }
    // Only the valid calls ran.
    expect(d.engine.log.slice(before).every((l) => l.startsWith("conversations.list"))).toBe(true);
    expect(d.engine.log.length - before).toBe(cases.length);
  });

  test("generated messages of many shapes (property-style): never a crash, never a run", async () => {
    const d = await greeted();
    const before = d.engine.log.length;
    const values = randomValues(7, 400);
    let refused = 0;
    for (const value of values) {
      d.send(value);
      const answered = await Promise.race([
        d.next(),
        new Promise<undefined>((resolve) => setTimeout(() => resolve(undefined), 50)),
      ]);
      // A generated value may happen to be a valid acknowledgement of no frame: ignored, no reply.
      if (answered) {
        expectRefused(answered, answered.ok ? "" : (answered.error.code ?? ""));
        expect(answered.ok).toBe(false);
        refused++;
      }
    }
    expect(refused).toBeGreaterThan(values.length * 0.9);
    expect(d.engine.log.length).toBe(before);
    expect((await d.call("conversations.create", "after")).ok).toBe(true);
  });

  test("unknown methods: no method of that name, not a prototype's, not another group's", async () => {
    const d = await greeted();
    const before = d.engine.log.length;
    for (const method of [
      "nope",
      "conversations.nope",
      "conversations",
      "__proto__",
      "constructor",
      "toString",
      "conversations.__proto__",
      "conversations.constructor",
      "hasOwnProperty",
      "hello.x",
      "run.create",
      "conversations.create.x",
      "offerScriptWorkers",
      "onStatus",
    ]) {
      expectRefused(await d.call(method), "unknown-method");
    }
    // The debug endpoints exist only on a ?debug=1 engine.
    expectRefused(await d.call("debug.startTicker", { phases: 1, delayMs: 0 }), "unknown-method");
    expect(d.engine.log.length).toBe(before);
    expect((await d.call("conversations.list")).ok).toBe(true);
  });

  test("wrong argument types and missing arguments: BadRequest naming the method and the place", async () => {
    const d = await greeted();
    const before = d.engine.log.length;
    const cases: [string, unknown[]][] = [
      ["conversations.fork", ["1", 2]],
      ["conversations.fork", [1]],
      ["conversations.fork", [1, 2.5]],
      ["conversations.rename", [1, 2]],
      ["conversations.create", [5]],
      ["conversations.create", ["a", "b"]],
      ["conversations.delete", []],
      ["conversations.import", [{ text: "{}" }]],
      ["run.submit", [1, { text: 5 }]],
      ["run.submit", [1, { text: "x", mode: "shout" }]],
      ["run.submit", [1, { text: "x", extra: 1 }]],
      ["run.submit", [1]],
      ["run.withdraw", [1, null]],
      ["run.resendAsFork", [1, 2, "x", [-1]]],
      ["run.resendAsFork", [1, 2, "x", [0.5]]],
      ["run.resendAsFork", [1, 2, "x", [8]]],
      ["run.resendAsFork", [1, 2, "x", "all"]],
      ["run.resendAsFork", [1, 2, "x", [0], 1]],
      ["settings.configure", [1, { thinkingLevel: "max" }]],
      ["settings.setModel", [1, { provider: "demo" }]],
      ["settings.setExtensionEnabled", [1, "x", "yes"]],
      ["settings.setDemoSpeed", ["warp"]],
      ["keys.set", ["groq"]],
      ["keys.set", ["groq", 5]],
      ["userTools.save", [{ name: "x" }]],
      ["watches.conversation", ["1"]],
      ["watches.entriesBefore", [1, 2]],
      ["watches.unwatch", [{}]],
      ["tasks.abort", [true]],
      ["approvals.decide", [1, { taskId: 2, decision: "maybe", requestId: "r" }]],
      ["approvals.decide", [1, { taskId: 2, decision: "approve" }]],
      ["approvals.decide", [1, { taskId: 2, decision: "approve", requestId: "" }]],
      ["approvals.decide", [1, { taskId: "2", decision: "deny", requestId: "r" }]],
      ["approvals.decide", [1, { taskId: 2, decision: "deny", requestId: "r", reason: 5 }]],
      ["approvals.decide", [1, { taskId: 2, decision: "deny", requestId: "r", extra: true }]],
      ["approvals.setPolicy", ["write", "sometimes"]],
      ["approvals.setPolicy", ["no such name!", "ask"]],
      ["approvals.setPolicy", ["write"]],
      ["approvals.policies", ["1"]],
      [
        "schedules.create",
        [1, { text: "hi", when: { kind: "cron", cron: "0 9 * * *" }, timeZone: "UTC", catchUp: "maybe" }],
      ],
      [
        "schedules.create",
        [1, { text: "", when: { kind: "cron", cron: "0 9 * * *" }, timeZone: "UTC", catchUp: "run" }],
      ],
      [
        "schedules.create",
        [1, { text: "hi", when: { kind: "once", at: "soon" }, timeZone: "UTC", catchUp: "run" }],
      ],
      [
        "schedules.create",
        [1, { text: "hi", when: { kind: "every", cron: "x" }, timeZone: "UTC", catchUp: "run" }],
      ],
      [
        "schedules.update",
        [1, "../etc", { text: "hi", when: { kind: "once", at: 5 }, timeZone: "UTC", catchUp: "run" }],
      ],
      ["schedules.setPaused", [1, "abc", "yes"]],
      ["hello", [{ tabId: 5, protocol: PROTOCOL_VERSION }]],
      ["hello", []],
    ];
    for (const [method, args] of cases) {
      const reply = await d.call(method, ...args);
      expectRefused(reply, "bad-args");
      if (!reply.ok) expect(reply.error.message).toContain(method);
    }
    // Too many arguments, for every method.
    for (const method of Object.keys(METHODS)) expectRefused(await d.call(method, 1, 2, 3, 4, 5), "bad-args");
    expect(d.engine.log.length).toBe(before);
    expect((await d.call("conversations.fork", 1, 2)).ok).toBe(false); // runs: the engine's own error
    expect(d.engine.log.at(-1)).toBe("conversations.fork([1,2])");
  });

  test("an oversized message is refused before it is read further; the next call is served", async () => {
    const d = await greeted({ limits: { maxChars: 10_000, maxDepth: 64 } });
    const before = d.engine.log.length;
    expectRefused(await d.call("conversations.import", "x".repeat(10_001)), "too-large");
    expectRefused(await d.call("conversations.search", ["x".repeat(6000), "y".repeat(6000)]), "too-large");
    expectRefused(
      await d.call("run.submit", 1, { text: Array.from({ length: 2000 }, () => "abcdefgh").join(" ") }),
      "too-large",
    );
    expect(d.engine.log.length).toBe(before);
    expect((await d.call("conversations.import", "x".repeat(5_000))).ok).toBe(true);
  });

  test("at the default limit: a message over 65 MiB is refused, a 1 MiB import passes", async () => {
    const d = await greeted();
    const before = d.engine.log.length;
    expectRefused(await d.call("conversations.import", "x".repeat(DEFAULT_LIMITS.maxChars + 1)), "too-large");
    expect(d.engine.log.length).toBe(before);
    expect(await d.call("conversations.import", "x".repeat(1024 * 1024))).toMatchObject({
      ok: true,
      value: 9,
    });
  });

  test("calls before hello, and a tab of another protocol, are refused; duplicate ids too", async () => {
    const d = door();
    expectRefused(await d.call("conversations.list"), "no-hello");
    const debugEngine = door({ engine: fakeEngine({ debug: true }) });
    expectRefused(await debugEngine.call("debug.recordPartials"), "no-hello");
    expect(debugEngine.engine.log).toEqual([]);
    // After its hello, a ?debug=1 engine serves them in the same format, checked the same way.
    await debugEngine.call("hello", { tabId: "debug-tab", protocol: PROTOCOL_VERSION });
    expect(await debugEngine.call("debug.seedChat", { entries: 3 })).toMatchObject({ ok: true, value: 2 });
    expectRefused(await debugEngine.call("debug.seedChat", { entries: "3" }), "bad-args");
    const other = await d.call("hello", { tabId: "old", protocol: PROTOCOL_VERSION - 1 });
    expect(other.ok && other.value).toMatchObject({ protocol: PROTOCOL_VERSION });
    expectRefused(await d.call("conversations.create"), "no-hello");
    expect(d.engine.log).toEqual([`hello([{"tabId":"old","protocol":${PROTOCOL_VERSION - 1}}])`]);
    expect(d.pushes).toEqual([]); // no status for a tab it does not serve
    // A hello with fields this version does not know still gets its answer (a newer tab learns to reload).
    const newer = await d.call("hello", { tabId: "new", protocol: PROTOCOL_VERSION + 1, token: "t" });
    expect(newer.ok).toBe(true);

    const g = await greeted();
    // Two calls with one id while the first is open (a watch waiting for its first frame's
    // acknowledgement): the second is refused, the first answered once the frame is acknowledged.
    g.send({ id: 5, method: "watches.conversation", args: [1] });
    g.send({ id: 5, method: "conversations.list", args: [] });
    expectRefused(await g.next(), "duplicate-id", 5);
    expect(g.pushes).toMatchObject([{ push: "status" }, { push: "frame", watch: 5, seq: 1 }]);
    g.send({ ack: 5, seq: 1 });
    expect(await g.next()).toEqual({ id: 5, ok: true, value: 5 });
  });

  test("the engine's own errors cross with their name and code, and the door serves on", async () => {
    const d = await greeted();
    const reply = await d.call("conversations.fork", 99, 1);
    expect(reply).toMatchObject({
      ok: false,
      error: { name: "UnknownConversation", code: "unknown_conversation", message: "no conversation 99" },
    });
    const thrown = await d.call("tasks.inspect");
    expect(thrown).toMatchObject({ ok: false, error: { name: "Error" } });
    expect((await d.call("conversations.list")).ok).toBe(true);
  });

  test("the server setting: served by an engine that keeps one, checked; refused by one that does not", async () => {
    const without = await greeted();
    expectRefused(await without.call("remote.get"), "unknown-method");
    const set: unknown[][] = [];
    const engine = Object.assign(fakeEngine(), {
      remote: {
        get: async () => ({ url: null, hasToken: false }),
        credentials: async () => null,
        set: async (...args: unknown[]) => {
          set.push(args);
        },
      },
    });
    const d = door({ engine });
    expectRefused(await d.call("remote.get"), "no-hello");
    await d.call("hello", { tabId: "tab-1", protocol: PROTOCOL_VERSION });
    expect(await d.call("remote.get")).toMatchObject({ ok: true, value: { url: null, hasToken: false } });
    expect((await d.call("remote.set", "http://h", null)).ok).toBe(true);
    expectRefused(await d.call("remote.set", "http://h"), "bad-args");
    expectRefused(await d.call("remote.set", 7, "t"), "bad-args");
    expect(set).toEqual([["http://h", null]]);
  });

  test("MCP servers: served by an engine that keeps them, each call's arguments checked; refused by one that does not", async () => {
    const without = await greeted();
    expectRefused(await without.call("mcp.list"), "unknown-method");
    const added: unknown[][] = [];
    const updated: unknown[][] = [];
    const engine = Object.assign(fakeEngine(), {
      mcp: {
        list: async () => [],
        add: async (...args: unknown[]) => {
          added.push(args);
          return { name: "docs" };
        },
        update: async (...args: unknown[]) => {
          updated.push(args);
          return { name: "docs" };
        },
        refresh: async () => ({ name: "docs" }),
        remove: async () => undefined,
      },
    });
    const d = door({ engine });
    expectRefused(await d.call("mcp.list"), "no-hello");
    await d.call("hello", { tabId: "tab-1", protocol: PROTOCOL_VERSION });
    expect(await d.call("mcp.list")).toMatchObject({ ok: true, value: [] });
    const draft = { name: "docs", url: "http://127.0.0.1:1/mcp", token: null };
    expect((await d.call("mcp.add", draft)).ok).toBe(true);
    expectRefused(await d.call("mcp.add", { ...draft, extra: 1 }), "bad-args");
    expectRefused(await d.call("mcp.add", { name: "docs", url: "http://h" }), "bad-args");
    expectRefused(await d.call("mcp.add", { ...draft, token: 7 }), "bad-args");
    expectRefused(await d.call("mcp.add", { ...draft, token: "t".repeat(9000) }), "bad-args");
    expectRefused(await d.call("mcp.refresh", 7), "bad-args");
    expectRefused(await d.call("mcp.remove"), "bad-args");
    expect(added).toEqual([[draft]]);
    // An edit: what is absent stays (the token is never shown back, so leaving it out keeps it).
    expect((await d.call("mcp.update", "docs", { name: "notes" })).ok).toBe(true);
    expect((await d.call("mcp.update", "docs", { url: "http://h/mcp", token: null })).ok).toBe(true);
    expectRefused(await d.call("mcp.update", "docs"), "bad-args");
    expectRefused(await d.call("mcp.update", "docs", { name: "notes", extra: 1 }), "bad-args");
    expectRefused(await d.call("mcp.update", "docs", { token: 7 }), "bad-args");
    expectRefused(await d.call("mcp.update", 7, {}), "bad-args");
    expect(updated).toEqual([
      ["docs", { name: "notes" }],
      ["docs", { url: "http://h/mcp", token: null }],
    ]);
  });
});

describe("the browser store before the engine is ready", () => {
  test("start fresh after a discard: served by an engine that owns a browser store, after hello, with no arguments; refused by one that owns none", async () => {
    const without = await greeted();
    expectRefused(await without.call("store.startFresh"), "unknown-method");
    let asked = 0;
    const engine = Object.assign(fakeEngine(), {
      store: {
        startFresh: async () => {
          asked++;
          return asked === 1 ? "started" : "not-discarded";
        },
      },
    });
    const d = door({ engine });
    expectRefused(await d.call("store.startFresh"), "no-hello");
    await d.call("hello", { tabId: "tab-1", protocol: PROTOCOL_VERSION });
    expectRefused(await d.call("store.startFresh", true), "bad-args");
    expect(asked).toBe(0);
    expect(await d.call("store.startFresh")).toMatchObject({ ok: true, value: "started" });
    expect(await d.call("store.startFresh")).toMatchObject({ ok: true, value: "not-discarded" });
  });
});

describe("moves between homes", () => {
  const pkg = {
    format: "durable-agent/move",
    version: 1,
    transfer: "t-1",
    preparedAt: 1,
    conversation: { id: 3, createdAt: 1 },
    entries: [{ id: 1, kind: "pi.user" }],
    documents: [{ name: "pi.agent", value: { a: 1 }, version: 1 }],
    submissions: [],
    tasks: [],
  };

  test("a move's steps: served by an engine that is a peer (a server space), checked; refused by one that is not", async () => {
    const without = await greeted();
    for (const [method, args] of [
      ["moves.prepare", ["t-1", 3]],
      ["moves.adopt", [pkg]],
      ["moves.finish", ["t-1", 3]],
      ["moves.refuse", ["t-1"]],
      ["moves.cancel", ["t-1"]],
    ] as const)
      expectRefused(await without.call(method, ...args), "unknown-method");
    const ran: unknown[][] = [];
    const engine = Object.assign(fakeEngine(), {
      moves: {
        prepare: async (...a: unknown[]) => {
          ran.push(["prepare", ...a]);
          return pkg;
        },
        adopt: async (...a: unknown[]) => {
          ran.push(["adopt", ...a]);
          return { conversationId: 9 };
        },
        finish: async (...a: unknown[]) => void ran.push(["finish", ...a]),
        refuse: async (...a: unknown[]) => {
          ran.push(["refuse", ...a]);
          return { status: "refused" };
        },
        cancel: async (...a: unknown[]) => void ran.push(["cancel", ...a]),
      },
    });
    const d = door({ engine });
    expectRefused(await d.call("moves.adopt", pkg), "no-hello");
    await d.call("hello", { tabId: "engine-moves", protocol: PROTOCOL_VERSION });
    expect(await d.call("moves.prepare", "t-1", 3)).toMatchObject({ ok: true, value: pkg });
    expect(await d.call("moves.adopt", pkg)).toMatchObject({ ok: true, value: { conversationId: 9 } });
    expect(await d.call("moves.refuse", "t-1")).toMatchObject({ ok: true, value: { status: "refused" } });
    // The package's shape is bounded at the door: nothing runs for a wrong one.
    expectRefused(await d.call("moves.adopt", { ...pkg, format: "other" }), "bad-args");
    expectRefused(await d.call("moves.adopt", { ...pkg, extra: 1 }), "bad-args");
    expectRefused(await d.call("moves.adopt", { ...pkg, entries: [{ kind: "no id" }] }), "bad-args");
    expectRefused(await d.call("moves.prepare", "x".repeat(201), 3), "bad-args");
    expectRefused(await d.call("moves.finish", "t-1"), "bad-args");
    expect(ran).toEqual([
      ["prepare", "t-1", 3],
      ["adopt", pkg],
      ["refuse", "t-1"],
    ]);
  });

  test("moving conversations (homes): served by the browser engine to its tabs; refused by one that drives no moves", async () => {
    const without = await greeted();
    expectRefused(await without.call("homes.toServer", 3), "unknown-method");
    expectRefused(await without.call("homes.list"), "unknown-method");
    const view = { transfer: "t", direction: "toServer", local: 3, remote: 7, status: "done" };
    const engine = Object.assign(fakeEngine(), {
      homes: {
        toServer: async () => view,
        bringBack: async () => ({ ...view, direction: "back" }),
        list: async () => [view],
      },
    });
    const d = await greeted({ engine });
    expect(await d.call("homes.toServer", 3)).toMatchObject({ ok: true, value: view });
    expect(await d.call("homes.list")).toMatchObject({ ok: true, value: [view] });
    expectRefused(await d.call("homes.bringBack", "7"), "bad-args");
  });
});

describe("jsonProblem", () => {
  test("plain JSON data passes; what JSON cannot carry does not", () => {
    expect(
      jsonProblem({ a: [1, "x", null, true, { b: -0.5 }], c: undefined }, DEFAULT_LIMITS),
    ).toBeUndefined();
    for (const v of [() => 1, 1n, Symbol("s"), new Map(), new Set(), new Date(), [undefined], Number.NaN])
      expect(jsonProblem({ v }, DEFAULT_LIMITS)?.name).toBe("BadRequest");
  });
});
