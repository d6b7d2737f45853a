/**
 * The commit line: one transaction per commit callback (a throwing one rolls back alone; grouping is
 * the engine's, see commit-line.test.ts), resolution only after COMMIT, reads in line order,
 * closing, the crash simulation, the schema the core hands over (migrations from every older
 * version), and the owner epoch.
 */
import { describe, expect, test } from "vitest";
import { SCHEMA_VERSION, schema } from "../../../worker/core/schema.ts";
import {
  defineTask,
  Harness,
  type Json,
  StoreClosed,
  StoreFailed,
  StoreOpenError,
} from "../../../worker/index.ts";
import { type MemoryStore, openStore } from "../../../worker/store/open.ts";
import type { FaultPoint, Sql } from "../../../worker/store/types.ts";
import { crashingStore, deferred, memoryStore } from "../../../worker/testing.ts";
import { complete, done, type Go, single } from "../core/fixtures.ts";

const insert = (key: string) => (sql: Sql) =>
  sql.run("INSERT INTO meta (key, value) VALUES (?, ?)", [key, `v-${key}`]);

async function keys(store: MemoryStore): Promise<string[]> {
  const rows = await store.read((sql) => sql.all("SELECT key FROM meta ORDER BY key"));
  return rows.map((r) => String(r["key"]));
}

describe("one transaction per commit", () => {
  test("100 concurrent commits run one transaction each, in order; a throwing callback rolls back alone", async () => {
    const store = await memoryStore();
    const before = { ...store.stats };
    const names = Array.from({ length: 100 }, (_, i) => `k${String(i).padStart(3, "0")}`);
    const results = await Promise.allSettled(
      names.map((name, i) =>
        store.commit(async (sql) => {
          await insert(name)(sql);
          if (i === 37) throw new Error("callback 37 fails after writing");
          return i;
        }),
      ),
    );
    const transactions = store.stats.transactions - before.transactions;
    const commits = store.stats.commits - before.commits;
    expect(commits).toBe(99);
    // The store groups nothing: the rolled-back one is not counted.
    expect(transactions).toBe(99);
    expect(results[37]).toMatchObject({
      status: "rejected",
      reason: { message: "callback 37 fails after writing" },
    });
    expect(
      results.filter((r) => r.status === "fulfilled").map((r) => (r as PromiseFulfilledResult<number>).value),
    ).toEqual(names.map((_, i) => i).filter((i) => i !== 37));
    expect(await keys(store)).toEqual(names.filter((_, i) => i !== 37));
    await store.close();
  });

  test("a callback throwing after writing loses only its own rows; the commits queued behind it commit", async () => {
    const store = await memoryStore();
    await store.commit(insert("before"));
    const before = store.stats.transactions;
    // Queued in one tick: the first fails after its write, the two behind it run in their own.
    const results = await Promise.allSettled([
      store.commit(async (sql) => {
        await insert("first")(sql);
        throw new Error("first fails after writing");
      }),
      store.commit(insert("second")),
      store.commit(insert("third")),
    ]);
    expect(results.map((r) => r.status)).toEqual(["rejected", "fulfilled", "fulfilled"]);
    expect(await keys(store)).toEqual(["before", "second", "third"]);
    expect(store.stats.transactions - before).toBe(2);
    await store.close();
  });

  test("a commit's promise resolves only after COMMIT returned", async () => {
    const store = await memoryStore();
    const seen: Array<{ point: FaultPoint; delivered: boolean }> = [];
    let delivered = false;
    store.setFaultHook((point) => {
      if (point !== "before-read") seen.push({ point, delivered });
    });
    const value = await store
      .commit(async (sql) => {
        await insert("a")(sql);
        return "value";
      })
      .then((v) => {
        delivered = true;
        return v;
      });
    expect(value).toBe("value");
    expect(seen).toEqual([
      { point: "before-begin", delivered: false },
      { point: "after-callback", delivered: false },
      { point: "before-commit", delivered: false },
      { point: "after-commit", delivered: false },
    ]);
    store.setFaultHook(undefined);
    await store.close();
  });

  test("reads queue behind commits and see committed rows", async () => {
    const store = await memoryStore();
    const committing = store.commit((sql) => insert("x")(sql));
    // Not awaited: the read is served after the commit requested before it.
    expect(await keys(store)).toEqual(["x"]);
    await committing;
    await store.commit((sql) => insert("y")(sql));
    expect(await keys(store)).toEqual(["x", "y"]);
    expect(store.stats.reads).toBeGreaterThanOrEqual(2);
    await store.close();
  });
});

