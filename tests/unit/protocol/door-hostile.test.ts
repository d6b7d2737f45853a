/**
 * The engine's message door tried with hostile input, property-based (fast-check, issue 28 part 3):
 * `serveConnection` (worker/protocol/door.ts) in front of the real engine service on the memory store,
 * and the server's socket transport (worker/server/socket.ts) in front of the same door. Thousands of
 * generated messages: random JSON, wrong argument types for every method, unknown methods, huge and
 * deep payloads, values JSON cannot carry, random frames (text, binary, truncated calls), and a flood
 * from one tab. Each gets exactly one typed refusal (`BadRequest` with its code); the door serves the
 * next valid call; and the store is exactly as it was (every table's rows, and no transaction).
 * Seeds are fixed so a failure replays; fast-check prints the shrunk counterexample.
 */
import fc from "fast-check";
import { Value } from "typebox/value";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { AgentHarness } from "../../../worker/agent/harness.ts";
import { HarnessEngine } from "../../../worker/app/engine-service.ts";
import { DEFAULT_LIMITS, type DoorLimits, serveConnection } from "../../../worker/protocol/door.ts";
import { PROTOCOL_VERSION } from "../../../worker/protocol/index.ts";
import { AckSchema, CallSchema, isMethodName, METHODS } from "../../../worker/protocol/schema.ts";
import type { EngineMessage, ReplyMessage } from "../../../worker/protocol/wire.ts";
import { socketTransport } from "../../../worker/server/socket.ts";
import type { Store } from "../../../worker/store/types.ts";
import { fauxAgentModel, memoryStore } from "../../../worker/testing.ts";
import { echo } from "../agent/fixtures.ts";
import { rawPair } from "./fixtures.ts";

const faux = fauxAgentModel(echo);
let harness: AgentHarness;
let store: Store;
let service: HarnessEngine;

beforeAll(async () => {
  store = await memoryStore();
  harness = await AgentHarness.open(store, { models: faux.models, defaultModel: faux.ref });
  service = new HarnessEngine({ harness: async () => harness, build: "hostile", tabArrived: () => {} });
  // Something to lose: conversations with entries, titles, a key.
  const tab = service.tab("setup");
  await tab.keys.set("anthropic", "sk-ant-setup-0123456789");
  for (const title of ["one", "two"]) {
    const id = await tab.conversations.create(title);
    await tab.run.submit(id, { text: `hello ${title}` });
  }
  await harness.waitForIdle();
});

afterAll(async () => {
  await harness.close();
  faux.unregister();
});

/** Every row of every table, and the count of transactions: what "nothing written" compares. */
async function storeState(): Promise<{ transactions: number; tables: Record<string, unknown[]> }> {
  const tables: Record<string, unknown[]> = {};
  await store.read(async (sql) => {
    const names = await sql.all("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name");
    for (const { name } of names) tables[String(name)] = await sql.all(`SELECT * FROM "${String(name)}"`);
  });
  return { transactions: store.stats.transactions, tables };
}

/** Whether the door would run `message` (a call of a known method with arguments of its types). */
function runnable(message: unknown): boolean {
  return (
    Value.Check(CallSchema, message) &&
    isMethodName(message.method) &&
    Value.Check(METHODS[message.method], message.args)
  );
}

/** Whether the door answers `message` with nothing (an acknowledgement of a frame). */
const silent = (message: unknown) => Value.Check(AckSchema, message);

/** A tab on a raw pair (any JavaScript value crosses as it is), greeted. */
async function rawTab(limits?: DoorLimits) {
  const [tab, side] = rawPair();
  serveConnection({ transport: side, engine: service, ...(limits ? { limits } : {}) });
  const replies: ReplyMessage[] = [];
  const waiting: ((r: ReplyMessage) => void)[] = [];
  tab.onMessage((m) => {
    const message = m as EngineMessage;
    if (!("ok" in message)) return; // pushes (status) are not replies
    const w = waiting.shift();
    if (w) w(message);
    else replies.push(message);
  });
  const next = () =>
    new Promise<ReplyMessage>((resolve) => {
      const r = replies.shift();
      if (r) resolve(r);
      else waiting.push(resolve);
    });
  let id = 1;
  const call = (method: string, ...args: unknown[]) => {
    tab.send({ id: ++id, method, args });
    return next();
  };
  const hello = await call("hello", { tabId: `hostile-${Math.random()}`, protocol: PROTOCOL_VERSION });
  expect(hello.ok).toBe(true);
  return { send: (m: unknown) => tab.send(m), next, call };
}

