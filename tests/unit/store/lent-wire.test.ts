/**
 * The lent store's wire checks (worker/store/lent/wire.ts `isRequest`, `isReply`) against the schemas
 * they replace: the TypeBox schemas below are the wire's as lent.ts held them until session 28
 * (copied, their limits written as numbers so a changed constant shows here), kept as the oracle. The
 * hand checks run on the SharedWorker's first path without a schema library; here, on generated
 * messages of every kind (fast-check, fixed seeds), they must agree with `Value.Check`: both accept
 * the valid ones, both refuse each mutation (an extra key, a wrong type, a negative or fractional id,
 * an over-long string or array, a missing required key, a bad SQL value), and both say the same on
 * anything at all. Then one plain refusal per request kind.
 */
import fc from "fast-check";
import { type TSchema, Type } from "typebox";
import { Value } from "typebox/value";
import { describe, expect, test } from "vitest";
import { isReply, isRequest } from "../../../worker/store/lent/wire.ts";

// ---- the oracle: the wire's schemas as lent.ts held them ------------------------------------------

const Bytes = Type.Refine(Type.Unsafe<Uint8Array>({}), (v) => v instanceof Uint8Array);
const Value_ = Type.Union([Type.Number(), Type.String(), Type.Null(), Type.BigInt(), Bytes]);
const Id = Type.Integer({ minimum: 0 });
const strict = { additionalProperties: false } as const;
/** With the rule lent.ts checked by hand beside it (`isSteps`): a text or a number, at least one. */
const Step = Type.Refine(
  Type.Object(
    {
      sql: Type.Optional(Type.String({ minLength: 1, maxLength: 100_000 })),
      s: Type.Optional(Type.Integer({ minimum: 0, maximum: 2047 })),
      params: Type.Optional(Type.Array(Value_, { maxItems: 10_000 })),
      rows: Type.Optional(Type.Union([Type.Literal("all"), Type.Literal("get")])),
    },
    strict,
  ),
  (step) => step.sql !== undefined || step.s !== undefined,
);
const Request = Type.Union([
  Type.Object(
    { t: Type.Literal("open"), id: Id, name: Type.String({ minLength: 1, maxLength: 64 }) },
    strict,
  ),
  Type.Object(
    {
      t: Type.Literal("migrate"),
      id: Id,
      migrations: Type.Array(Type.String(), { maxItems: 10_000 }),
      epoch: Type.Object({ read: Type.String(), bump: Type.String() }, strict),
    },
    strict,
  ),
  Type.Object({ t: Type.Literal("fence"), id: Id }, strict),
  Type.Object(
    {
      t: Type.Literal("job"),
      id: Id,
      job: Id,
      begin: Type.Optional(Type.Union([Type.Literal("commit"), Type.Literal("read")])),
      steps: Type.Array(Step, { maxItems: 100_000 }),
      end: Type.Optional(
        Type.Union([Type.Literal("commit"), Type.Literal("rollback"), Type.Literal("done")]),
      ),
      seq: Type.Optional(Type.Integer({ minimum: 0, maximum: 2 ** 31 - 1 })),
      each: Type.Optional(Type.Literal(true)),
    },
    strict,
  ),
  Type.Object({ t: Type.Literal("close"), id: Id }, strict),
  Type.Object({ t: Type.Literal("memory"), id: Id }, strict),
  Type.Object({ t: Type.Literal("kill"), id: Id, reason: Type.String({ maxLength: 1000 }) }, strict),
]);
const WireError = Type.Object(
  {
    name: Type.String(),
    message: Type.String(),
    store: Type.Boolean(),
    reason: Type.Optional(Type.String()),
    advice: Type.Optional(Type.String()),
  },
  strict,
);
const Reply = Type.Union([
  Type.Object(
    {
      id: Id,
      ok: Type.Literal(true),
      rows: Type.Optional(Type.Array(Type.Record(Type.String(), Value_))),
      results: Type.Optional(Type.Array(Type.Array(Type.Record(Type.String(), Value_)))),
      schemaVersion: Type.Optional(Type.Integer()),
      wasmBytes: Type.Optional(Type.Integer({ minimum: 0 })),
      parts: Type.Optional(
        Type.Object(
          {
            scriptAt: Type.Number(),
            wasmAt: Type.Optional(Type.Number()),
            askedAt: Type.Optional(Type.Number()),
            instanceAt: Type.Optional(Type.Number()),
            vfsAt: Type.Optional(Type.Number()),
            fileAt: Type.Optional(Type.Number()),
            openedAt: Type.Optional(Type.Number()),
          },
          strict,
        ),
      ),
    },
    strict,
  ),
  Type.Object({ id: Id, ok: Type.Literal(false), error: WireError }, strict),
]);