describe("cached statements", () => {
  test("values round-trip through bound parameters and result columns", async () => {
    const store = await memoryStore();
    await store.commit((sql) => sql.run("CREATE TABLE v (id INTEGER PRIMARY KEY, x)"));
    const long = `{"text":"${"ü€😀 ".repeat(3000)}"}`;
    const values = [
      0,
      -7,
      2_147_483_648,
      1_795_992_501_945,
      Number.MAX_SAFE_INTEGER,
      0.5,
      -1e-9,
      "",
      "plain",
      "ü€😀 and a NUL-free tail",
      long,
      null,
      new Uint8Array([0, 1, 2, 255]),
    ];
    await store.commit(async (sql) => {
      for (const [i, x] of values.entries()) await sql.run("INSERT INTO v (id, x) VALUES (?, ?)", [i, x]);
      await sql.run("INSERT INTO v (id, x) VALUES (?, ?)", [values.length, 12n]);
    });
    const rows = await store.read((sql) => sql.all("SELECT id, x FROM v ORDER BY id"));
    expect(rows.map((r) => r["x"])).toEqual([...values, 12]);
    expect(rows.map((r) => r["id"])).toEqual([...values.keys(), values.length]);
    await store.close();
  });

  test("a statement that failed runs again in a later commit (with and without parameters)", async () => {
    const store = await memoryStore();
    const plain = "INSERT INTO meta (key, value) VALUES ('same', 'x')";
    const bound = "INSERT INTO meta (key, value) VALUES (?, 'y')";
    await store.commit((sql) => sql.run(plain));
    await store.commit((sql) => sql.run(bound, ["b"]));
    await expect(store.commit((sql) => sql.run(plain))).rejects.toThrow(/UNIQUE/);
    await expect(store.commit((sql) => sql.run(bound, ["b"]))).rejects.toThrow(/UNIQUE/);
    await store.commit(async (sql) => {
      await sql.run("DELETE FROM meta");
      await sql.run(plain);
      await sql.run(bound, ["b"]);
    });
    expect(await keys(store)).toEqual(["b", "same"]);
    await store.close();
  });
});

describe("text run once (execOnce)", () => {
  test("runs inside the job being served: stored with its commit, rolled back with it; a failure throws SQLite's message", async () => {
    const store = await openStore({ kind: "memory", name: "once" });
    const appId = async () =>
      Number((await store.read((sql) => sql.get("PRAGMA application_id")))?.["application_id"]);
    await store.commit(async () => store.execOnce("PRAGMA application_id = 41"));
    expect(await appId()).toBe(41);
    await expect(
      store.commit(async () => {
        await store.execOnce("PRAGMA application_id = 42");
        throw new Error("the callback fails");
      }),
    ).rejects.toThrow("the callback fails");
    expect(await appId()).toBe(41);
    await expect(store.commit(() => store.execOnce("PRAGMA application_id = 1 2"))).rejects.toThrow(
      /syntax error/,
    );
    await store.close();
    await expect(store.execOnce("PRAGMA application_id = 43")).rejects.toBeInstanceOf(StoreClosed);
  });
});

describe("closing", () => {
  test("admitted commits settle; later calls reject with StoreClosed", async () => {
    const store = await memoryStore();
    const admitted = store.commit((sql) => insert("admitted")(sql).then(() => "ok"));
    const closing = store.close();
    await expect(admitted).resolves.toBe("ok");
    await closing;
    expect(store.closed).toBe(true);
    await expect(store.commit((sql) => insert("late")(sql))).rejects.toBeInstanceOf(StoreClosed);
    await expect(store.read((sql) => sql.all("SELECT 1"))).rejects.toBeInstanceOf(StoreClosed);
  });

  test("abandon after kill waits for the job in flight, then releases the connection without storing its writes; an open line refuses it", async () => {
    const store = await memoryStore();
    await store.commit(insert("kept"));
    await expect(store.abandon()).rejects.toBeInstanceOf(StoreFailed);
    const started = deferred();
    const held = deferred();
    const inFlight = store.commit(async (sql) => {
      await insert("lost")(sql);
      started.resolve();
      await held.promise;
    });
    await started.promise;
    store.kill("killed by the test");
    // Called while the job in flight still waits: the release waits for it to end.
    const abandoned = store.abandon();
    held.resolve();
    await expect(inFlight).rejects.toBeInstanceOf(StoreClosed);
    await abandoned;
    const reopened = await openStore({ kind: "memory", image: store.image() });
    expect(await keys(reopened)).toEqual(["kept"]);
    await reopened.close();
    // A line that close() released has nothing left to abandon.
    await reopened.abandon();
  });
});