const REFUSALS = ["malformed", "too-large", "unknown-method", "bad-args"];

function expectBadRequest(reply: ReplyMessage, codes: readonly string[] = REFUSALS): void {
  expect(reply.ok).toBe(false);
  if (reply.ok) return;
  expect(reply.error.name).toBe("BadRequest");
  expect(codes).toContain(reply.error.code);
}

const METHOD_NAMES = Object.keys(METHODS);

/** Any value, including what JSON cannot carry (bigints, Maps, Dates, typed arrays, sparse arrays...). */
const anyValue = fc.anything({
  withBigInt: true,
  withBoxedValues: true,
  withDate: true,
  withMap: true,
  withSet: true,
  withNullPrototype: true,
  withObjectString: true,
  withSparseArray: true,
  withTypedArray: true,
  withUnicodeString: true,
});

/** Values JSON cannot carry, by hand: each is refused `malformed` wherever it sits in a call. */
const notJson = fc.constantFrom<unknown>(
  () => 1,
  Symbol("s"),
  10n,
  Number.NaN,
  Number.POSITIVE_INFINITY,
  new Map([[1, 2]]),
  new Date(0),
  new Uint8Array(4),
  new (class Tool {})(),
  [1, undefined],
  // biome-ignore lint/suspicious/noSparseArray: a hole is what is tried
  [, 1],
  { toJSON: () => "x" },
  Object.assign(Object.create({ inherited: 1 }), { own: 1 }),
);

/** A value nested `depth` deep, arrays and objects by turns. */
function nested(depth: number, leaf: unknown): unknown {
  let v = leaf;
  for (let i = 0; i < depth; i++) v = i % 2 ? [v] : { k: v };
  return v;
}

/** Arguments of the wrong types for `method`: random values; when they happen to fit, too many of them. */
const wrongArgs = (method: string) =>
  fc.array(fc.oneof(fc.jsonValue(), anyValue), { maxLength: 4 }).map((args) => {
    const schema = METHODS[method as keyof typeof METHODS];
    return Value.Check(schema, args) ? [...args, 1, 2, 3, 4, 5] : args;
  });

/** A hostile message of every kind the door must refuse. */
const hostileMessage = fc.oneof(
  // Random JSON and random values (almost never a runnable call; those that are are left out below).
  fc.jsonValue(),
  anyValue,
  // Call-shaped with a bad envelope: a wrong id, a method that is not a string, args that are not a list.
  fc.record({
    id: fc.oneof(fc.double(), fc.string(), fc.constant(-1)),
    method: fc.constantFrom(...METHOD_NAMES),
    args: fc.constant([]),
  }),
  fc.record({ id: fc.nat(), method: fc.oneof(fc.integer(), fc.jsonValue()), args: fc.array(fc.jsonValue()) }),
  fc.record({
    id: fc.nat(),
    method: fc.constantFrom(...METHOD_NAMES),
    args: fc.oneof(fc.jsonValue(), anyValue),
  }),
  // Unknown methods, prototype names among them.
  fc.record({
    id: fc.nat(),
    method: fc.oneof(
      fc.string({ maxLength: 40 }),
      fc.constantFrom("__proto__", "constructor", "toString", "conversations.__proto__", "hasOwnProperty"),
    ),
    args: fc.array(fc.jsonValue(), { maxLength: 3 }),
  }),
  // Wrong argument types, for every method.
  fc
    .constantFrom(...METHOD_NAMES)
    .chain((method) => fc.record({ id: fc.nat(), method: fc.constant(method), args: wrongArgs(method) })),
  // Values JSON cannot carry inside a call's arguments.
  fc.record({
    id: fc.nat(),
    method: fc.constantFrom(...METHOD_NAMES),
    args: fc.tuple(notJson, fc.jsonValue()).map(([a, b]) => [b, a]),
  }),
  // Deep payloads, past the door's depth.
  fc
    .tuple(fc.integer({ min: DEFAULT_LIMITS.maxDepth, max: 3000 }), fc.constantFrom(...METHOD_NAMES))
    .map(([depth, method]) => ({ id: 1, method, args: [nested(depth, "deep")] })),
);

