/**
 * The lent store (worker/store/lent/) beyond the conformance suite: its door refuses what it does
 * not expect, and a lender lost mid-commit (its port closes, as when the lending tab closes) hands
 * the store to a new lender without losing an acknowledged commit or storing one twice: the commit
 * whose reply was lost is found stored by its sequence number, or sent again when it was not.
 * Lenders here are memory stores behind real MessageChannels; a lender dies by closing its port at a
 * fault point of its own commit line, and the next one opens the files the dead one left. The wire of
 * a commit: one message each way, a statement's text once per port (then its number), an ok reply
 * checked by hand to the reply schema.
 */
import { describe, expect, test } from "vitest";
import { schema } from "../../../worker/core/schema.ts";
import { openLentStore } from "../../../worker/store/lent/client.ts";
import { serveLentStore } from "../../../worker/store/lent/server.ts";
import type { LentOpenParts, LentPort, LentReply, LentRequest } from "../../../worker/store/lent/wire.ts";
import { type MemoryImage, type MemoryStore, openStore } from "../../../worker/store/open.ts";
import { allOf, type FaultPoint, StoreClosed } from "../../../worker/store/types.ts";

const INSERT = "INSERT INTO meta (key, value) VALUES (?, ?)";

interface Lender {
  port: MessagePort;
  /** The lender's own end (closing it is the lender dying). */
  own: MessagePort;
  memory(): MemoryStore;
}

function lender(
  image?: MemoryImage,
  options: { wasmBytes?: number; parts?: () => LentOpenParts } = {},
): Lender {
  const channel = new MessageChannel();
  let memory: MemoryStore | undefined;
  const { wasmBytes, parts } = options;
  void serveLentStore(channel.port2, {
    async open(name) {
      memory = await openStore({ kind: "memory", name, ...(image ? { image } : {}) });
      return memory;
    },
    ...(wasmBytes === undefined ? {} : { memory: () => wasmBytes }),
    ...(parts ? { parts } : {}),
  });
  return { port: channel.port1, own: channel.port2, memory: () => memory! };
}