describe("crashingStore", () => {
  test("after COMMIT of transaction 3: every later call is refused, recover() holds exactly rows 1-3", async () => {
    const cs = await crashingStore({ at: 3 });
    const outcomes: string[] = [];
    for (const k of ["r1", "r2", "r3", "r4", "r5"]) {
      try {
        await cs.store.commit((sql) => insert(k)(sql));
        outcomes.push(`${k}:ok`);
      } catch (error) {
        outcomes.push(`${k}:${(error as Error).name}`);
      }
    }
    expect(outcomes).toEqual(["r1:ok", "r2:ok", "r3:StoreClosed", "r4:StoreClosed", "r5:StoreClosed"]);
    expect(cs.hasCrashed).toBe(true);
    await cs.crashed;
    await expect(cs.store.read((sql) => sql.all("SELECT key FROM meta"))).rejects.toBeInstanceOf(StoreClosed);
    const recovered = await cs.recover();
    expect(await keys(recovered)).toEqual(["r1", "r2", "r3"]);
    await recovered.close();
  });

  test("before COMMIT of transaction 3: the recovered store rolled it back (rows 1-2)", async () => {
    const cs = await crashingStore({ at: 3, point: "before-commit" });
    await cs.store.commit((sql) => insert("r1")(sql));
    await cs.store.commit((sql) => insert("r2")(sql));
    await expect(cs.store.commit((sql) => insert("r3")(sql))).rejects.toBeInstanceOf(StoreClosed);
    await expect(cs.store.commit((sql) => insert("r4")(sql))).rejects.toBeInstanceOf(StoreClosed);
    const recovered = await cs.recover();
    expect(await keys(recovered)).toEqual(["r1", "r2"]);
    await recovered.close();
  });

  test("a crash after the COMMIT of an engine's group: its commits are all stored, none delivered", async () => {
    // Transaction 1 creates the root conversation, 2 writes r1, 3 is the group.
    const cs = await crashingStore({ at: 3 });
    const h = await Harness.open(cs.store, { onFatal: () => undefined });
    await h.transaction((tx) => tx.writeDoc(1, "test.r1", 1));
    expect(cs.store.stats.transactions).toBe(2);
    // Requested together: one group, one transaction, which the crash cuts right after its COMMIT.
    const grouped = await Promise.allSettled(
      ["g1", "g2", "g3"].map((k) => h.transaction((tx) => tx.writeDoc(1, `test.${k}`, 1))),
    );
    expect(grouped.map((r) => r.status)).toEqual(["rejected", "rejected", "rejected"]);
    await h.close().catch(() => undefined);
    const recovered = await Harness.open(await cs.recover());
    const stored = await Promise.all(["r1", "g1", "g2", "g3"].map((k) => recovered.doc(1, `test.${k}`)));
    expect(stored).toEqual([1, 1, 1, 1]);
    await recovered.close();
  });
});