const valid = (m: unknown) => !runnable(m) && !silent(m);

describe("the door in front of the real engine", () => {
  test("3,000 generated hostile messages: each one typed BadRequest, the door serves on, nothing written", async () => {
    const tab = await rawTab();
    const before = await storeState();
    let tried = 0;
    const codes = new Map<string, number>();
    await fc.assert(
      fc.asyncProperty(hostileMessage.filter(valid), async (message) => {
        tab.send(message);
        const reply = await tab.next();
        expectBadRequest(reply);
        if (!reply.ok) codes.set(reply.error.code ?? "", (codes.get(reply.error.code ?? "") ?? 0) + 1);
        expect(store.stats.transactions).toBe(before.transactions);
        tried++;
      }),
      { numRuns: 3000, seed: 28_3 },
    );
    expect(tried).toBeGreaterThanOrEqual(3000);
    for (const code of ["malformed", "unknown-method", "bad-args"])
      expect(codes.get(code)).toBeGreaterThan(50);
    expect(await storeState()).toEqual(before);
    const list = await tab.call("conversations.list");
    expect(list.ok).toBe(true);
  });

  test("wrong argument types for every method, 40 generated each: bad-args naming the method", async () => {
    const tab = await rawTab();
    const before = await storeState();
    for (const method of METHOD_NAMES) {
      await fc.assert(
        fc.asyncProperty(wrongArgs(method), async (args) => {
          const reply = await tab.call(method, ...args);
          // A value JSON cannot carry is refused before the arguments are looked at.
          expectBadRequest(reply, ["bad-args", "malformed"]);
          if (!reply.ok && reply.error.code === "bad-args") expect(reply.error.message).toContain(method);
        }),
        { numRuns: 40, seed: 28_31 },
      );
    }
    expect(await storeState()).toEqual(before);
    expect((await tab.call("conversations.list")).ok).toBe(true);
  });

  test("huge payloads at the default limit, deep ones, getters that throw: refused, nothing written", async () => {
    const tab = await rawTab();
    const before = await storeState();
    const huge = "x".repeat(DEFAULT_LIMITS.maxChars + 1);
    const cases: [unknown, string][] = [
      [{ id: 7, method: "conversations.search", args: [huge] }, "too-large"],
      [{ id: 8, method: "conversations.import", args: [huge] }, "too-large"],
      [{ id: 9, method: "run.submit", args: [1, { text: huge }] }, "too-large"],
      [
        { id: 10, method: "conversations.create", args: Array.from({ length: 3_000_000 }, () => 1) },
        "too-large",
      ],
      [{ id: 11, method: "conversations.create", args: [nested(100_000, "x")] }, "malformed"],
      [
        Object.defineProperty({ method: "conversations.list", args: [] }, "id", {
          enumerable: true,
          get() {
            throw new Error("a getter that throws");
          },
        }),
        "malformed",
      ],
    ];
    for (const [message, code] of cases) {
      tab.send(message);
      expectBadRequest(await tab.next(), [code]);
    }
    expect(await storeState()).toEqual(before);
    expect((await tab.call("conversations.list")).ok).toBe(true);
  });

  test("a flood from one tab: 5,000 hostile messages at once, 5,000 refusals, then a call is served", async () => {
    const tab = await rawTab();
    const before = await storeState();
    const messages = fc.sample(hostileMessage.filter(valid), { numRuns: 5000, seed: 28_32 });
    for (const m of messages) tab.send(m);
    const replies = await Promise.all(messages.map(() => tab.next()));
    for (const reply of replies) expectBadRequest(reply);
    expect(await storeState()).toEqual(before);
    expect((await tab.call("conversations.list")).ok).toBe(true);
  });
});