describe("the lent store", () => {
  test("its door refuses a message it does not expect, with a typed reply, and serves the next", async () => {
    const { port } = lender();
    const replies: unknown[] = [];
    port.addEventListener("message", (event) => replies.push(event.data));
    port.start();
    port.postMessage({ t: "job", id: 7, job: 1, begin: "commit", steps: [{ sql: 42 }] });
    port.postMessage({ t: "drop-tables", id: 8 });
    // A job's steps are checked by hand (the bulk of the wire): each way out of `Step` is refused.
    const badSteps: unknown[] = [
      [{ sql: "SELECT ?", params: [{ not: "a value" }] }],
      [{ sql: "SELECT ?", params: [Number.NaN] }],
      [{ sql: "SELECT ?", params: [[1]] }],
      [{ sql: "SELECT 1", extra: true }],
      [{ sql: "" }],
      [{ sql: "x".repeat(100_001) }],
      [{ sql: "SELECT 1", rows: "some" }],
      [{ sql: "SELECT ?", params: Array.from({ length: 10_001 }, () => 1) }],
      [null],
      "SELECT 1",
    ];
    badSteps.forEach((steps, i) => {
      port.postMessage({ t: "job", id: 100 + i, job: 100 + i, begin: "commit", steps });
    });
    port.postMessage({ t: "job", id: 200, job: 200, begin: "commit", steps: [], extra: 1 });
    // A job's envelope is checked by hand too (every commit sends one): each way out of `Request`.
    const badJobs: Array<Record<string, unknown>> = [
      { job: -1 },
      { job: 1.5 },
      { job: "1" },
      { begin: "write" },
      { end: "save" },
      { end: "commit", seq: 2 ** 31 },
      { end: "commit", seq: -1 },
      { end: "commit", seq: "1" },
    ];
    badJobs.forEach((fields, i) => {
      port.postMessage({ t: "job", id: 300 + i, job: 300 + i, begin: "commit", steps: [], ...fields });
    });
    port.postMessage({ t: "open", id: 9, name: "door" });
    await expect.poll(() => replies.some((r) => (r as { id: number }).id === 9)).toBe(true);
    // Statement numbers: out of range, neither text nor number, or never numbered on this port.
    const badNumbers: unknown[] = [
      [{ s: -1 }],
      [{ s: 2048, sql: "SELECT 1" }],
      [{ s: 0.5, sql: "SELECT 1" }],
      [{ rows: "all" }],
      [{ s: 7 }],
    ];
    badNumbers.forEach((steps, i) => {
      port.postMessage({ t: "job", id: 400 + i, job: 400 + i, begin: "commit", steps, end: "commit" });
    });
    const total = badSteps.length + badJobs.length + badNumbers.length + 4;
    await expect.poll(() => replies.length).toBe(total);
    expect(replies[0]).toMatchObject({ id: 7, ok: false, error: { name: "LentBadRequest" } });
    expect(replies[1]).toMatchObject({ id: 8, ok: false, error: { name: "LentBadRequest" } });
    // Refused at the door (not for want of an open store: these came before the open).
    const refused = {
      name: "LentBadRequest",
      message: "the lent store refused a message it does not expect",
    };
    badSteps.forEach((_, i) => {
      expect(replies[2 + i]).toMatchObject({ id: 100 + i, ok: false, error: refused });
    });
    const byId = (id: number) => replies.find((r) => (r as { id: number }).id === id);
    expect(byId(200)).toMatchObject({ ok: false, error: refused });
    badJobs.forEach((_, i) => {
      expect(byId(300 + i)).toMatchObject({ ok: false, error: refused });
    });
    expect(byId(9)).toMatchObject({ ok: true, schemaVersion: 0 });
    badNumbers.slice(0, -1).forEach((_, i) => {
      expect(byId(400 + i)).toMatchObject({ ok: false, error: refused });
    });
    expect(byId(404)).toMatchObject({ error: { message: "statement 7 was never sent to this worker" } });
    port.close();
  });

  test("the wasm memory the store holds over there is asked over the port (0 from a lender that cannot say)", async () => {
    const says = await openLentStore({ port: lender(undefined, { wasmBytes: 16_777_216 }).port, name: "m1" });
    expect(await says.wasmMemoryBytes()).toBe(16_777_216);
    await says.close();
    const silent = await openLentStore({ port: lender().port, name: "m2" });
    expect(await silent.wasmMemoryBytes()).toBe(0);
    await silent.close();
  });

  test("the open's answer brings when the lender reached each step of it, read once the open is done (none from a lender that cannot say)", async () => {
    let asked = 0;
    const parts = () => {
      asked++;
      return { scriptAt: 1000.5, wasmAt: 1010, askedAt: 1020.25, openedAt: 1040 };
    };
    const heard: Array<LentOpenParts | undefined> = [];
    const says = await openLentStore({
      port: lender(undefined, { parts }).port,
      name: "p1",
      opened: (p) => heard.push(p),
    });
    expect(heard).toEqual([{ scriptAt: 1000.5, wasmAt: 1010, askedAt: 1020.25, openedAt: 1040 }]);
    expect(asked).toBe(1);
    await says.close();
    const silent: Array<LentOpenParts | undefined> = [];
    const other = await openLentStore({ port: lender().port, name: "p2", opened: (p) => silent.push(p) });
    expect(silent).toEqual([undefined]);
    await other.close();
  });

  test("a lender lost without a new one: the commit in flight and later calls reject with StoreClosed", async () => {
    const first = lender();
    const store = await openLentStore({ port: first.port, name: "alone" });
    await store.migrate(schema);
    await store.commit((sql) => sql.run(INSERT, ["a", "1"]));
    first.memory().setFaultHook((point) => {
      if (point === "before-commit") {
        first.own.close();
        throw new StoreClosed("the lender died");
      }
    });
    await expect(store.commit((sql) => sql.run(INSERT, ["b", "2"]))).rejects.toBeInstanceOf(StoreClosed);
    expect(store.closed).toBe(true);
    await expect(store.read((sql) => sql.all("SELECT 1"))).rejects.toBeInstanceOf(StoreClosed);
  });

  for (const point of ["before-commit", "after-commit"] as FaultPoint[]) {
    test(`a lender lost at ${point} of a commit: a new lender takes the store, every acknowledged commit is stored once`, async () => {
      let current = lender();
      const lenders = [current];
      const store = await openLentStore({
        port: current.port,
        name: "moving",
        async relend() {
          // The dead lender's files, as its crash left them (an open transaction rolls back at open).
          current = lender(lenders.at(-1)!.memory().image());
          lenders.push(current);
          return current.port;
        },
      });
      await store.migrate(schema);
      store.fenceOnFirstCommit();
      const first = lenders[0]!;
      let commits = 0;
      first.memory().setFaultHook((p) => {
        if (p === "after-commit") commits++;
        // The 6th transaction of the lender (after migrate's: the epoch's first commit, then 4 more).
        if (p === point && (point === "after-commit" ? commits === 6 : commits === 5)) {
          first.own.close();
          throw new StoreClosed("the lending tab closed");
        }
      });
      const acknowledged: string[] = [];
      const results = await Promise.allSettled(
        Array.from({ length: 12 }, (_, i) =>
          store
            .commit(async (sql) => {
              const before = await sql.get("SELECT count(*) AS n FROM meta WHERE key LIKE 'k%'");
              await sql.run(INSERT, [`k${String(i).padStart(2, "0")}`, String(before?.["n"])]);
              return i;
            })
            .then((i) => acknowledged.push(`k${String(i).padStart(2, "0")}`)),
        ),
      );
      expect(results.filter((r) => r.status === "rejected")).toEqual([]);
      expect(store.relent).toHaveLength(1);
      expect(store.relent[0]).toMatchObject({ foundStored: point === "after-commit" });
      const rows = await store.read((sql) =>
        sql.all("SELECT key, value FROM meta WHERE key LIKE 'k%' ORDER BY key"),
      );
      // Each commit once, in order, each having seen exactly the ones before it.
      expect(rows.map((r) => r["key"])).toEqual(acknowledged);
      expect(rows.map((r) => r["value"])).toEqual(rows.map((_, i) => String(i)));
      await store.close();
    });
  }

  test("a read's batch is one round trip, answered with each statement's rows, after every commit requested before it", async () => {
    const store = await openLentStore({ port: lender().port, name: "batch" });
    await store.migrate(schema);
    void store.commit((sql) => sql.run(INSERT, ["a", "1"]));
    void store.commit((sql) => sql.run(INSERT, ["b", "2"]));
    const before = store.roundTrips;
    const results = await store.read((sql) =>
      allOf(sql, [
        { sql: "SELECT key FROM meta WHERE key IN ('a', 'b') ORDER BY key" },
        { sql: "SELECT value FROM meta WHERE key = ?", params: ["b"] },
        { sql: "SELECT value FROM meta WHERE key = 'none'" },
      ]),
    );
    // The two commits' round trips, then the read's one (its end needs no answer).
    expect(store.roundTrips - before).toBe(3);
    expect(results).toEqual([[{ key: "a" }, { key: "b" }], [{ value: "2" }], []]);
    // A failing statement rejects the batch with its error, and the read with it; the store serves on.
    await expect(
      store.read((sql) => allOf(sql, [{ sql: "SELECT 1 AS one" }, { sql: "SELECT * FROM no_such_table" }])),
    ).rejects.toThrow(/no_such_table/);
    expect(await store.read((sql) => sql.get("SELECT value FROM meta WHERE key = 'a'"))).toEqual({
      value: "1",
    });
    store.kill("gone");
    await expect(
      store.read((sql) => allOf(sql, [{ sql: "SELECT 1" }, { sql: "SELECT 2" }])),
    ).rejects.toBeInstanceOf(StoreClosed);
  });

  test("a lender lost while a read's batch is in flight: the new lender answers it", async () => {
    let current = lender();
    const lenders = [current];
    const store = await openLentStore({
      port: current.port,
      name: "moving-read",
      async relend() {
        current = lender(lenders.at(-1)!.memory().image());
        lenders.push(current);
        return current.port;
      },
    });
    await store.migrate(schema);
    await store.commit((sql) => sql.run(INSERT, ["a", "1"]));
    const first = lenders[0]!;
    first.memory().setFaultHook((point) => {
      if (point === "before-read") {
        first.own.close();
        throw new StoreClosed("the lending tab closed");
      }
    });
    const results = await store.read((sql) =>
      allOf(sql, [
        { sql: "SELECT value FROM meta WHERE key = 'a'" },
        { sql: "SELECT count(*) AS n FROM meta" },
      ]),
    );
    expect(results).toEqual([[{ value: "1" }], [{ n: 1 }]]);
    expect(store.relent).toHaveLength(1);
    await store.close();
  });
});