describe("transactions larger than the page cache", () => {
  const MB = 1 << 20;
  /** Row i of a big write: deterministic, varied text, so a misplaced page shows up as a mismatch. */
  const body = (i: number, size: number) => {
    let text = "";
    for (let k = 0; text.length < size; k++) text += `row ${i} ${k.toString(36)};`;
    return text.slice(0, size);
  };
  const bigWrite = (first: number, sizes: number[]) => async (sql: Sql) => {
    await sql.run("CREATE TABLE IF NOT EXISTS big (id INTEGER PRIMARY KEY, body TEXT NOT NULL)");
    for (const [i, size] of sizes.entries())
      await sql.run("INSERT INTO big (id, body) VALUES (?, ?)", [first + i, body(first + i, size)]);
  };
  async function bigRows(store: MemoryStore): Promise<{ rows: number; bytes: number; intact: boolean }> {
    const rows = await store.read((sql) => sql.all("SELECT id, body FROM big ORDER BY id"));
    let bytes = 0;
    let intact = true;
    for (const row of rows) {
      const text = String(row["body"]);
      bytes += text.length;
      if (text !== body(Number(row["id"]), text.length)) intact = false;
    }
    return { rows: rows.length, bytes, intact };
  }

  test("a 6 MB transaction, 100 commits, a reopen and a second big transaction all read back", async () => {
    const store = await memoryStore();
    await store.commit(bigWrite(0, [MB, MB, MB, MB, MB, MB]));
    for (let i = 0; i < 100; i++) await store.commit(insert(`a${String(i).padStart(3, "0")}`));
    const reopened = await memoryStore(store.image());
    await store.close();
    expect(await bigRows(reopened)).toEqual({ rows: 6, bytes: 6 * MB, intact: true });
    // Another shape of big transaction on the reopened store: its journal lands on the first one's
    // at other offsets.
    await reopened.commit(
      bigWrite(
        6,
        Array.from({ length: 11 }, (_, i) => (i < 10 ? 300_001 : 777 + 145_718)),
      ),
    );
    for (let i = 0; i < 100; i++) await reopened.commit(insert(`b${String(i).padStart(3, "0")}`));
    const again = await memoryStore(reopened.image());
    await reopened.close();
    expect(await bigRows(again)).toEqual({ rows: 17, bytes: 6 * MB + 3 * MB + 777, intact: true });
    expect((await keys(again)).filter((k) => /^[ab]\d{3}$/.test(k))).toHaveLength(200);
    await again.close();
  });

  test("a crash right after a 6 MB commit keeps it whole; the recovered store commits on", async () => {
    const cs = await crashingStore({ at: 2 });
    await cs.store.commit(insert("before"));
    await expect(cs.store.commit(bigWrite(0, [MB, MB, MB, MB, MB, MB]))).rejects.toBeInstanceOf(StoreClosed);
    const recovered = await cs.recover();
    expect(await bigRows(recovered)).toEqual({ rows: 6, bytes: 6 * MB, intact: true });
    for (let i = 0; i < 100; i++) await recovered.commit(insert(`c${String(i).padStart(3, "0")}`));
    const recoveredKeys = await keys(recovered);
    expect(recoveredKeys).toContain("before");
    expect(recoveredKeys.filter((k) => /^c\d{3}$/.test(k))).toHaveLength(100);
    await recovered.close();
  });
});