// ---- generated messages -----------------------------------------------------------------------------

type Message = Record<string, unknown>;
const RUNS = { numRuns: 400, seed: 28 } as const;

/** Any code point (astral ones included: a schema's string length counts code points). */
const text = (min: number, max: number) => fc.string({ unit: "binary", minLength: min, maxLength: max });
const id = fc.oneof(fc.nat(), fc.maxSafeNat());
const sqlValue = fc.oneof(
  fc.double({ noNaN: true, noDefaultInfinity: true }),
  fc.integer(),
  text(0, 8),
  fc.constant(null),
  fc.bigInt(),
  fc.uint8Array({ maxLength: 4 }),
);
const row = fc.dictionary(text(0, 6), sqlValue, { maxKeys: 4 });

const step = fc
  .record(
    {
      sql: text(1, 40),
      s: fc.integer({ min: 0, max: 2047 }),
      params: fc.array(sqlValue, { maxLength: 4 }),
      rows: fc.constantFrom("all", "get"),
    },
    { requiredKeys: [] },
  )
  .filter((s) => s.sql !== undefined || s.s !== undefined);

const requests = {
  open: fc.record({ t: fc.constant("open"), id, name: text(1, 64) }),
  migrate: fc.record({
    t: fc.constant("migrate"),
    id,
    migrations: fc.array(text(0, 20), { maxLength: 5 }),
    epoch: fc.record({ read: text(0, 20), bump: text(0, 20) }),
  }),
  fence: fc.record({ t: fc.constant("fence"), id }),
  job: fc.record(
    {
      t: fc.constant("job"),
      id,
      job: id,
      begin: fc.constantFrom("commit", "read"),
      steps: fc.array(step, { maxLength: 4 }),
      end: fc.constantFrom("commit", "rollback", "done"),
      seq: fc.integer({ min: 0, max: 2 ** 31 - 1 }),
      each: fc.constant(true),
    },
    { requiredKeys: ["t", "id", "job", "steps"] },
  ),
  close: fc.record({ t: fc.constant("close"), id }),
  memory: fc.record({ t: fc.constant("memory"), id }),
  kill: fc.record({ t: fc.constant("kill"), id, reason: text(0, 1000) }),
} satisfies Record<string, fc.Arbitrary<Message>>;

/** A time in ms since the epoch, as `performance.timeOrigin + performance.now()` gives (sub-ms). */
const stamp = fc.double({ min: 0, max: 4e12, noNaN: true });

const replies = {
  ok: fc.record(
    {
      id,
      ok: fc.constant(true),
      rows: fc.array(row, { maxLength: 3 }),
      results: fc.array(fc.array(row, { maxLength: 3 }), { maxLength: 3 }),
      schemaVersion: fc.integer(),
      wasmBytes: fc.maxSafeNat(),
      parts: fc.record(
        {
          scriptAt: stamp,
          wasmAt: stamp,
          askedAt: stamp,
          instanceAt: stamp,
          vfsAt: stamp,
          fileAt: stamp,
          openedAt: stamp,
        },
        { requiredKeys: ["scriptAt"] },
      ),
    },
    { requiredKeys: ["id", "ok"] },
  ),
  error: fc.record({
    id,
    ok: fc.constant(false),
    error: fc.record(
      {
        name: text(0, 20),
        message: text(0, 40),
        store: fc.boolean(),
        reason: text(0, 10),
        advice: text(0, 20),
      },
      { requiredKeys: ["name", "message", "store"] },
    ),
  }),
} satisfies Record<string, fc.Arbitrary<Message>>;

// ---- mutations: each makes a valid message invalid ---------------------------------------------------

/** The objects of a message whose keys are closed (a schema's `additionalProperties: false`). */
function strictNodes(m: Message): Message[] {
  const nodes: Message[] = [m];
  if (m.epoch) nodes.push(m.epoch as Message);
  if (m.error) nodes.push(m.error as Message);
  if (m.parts) nodes.push(m.parts as Message);
  if (Array.isArray(m.steps)) nodes.push(...(m.steps as Message[]));
  return nodes;
}