/** The client's end of `port`, every message it posts and hears recorded. */
function recorded(port: MessagePort, sent: LentRequest[], heard: LentReply[]): LentPort {
  port.addEventListener("message", (event) => heard.push(event.data as LentReply));
  return {
    postMessage(message) {
      sent.push(message as LentRequest);
      port.postMessage(message);
    },
    addEventListener: (type: "message" | "close", listener: (event: { data: unknown }) => void) =>
      port.addEventListener(type, listener as never),
    start: () => port.start(),
    close: () => port.close(),
  };
}

/** The steps of the job messages in `sent`. */
const stepsOf = (sent: LentRequest[]) => sent.flatMap((m) => (m.t === "job" ? m.steps : []));

describe("the wire of a commit", () => {
  test("a statement's text crosses once per port: repeated commits send its number; a new lender is sent the text again", async () => {
    const sent: LentRequest[] = [];
    const heard: LentReply[] = [];
    let current = lender();
    const lenders = [current];
    const store = await openLentStore({
      port: recorded(current.port, sent, heard),
      name: "numbered",
      async relend() {
        current = lender(lenders.at(-1)!.memory().image());
        lenders.push(current);
        return recorded(current.port, sent, heard);
      },
    });
    await store.migrate(schema);
    sent.length = 0;
    for (let i = 0; i < 10; i++) await store.commit((sql) => sql.run(INSERT, [`a${i}`, "x"]));
    const first = stepsOf(sent);
    expect(first).toHaveLength(10);
    expect(first.filter((s) => s.sql === INSERT)).toHaveLength(1);
    const number = first[0]!.s;
    expect(number).toEqual(expect.any(Number));
    expect(first.slice(1)).toEqual(
      Array.from({ length: 9 }, () => ({ s: number, params: expect.any(Array) })),
    );

    // The lender goes: the next one knows no numbers, and is sent the text once more.
    lenders[0]!.own.close();
    await expect.poll(() => store.relent.length).toBe(1);
    sent.length = 0;
    for (let i = 0; i < 5; i++) await store.commit((sql) => sql.run(INSERT, [`b${i}`, "x"]));
    const second = stepsOf(sent);
    expect(second.filter((s) => s.sql === INSERT)).toHaveLength(1);
    expect(second.filter((s) => s.sql === undefined)).toHaveLength(4);
    const rows = await store.read((sql) => sql.all("SELECT key FROM meta WHERE value = 'x' ORDER BY key"));
    expect(rows.map((r) => r["key"])).toEqual([
      ...Array.from({ length: 10 }, (_, i) => `a${i}`),
      ...Array.from({ length: 5 }, (_, i) => `b${i}`),
    ]);
    await store.close();
  });

  test("a message the door refused numbered nothing: the text crosses again with the next use", async () => {
    const store = await openLentStore({ port: lender().port, name: "refused" });
    await store.migrate(schema);
    // A boolean is no SQL value: the door refuses the whole message, the text's number with it.
    await expect(
      store.commit((sql) => sql.run(INSERT, [true as unknown as string, "x"])),
    ).rejects.toMatchObject({ name: "LentBadRequest" });
    await store.commit((sql) => sql.run(INSERT, ["after", "x"]));
    expect(await store.read((sql) => sql.all("SELECT key FROM meta WHERE value = 'x'"))).toEqual([
      { key: "after" },
    ]);
    await store.close();
  });

  test("a commit whose callback only writes is one message each way; its acknowledgement is the id alone", async () => {
    const sent: LentRequest[] = [];
    const heard: LentReply[] = [];
    const store = await openLentStore({ port: recorded(lender().port, sent, heard), name: "one-each" });
    await store.migrate(schema);
    await store.commit((sql) => sql.run(INSERT, ["warm", "x"]));
    sent.length = 0;
    heard.length = 0;
    for (let i = 0; i < 5; i++)
      await store.commit(async (sql) => {
        await sql.run(INSERT, [`k${i}`, "x"]);
        await sql.run("UPDATE meta SET value = ? WHERE key = ?", ["y", `k${i}`]);
      });
    expect(sent).toHaveLength(5);
    for (const message of sent)
      expect(message).toMatchObject({ t: "job", begin: "commit", end: "commit", seq: expect.any(Number) });
    expect(heard).toHaveLength(5);
    for (const reply of heard) expect(Object.keys(reply).sort()).toEqual(["id", "ok"]);
    await store.close();
  });

  test("the client takes only a reply of the reply schema (an ok reply is checked by hand)", async () => {
    const channel = new MessageChannel();
    const server = channel.port2;
    const asked: LentRequest[] = [];
    server.addEventListener("message", (event) => asked.push(event.data as LentRequest));
    server.start();
    const opening = openLentStore({ port: channel.port1, name: "picky" });
    await expect.poll(() => asked.length).toBe(1);
    const id = asked[0]!.id;
    // Each of these, taken, would settle the open with a schema version other than 3.
    for (const bad of [
      { id, ok: true, extra: 1 },
      { id, ok: true, schemaVersion: 1.5 },
      { id, ok: true, schemaVersion: "3" },
      { id, ok: true, wasmBytes: -1 },
      { id, ok: true, rows: [{ a: {} }] },
      { id, ok: true, rows: {} },
      { id: String(id), ok: true, schemaVersion: 3 },
      { id, ok: "yes", schemaVersion: 3 },
      { id, ok: false, error: { name: "StoreFailed" } },
    ])
      server.postMessage(bad);
    server.postMessage({ id, ok: true, schemaVersion: 3 });
    // Then the open reads the sequence number: a job with a row.
    await expect.poll(() => asked.length).toBe(2);
    server.postMessage({ id: asked[1]!.id, ok: true, rows: [{ application_id: 0 }] });
    const store = await opening;
    expect(store.schemaVersion).toBe(3);
    store.kill("done");
    server.close();
  });
});