describe("the schema the core hands over", () => {
  test("a store opens schema-agnostic: no table until the core's migrations are handed over", async () => {
    const store = await openStore({ kind: "memory" });
    expect(store.schemaVersion).toBe(0);
    const tables = async () =>
      (await store.read((sql) => sql.all("SELECT name FROM sqlite_master WHERE type = 'table'"))).length;
    expect(await tables()).toBe(0);
    await store.migrate(schema);
    expect(store.schemaVersion).toBe(SCHEMA_VERSION);
    expect(await tables()).toBeGreaterThan(0);
    // Handing it over again is free: nothing runs.
    const before = { ...store.stats };
    await store.migrate(schema);
    expect(store.stats).toEqual(before);
    await store.close();
  });

  test("a store of every older version opens at the current schema and runs the engine", async () => {
    expect(SCHEMA_VERSION).toBeGreaterThanOrEqual(1);
    for (let from = 0; from < SCHEMA_VERSION; from++) {
      const old = await memoryStore(undefined, { schemaVersion: from });
      expect(old.schemaVersion).toBe(from);
      const version = async (s: MemoryStore) =>
        Number((await s.read((sql) => sql.get("PRAGMA user_version")))?.["user_version"]);
      expect(await version(old)).toBe(from);
      const image = old.image();
      await old.close();

      // Opened as the engine opens it: the store alone, then the harness hands it the core's schema.
      const store = await openStore({ kind: "memory", image });
      expect(store.schemaVersion).toBe(from);
      const h = await Harness.open(store);
      expect(store.schemaVersion).toBe(SCHEMA_VERSION);
      expect(await version(store)).toBe(SCHEMA_VERSION);
      const tables = (
        await store.read((sql) =>
          sql.all("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"),
        )
      ).map((r) => r["name"]);
      expect(tables).toEqual(
        expect.arrayContaining([
          "conversations",
          "doc_patches",
          "documents",
          "entries",
          "meta",
          "submissions",
          "tasks",
        ]),
      );
      const id = await h.transaction((tx) => tx.appendEntry(1, { kind: "note", data: `from v${from}` }).id);
      expect(id).toBe(1);
      await h.close();
    }
  });

  test("a store of every older version keeps the rows of its conversations, entries and submissions tables when it opens at the current schema, a settled submission with a requestId among them (draw 39b)", async () => {
    // Draw 39b: the named test opened only empty older stores; a later migration clearing settled
    // submissions passed it and every migration test.
    const current = await memoryStore();
    const made = await Harness.open(current);
    await made.transaction((tx) => {
      const other = tx.createConversation({ kind: "ownerless" });
      const entry = tx.appendEntry(1, { kind: "note", data: "kept" });
      tx.appendEntry(other.id, { kind: "note", data: "kept too" });
      tx.createSubmission({
        conversationId: 1,
        type: "write",
        status: "done",
        entry: entry.id,
        requestId: "r1",
      });
      tx.createSubmission({ conversationId: other.id, type: "write", status: "queued" });
    });
    await made.close();
    const tables = ["conversations", "entries", "submissions"] as const;
    const ids = async (s: MemoryStore, table: string) =>
      (await s.read((sql) => sql.all(`SELECT id FROM ${table} ORDER BY id`))).map((r) => r["id"]);
    const expected = new Map<string, unknown[]>();
    const rows = new Map<string, Record<string, unknown>[]>();
    const source = await memoryStore(current.image());
    for (const table of tables) {
      expected.set(table, await ids(source, table));
      rows.set(table, await source.read((sql) => sql.all(`SELECT * FROM ${table}`)));
    }
    await source.close();
    expect(expected.get("submissions")).toHaveLength(2);
    for (let from = 1; from < SCHEMA_VERSION; from++) {
      const old = await memoryStore(undefined, { schemaVersion: from });
      await old.commit(async (sql) => {
        for (const table of tables) {
          const columns = new Set(
            (await sql.all(`PRAGMA table_info(${table})`)).map((c) => String(c["name"])),
          );
          for (const row of rows.get(table)!) {
            const kept = Object.keys(row).filter((c) => columns.has(c));
            await sql.run(
              `INSERT INTO ${table} (${kept.join(", ")}) VALUES (${kept.map(() => "?").join(", ")})`,
              kept.map((c) => row[c] as never),
            );
          }
        }
      });
      const image = old.image();
      await old.close();
      const store = await openStore({ kind: "memory", image });
      const h = await Harness.open(store);
      expect(store.schemaVersion).toBe(SCHEMA_VERSION);
      for (const table of tables)
        expect([from, table, await ids(store, table)]).toEqual([from, table, expected.get(table)]);
      await h.close();
    }
  });

  test("a store of every older version keeps the rows of its tasks table, a terminal task among them, when it opens at the current schema (draw 39e)", async () => {
    // Draw 39e, 5: every named older store held no task; a later migration clearing the terminal
    // tasks passed the named tests.
    const quick = defineTask<Json, Go, Json>(
      single("kept-quick", async (_t, runtime) => void (await runtime.commit(() => complete("q")))),
    );
    const current = await memoryStore();
    const made = await Harness.open(current, { tasks: [quick] });
    const finished = await made.createTask(quick, null, { ownership: { kind: "conversation" } });
    await done(made, finished);
    await made.close();
    const source = await memoryStore(current.image());
    const rows = await source.read((sql) => sql.all("SELECT * FROM tasks ORDER BY id"));
    await source.close();
    expect(rows.map((r) => r["status"])).toEqual(["terminal"]);
    for (let from = 1; from < SCHEMA_VERSION; from++) {
      const old = await memoryStore(undefined, { schemaVersion: from });
      await old.commit(async (sql) => {
        const columns = new Set((await sql.all("PRAGMA table_info(tasks)")).map((c) => String(c["name"])));
        for (const row of rows) {
          const kept = Object.keys(row).filter((c) => columns.has(c));
          await sql.run(
            `INSERT INTO tasks (${kept.join(", ")}) VALUES (${kept.map(() => "?").join(", ")})`,
            kept.map((c) => row[c] as never),
          );
        }
      });
      const image = old.image();
      await old.close();
      const store = await openStore({ kind: "memory", image });
      const h = await Harness.open(store, { tasks: [quick] });
      expect(store.schemaVersion).toBe(SCHEMA_VERSION);
      const ids = (await store.read((sql) => sql.all("SELECT id FROM tasks ORDER BY id"))).map(
        (r) => r["id"],
      );
      expect([from, ids]).toEqual([from, [finished]]);
      await h.close();
    }
  });

  test("a store whose schema is newer than this build refuses to open (StoreOpenError, migration) and is closed", async () => {
    const store = await memoryStore();
    await store.commit((sql) => sql.run(`PRAGMA user_version = ${SCHEMA_VERSION + 1}`));
    const image = store.image();
    await store.close();
    const newer = await openStore({ kind: "memory", image });
    const opening = Harness.open(newer);
    await expect(opening).rejects.toBeInstanceOf(StoreOpenError);
    await expect(opening).rejects.toMatchObject({ reason: "migration" });
    expect(newer.closed).toBe(true);
  });
});