const REQUIRED: Record<string, readonly string[]> = {
  open: ["t", "id", "name"],
  migrate: ["t", "id", "migrations", "epoch"],
  fence: ["t", "id"],
  job: ["t", "id", "job", "steps"],
  close: ["t", "id"],
  memory: ["t", "id"],
  kill: ["t", "id", "reason"],
  ok: ["id", "ok"],
  error: ["id", "ok", "error"],
  epoch: ["read", "bump"],
  wireError: ["name", "message", "store"],
  parts: ["scriptAt"],
};

/** A value of another type than `v`'s, for every field the wire has. */
function wrongType(v: unknown): unknown {
  if (typeof v === "string") return 7;
  if (typeof v === "number") return String(v);
  if (typeof v === "boolean") return 1;
  if (Array.isArray(v)) return {};
  return "x";
}

type Mutation = (m: Message, pick: number) => string | undefined;

/** Pick one of `items` by a generated number. */
const choose = <T>(items: readonly T[], pick: number): T | undefined =>
  items.length === 0 ? undefined : items[pick % items.length];

const mutations: Record<string, Mutation> = {
  "an extra key": (m, pick) => {
    const node = choose(strictNodes(m), pick)!;
    node[`extra${pick % 3}`] = pick % 2 ? undefined : "x";
    return "extra";
  },
  "a wrong type": (m, pick) => {
    const node = choose(strictNodes(m), pick)!;
    const key = choose(
      Object.keys(node).filter((k) => node[k] !== undefined),
      pick >> 3,
    );
    if (key === undefined) return undefined;
    node[key] = wrongType(node[key]);
    return key;
  },
  "a negative or fractional id": (m, pick) => {
    const keys = ["id", "job", "seq", "wasmBytes"].filter((k) => typeof m[k] === "number");
    const steps = Array.isArray(m.steps) ? (m.steps as Message[]).filter((s) => s.s !== undefined) : [];
    const key = choose(keys, pick)!;
    const node = steps.length > 0 && pick % 4 === 0 ? choose(steps, pick >> 2)! : m;
    const field = node === m ? key : "s";
    const value = node[field] as number;
    node[field] = pick % 2 ? -1 - (value % 1000) : (value % 1000) + 0.5; // (a huge id + 0.5 is an integer)
    return field;
  },
  "an over-long string": (m, pick) => {
    const astral = pick % 2 === 1; // the limit counts code points: 2 UTF-16 units each
    const long = (n: number) => (astral ? "\u{1F600}" : "x").repeat(n + 1);
    if (m.t === "open") m.name = long(64);
    else if (m.t === "kill") m.reason = long(1000);
    else if (m.t === "job" && Array.isArray(m.steps) && m.steps.length > 0)
      (choose(m.steps, pick >> 1) as Message).sql = long(100_000);
    else return undefined;
    return "long";
  },
  "a missing required key": (m, pick) => {
    const kind = m.t !== undefined ? String(m.t) : m.ok === true ? "ok" : "error";
    const nodes: Array<[Message, readonly string[]]> = [[m, REQUIRED[kind]!]];
    if (m.epoch) nodes.push([m.epoch as Message, REQUIRED.epoch!]);
    if (m.error) nodes.push([m.error as Message, REQUIRED.wireError!]);
    if (m.parts) nodes.push([m.parts as Message, REQUIRED.parts!]);
    const [node, keys] = choose(nodes, pick)!;
    const key = choose(keys, pick >> 2)!;
    delete node[key];
    return key;
  },
  "a bad SQL value": (m, pick) => {
    const bad = choose([Number.NaN, Number.POSITIVE_INFINITY, undefined, {}, [1], true], pick);
    const withParams = Array.isArray(m.steps) ? (m.steps as Message[]).filter((s) => s.params) : [];
    const rows = Array.isArray(m.rows) ? (m.rows as Message[]) : [];
    if (withParams.length > 0) (choose(withParams, pick >> 3)!.params as unknown[]).push(bad);
    else if (rows.length > 0) choose(rows, pick >> 3)!.bad = bad;
    else if (Array.isArray(m.migrations)) m.migrations.push(pick % 2 ? 7 : null);
    else return undefined;
    return "value";
  },
};