/** The server's socket transport and the door over a fake socket, with a clock the test moves. */
function socketTab(rate = { ratePerSecond: 1_000_000, burst: 1_000_000 }) {
  const sent: EngineMessage[] = [];
  const connection = socketTransport(
    { send: (m) => sent.push(JSON.parse(m) as EngineMessage), close: () => undefined },
    { limits: { ...DEFAULT_LIMITS, maxChars: 100_000 }, rate, now: () => 0 },
  );
  serveConnection({
    transport: connection.transport,
    engine: service,
    limits: { ...DEFAULT_LIMITS, maxChars: 100_000 },
  });
  const replies = () => sent.filter((m): m is ReplyMessage => "ok" in m);
  /** Settle the door's asynchronous replies. */
  const settle = () => new Promise((resolve) => setTimeout(resolve, 0));
  return { connection, replies, settle };
}

/** Whether the door answers the text frame `data` with nothing or runs it (left out of the frames tried). */
function quietFrame(data: string): boolean {
  try {
    const parsed: unknown = JSON.parse(data);
    return runnable(parsed) || silent(parsed);
  } catch {
    return false;
  }
}

const callFrame = (method: string, args: unknown[]) => JSON.stringify({ id: 5, method, args });

/** Random frames: text of any characters, JSON text, binary, truncated and oversized calls. */
const hostileFrame: fc.Arbitrary<string | ArrayBuffer> = fc.oneof(
  fc.string({ unit: "binary", maxLength: 200 }),
  fc.json(),
  fc.uint8Array({ maxLength: 64 }).map((a) => a.buffer as ArrayBuffer),
  fc
    .tuple(fc.constantFrom(...METHOD_NAMES), fc.array(fc.jsonValue(), { maxLength: 3 }), fc.nat())
    .map(([method, args, cut]) => {
      const frame = callFrame(method, args);
      return frame.slice(0, cut % frame.length);
    }),
  fc
    .string({ minLength: 1, maxLength: 8 })
    .map((s) => `{"id":3,"method":"conversations.search","args":["${s.repeat(100_000 / s.length + 1)}"]}`),
  hostileMessage.filter(valid).map((m) => {
    try {
      return JSON.stringify(m) ?? "undefined";
    } catch {
      return "{bigint";
    }
  }),
);

describe("the server's socket transport in front of the door", () => {
  test("2,000 random frames: each refused once with a typed code, the connection serves on, nothing written", async () => {
    const { connection, replies, settle } = socketTab();
    connection.receive(callFrame("hello", [{ tabId: "socket-tab", protocol: PROTOCOL_VERSION }]));
    await settle();
    expect(replies().at(-1)?.ok).toBe(true);
    const before = await storeState();
    await fc.assert(
      fc.asyncProperty(
        hostileFrame.filter((f) => typeof f !== "string" || !quietFrame(f)),
        async (frame) => {
          const count = replies().length;
          connection.receive(frame);
          await settle();
          expect(replies().length).toBe(count + 1);
          expectBadRequest(replies().at(-1)!);
        },
      ),
      { numRuns: 2000, seed: 28_33 },
    );
    expect(await storeState()).toEqual(before);
    connection.receive(callFrame("conversations.list", []));
    await settle();
    expect(replies().at(-1)?.ok).toBe(true);
  });

  test("a flood of valid calls past the bucket: the excess refused rate-limited, none of it runs", async () => {
    const { connection, replies, settle } = socketTab({ ratePerSecond: 50, burst: 200 });
    connection.receive(callFrame("hello", [{ tabId: "flood-tab", protocol: PROTOCOL_VERSION }]));
    await settle();
    for (let i = 0; i < 1000; i++)
      connection.receive(
        JSON.stringify({ id: 100 + i, method: "conversations.create", args: [`flood ${i}`] }),
      );
    while (replies().length < 1001) await settle();
    await harness.waitForIdle();
    const answered = replies().slice(1);
    const created = answered.filter((r) => r.ok);
    const limited = answered.filter((r) => !r.ok && r.error.code === "rate-limited");
    // The clock stands still: the burst (less the hello) runs, the rest is refused and runs nothing.
    expect(created).toHaveLength(199);
    expect(limited).toHaveLength(801);
    const titles = (await service.tab("check").conversations.list()).map((c) => c.title);
    expect(titles.filter((t) => t.startsWith("flood "))).toHaveLength(199);
  });
});