describe("the owner epoch", () => {
  test("after another engine bumps the owner epoch, the fenced line refuses its next write and stops", async () => {
    const store = await memoryStore();
    expect(await store.fence()).toBe(1);
    await store.commit((sql) => sql.run("INSERT INTO meta (key, value) VALUES ('mine', 'before')"));
    // What a newcomer's fence writes into the same database.
    await store.commit((sql) => sql.run("UPDATE meta SET value = '2' WHERE key = 'epoch'"));
    const late = store.commit((sql) => sql.run("UPDATE meta SET value = 'after' WHERE key = 'mine'"));
    await expect(late).rejects.toThrow(StoreClosed);
    await expect(late).rejects.toThrow(/another engine has taken over/);
    await expect(store.read((sql) => sql.get("SELECT 1 AS one"))).rejects.toThrow(StoreClosed);
    const newcomer = await memoryStore(store.image());
    const meta = await newcomer.read((sql) => sql.all("SELECT key, value FROM meta ORDER BY key"));
    expect(meta).toEqual([
      { key: "epoch", value: "2" },
      { key: "mine", value: "before" },
    ]);
    expect(await newcomer.fence()).toBe(3);
    await newcomer.close();
  });

  const epochOf = async (store: MemoryStore) =>
    (await store.read((sql) => sql.get("SELECT value FROM meta WHERE key = 'epoch'")))?.["value"];

  test("a fence on the first commit bumps the epoch inside that commit, not before it, and then fences", async () => {
    const store = await memoryStore();
    store.fenceOnFirstCommit();
    expect(await epochOf(store)).toBeUndefined();
    expect(store.epoch).toBeUndefined();
    const transactions = store.stats.transactions;
    await store.commit(insert("mine"));
    expect(store.stats.transactions).toBe(transactions + 1);
    expect(await epochOf(store)).toBe("1");
    expect(store.epoch).toBe(1);
    // Later transactions check it and bump nothing.
    await store.commit(insert("again"));
    expect(await epochOf(store)).toBe("1");
    // What a newcomer's fence writes: the next write of this line is refused and the line stops.
    await store.commit((sql) => sql.run("UPDATE meta SET value = '2' WHERE key = 'epoch'"));
    await expect(store.commit(insert("late"))).rejects.toThrow(/another engine has taken over/);
    expect(await keys(await memoryStore(store.image()))).toEqual(["again", "epoch", "mine"]);
  });

  test("a first commit that fails takes its epoch bump with it; the next commit carries the fence", async () => {
    const store = await memoryStore();
    store.fenceOnFirstCommit();
    let failOnce = true;
    store.setFaultHook((point) => {
      if (point !== "before-commit" || !failOnce) return;
      failOnce = false;
      throw new Error("disk is full");
    });
    await expect(store.commit(insert("lost"))).rejects.toThrow(/disk is full/);
    expect(store.epoch).toBeUndefined();
    expect(await epochOf(store)).toBeUndefined();
    await store.commit(insert("kept"));
    expect(store.epoch).toBe(1);
    expect(await epochOf(store)).toBe("1");
    expect(await keys(store)).toEqual(["epoch", "kept"]);
    await store.close();
  });
});