function mutated(valid: fc.Arbitrary<Message>) {
  return fc
    .tuple(valid, fc.constantFrom(...Object.keys(mutations)), fc.nat())
    .map(([m, name, pick]) => {
      const copy = structuredClone(m);
      return { name, applied: mutations[name]!(copy, pick), message: copy };
    })
    .filter((x) => x.applied !== undefined);
}

function agree(schema: TSchema, check: (v: unknown) => boolean, message: unknown, accepts: boolean) {
  expect(Value.Check(schema, message), "the schema").toBe(accepts);
  expect(check(message), "the hand check").toBe(accepts);
}

// ---- the properties -----------------------------------------------------------------------------------

describe("the hand checks agree with the wire's schemas", () => {
  for (const [kind, valid] of Object.entries(requests)) {
    test(`a ${kind} request: both accept the valid, both refuse each mutation`, () => {
      fc.assert(
        fc.property(valid, (m) => agree(Request, isRequest, m, true)),
        RUNS,
      );
      fc.assert(
        fc.property(mutated(valid), ({ message }) => agree(Request, isRequest, message, false)),
        RUNS,
      );
    });
  }

  for (const [kind, valid] of Object.entries(replies)) {
    test(`an ${kind} reply: both accept the valid, both refuse each mutation`, () => {
      fc.assert(
        fc.property(valid, (m) => agree(Reply, isReply, m, true)),
        RUNS,
      );
      fc.assert(
        fc.property(mutated(valid), ({ message }) => agree(Reply, isReply, message, false)),
        RUNS,
      );
    });
  }

  test("on anything at all, and on a message of one kind under another's tag, they say the same", () => {
    const anyRequest = fc.oneof(...Object.values(requests));
    const anyReply = fc.oneof(...Object.values(replies));
    const retagged = fc
      .tuple(anyRequest, fc.constantFrom(...Object.keys(requests)))
      .map(([m, t]) => ({ ...m, t }));
    const noise = fc.oneof(fc.anything(), anyRequest, anyReply, retagged);
    fc.assert(
      fc.property(noise, (m) => {
        expect(isRequest(m)).toBe(Value.Check(Request, m));
        expect(isReply(m)).toBe(Value.Check(Reply, m));
      }),
      { numRuns: 2000, seed: 28 },
    );
  });
});

// ---- plain examples -----------------------------------------------------------------------------------

