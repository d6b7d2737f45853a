/**
 * The lent store (worker/store/lent.ts) beyond the conformance suite: its door refuses what it does
 * not expect, and a lender lost mid-commit (its port closes, as when the lending tab closes) hands
 * the store to a new lender without losing an acknowledged commit or storing one twice: the commit
 * whose reply was lost is found stored by its sequence number, or sent again when it was not.
 * Lenders here are memory stores behind real MessageChannels; a lender dies by closing its port at a
 * fault point of its own commit line, and the next one opens the files the dead one left.
 */
import { describe, expect, test } from "vitest";
import { schema } from "../../../worker/core/schema.ts";
import { openLentStore, serveLentStore } from "../../../worker/store/lent.ts";
import { type MemoryImage, type MemoryStore, openStore } from "../../../worker/store/open.ts";
import { allOf, type FaultPoint, StoreClosed } from "../../../worker/store/types.ts";

const INSERT = "INSERT INTO meta (key, value) VALUES (?, ?)";

interface Lender {
  port: MessagePort;
  /** The lender's own end (closing it is the lender dying). */
  own: MessagePort;
  memory(): MemoryStore;
}

function lender(image?: MemoryImage, options: { wasmBytes?: number } = {}): Lender {
  const channel = new MessageChannel();
  let memory: MemoryStore | undefined;
  const { wasmBytes } = options;
  void serveLentStore(channel.port2, {
    async open(name) {
      memory = await openStore({ kind: "memory", name, ...(image ? { image } : {}) });
      return memory;
    },
    ...(wasmBytes === undefined ? {} : { memory: () => wasmBytes }),
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
    port.postMessage({ t: "open", id: 9, name: "door" });
    await expect.poll(() => replies.length).toBe(badSteps.length + 4);
    expect(replies[0]).toMatchObject({ id: 7, ok: false, error: { name: "LentBadRequest" } });
    expect(replies[1]).toMatchObject({ id: 8, ok: false, error: { name: "LentBadRequest" } });
    badSteps.forEach((_, i) => {
      expect(replies[2 + i]).toMatchObject({ id: 100 + i, ok: false, error: { name: "LentBadRequest" } });
    });
    expect(replies.at(-2)).toMatchObject({ id: 200, ok: false, error: { name: "LentBadRequest" } });
    expect(replies.at(-1)).toMatchObject({ id: 9, ok: true, schemaVersion: 0 });
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