describe("each request kind's refusals", () => {
  const refused: Record<string, unknown[]> = {
    open: [
      { t: "open", id: 1, name: "" },
      { t: "open", id: 1, name: "x".repeat(65) },
      { t: "open", id: 1, name: "\u{1F600}".repeat(65) },
      { t: "open", id: 1, name: 7 },
      { t: "open", id: 1 },
      { t: "open", id: 1, name: "a", extra: 1 },
    ],
    migrate: [
      { t: "migrate", id: 1, migrations: Array(10_001).fill("m"), epoch: { read: "r", bump: "b" } },
      { t: "migrate", id: 1, migrations: [7], epoch: { read: "r", bump: "b" } },
      { t: "migrate", id: 1, migrations: [], epoch: { read: "r", bump: 2 } },
      { t: "migrate", id: 1, migrations: [], epoch: { read: "r", bump: "b", x: "y" } },
      { t: "migrate", id: 1, migrations: [], epoch: { read: "r" } },
      { t: "migrate", id: 1, migrations: [] },
      { t: "migrate", id: 1, migrations: [], epoch: { read: "r", bump: "b" }, extra: 1 },
    ],
    fence: [{ t: "fence" }, { t: "fence", id: -1 }, { t: "fence", id: 1, extra: 1 }],
    job: [
      { t: "job", id: 1, job: 1, steps: [{}] },
      { t: "job", id: 1, job: 1, steps: [{ s: 2048 }] },
      { t: "job", id: 1, job: 1, steps: [{ sql: "" }] },
      { t: "job", id: 1, job: 1, steps: [{ sql: "x".repeat(100_001) }] },
      { t: "job", id: 1, job: 1, steps: [{ s: 1, params: [Number.NaN] }] },
      { t: "job", id: 1, job: 1, steps: [{ s: 1, params: Array(10_001).fill(1) }] },
      { t: "job", id: 1, job: 1, steps: Array(100_001).fill({ s: 0 }) },
      { t: "job", id: 1, job: 1, steps: [{ s: 1, rows: "one" }] },
      { t: "job", id: 1, job: 1, steps: [{ s: 1, extra: 1 }] },
      { t: "job", id: 1, job: 1, steps: [], seq: 2 ** 31 },
      { t: "job", id: 1, job: 1, steps: [], each: false },
      { t: "job", id: 1, job: 1, steps: [], begin: "write" },
      { t: "job", id: 1, job: 1, steps: [], end: "abort" },
      { t: "job", id: 1, job: 1.5, steps: [] },
      { t: "job", id: 1, steps: [] },
      { t: "job", id: 1, job: 1, steps: [], extra: 1 },
    ],
    close: [
      { t: "close", id: 0.5 },
      { t: "close", id: "1" },
      { t: "close", id: 1, extra: 1 },
    ],
    memory: [{ t: "memory" }, { t: "memory", id: 1, extra: 1 }],
    kill: [
      { t: "kill", id: 1, reason: "x".repeat(1001) },
      { t: "kill", id: 1, reason: "\u{1F600}".repeat(1001) },
      { t: "kill", id: 1, reason: 7 },
      { t: "kill", id: 1 },
      { t: "kill", id: 1, reason: "r", extra: 1 },
    ],
    unknown: [
      { t: "drop", id: 1 },
      { id: 1 },
      null,
      [],
      "open",
      new Map<string, unknown>([
        ["t", "fence"],
        ["id", 1],
      ]),
    ],
  };
  for (const [kind, messages] of Object.entries(refused)) {
    test(`${kind}: each is refused, by the hand check as by the schema`, () => {
      for (const m of messages) {
        expect(Value.Check(Request, m), JSON.stringify(m)?.slice(0, 120)).toBe(false);
        expect(isRequest(m), JSON.stringify(m)?.slice(0, 120)).toBe(false);
      }
    });
  }

  test("at the limits, each is accepted (the limits count code points)", () => {
    const accepted: Message[] = [
      { t: "open", id: 0, name: "\u{1F600}".repeat(64) },
      { t: "kill", id: 0, reason: "\u{1F600}".repeat(1000) },
      { t: "job", id: 0, job: 0, steps: [{ s: 2047, sql: "\u{1F600}".repeat(100_000) }], seq: 2 ** 31 - 1 },
      { t: "migrate", id: 0, migrations: Array(10_000).fill(""), epoch: { read: "", bump: "" } },
      { t: "job", id: 0, job: 0, steps: [{ s: 0, sql: undefined, params: undefined }], end: undefined },
    ];
    for (const m of accepted) agree(Request, isRequest, m, true);
  });

  test("an open's parts: the known steps only, each a finite time, the script's first line always", () => {
    const ok = {
      id: 1,
      ok: true,
      schemaVersion: 3,
      parts: { scriptAt: 1.5, wasmAt: 2, askedAt: 3, openedAt: 4.25 },
    };
    agree(Reply, isReply, ok, true);
    agree(Reply, isReply, { ...ok, parts: { scriptAt: 1 } }, true);
    for (const parts of [
      {},
      { wasmAt: 2 },
      { scriptAt: Number.NaN },
      { scriptAt: 1, openedAt: Number.POSITIVE_INFINITY },
      { scriptAt: "1" },
      { scriptAt: 1, heapAt: 2 },
      [1],
      null,
    ])
      agree(Reply, isReply, { ...ok, parts }, false);
  });

  test("error replies: the error's keys and types", () => {
    const ok = {
      id: 1,
      ok: false,
      error: { name: "n", message: "m", store: true, reason: "r", advice: "a" },
    };
    agree(Reply, isReply, ok, true);
    for (const error of [
      { name: "n", message: "m" },
      { name: "n", message: "m", store: "true" },
      { name: "n", message: "m", store: false, reason: 1 },
      { name: "n", message: "m", store: false, advice: null },
      { name: "n", message: "m", store: false, extra: "" },
    ])
      agree(Reply, isReply, { id: 1, ok: false, error }, false);
    agree(Reply, isReply, { ...ok, extra: 1 }, false);
    agree(Reply, isReply, { ...ok, id: -1 }, false);
  });
});
