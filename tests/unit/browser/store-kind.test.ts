/**
 * The SharedWorker's store kind (worker/browser/store-kind.ts, decision 0015): an existing store keeps
 * its kind (a profile from the build before opens its IndexedDB store as idb; an idb store the browser
 * discarded is still judged by its marker), only a new store gets opfs-lent, and it falls back to idb
 * only when the lent worker has no OPFS sync access handles. The browser's side (IndexedDB's list of
 * databases, the markers in OPFS) is faked here; the e2e tests (tests/e2e/store-kind.test.ts) run it.
 */
import { afterEach, describe, expect, test, vi } from "vitest";
import type { HostPlatform } from "../../../worker/browser/platform.ts";
import {
  chooseStoreKind,
  choosingPlatform,
  type KindEvidence,
  readKindEvidence,
  requestedStoreKind,
} from "../../../worker/browser/store-kind.ts";
import { StoreOpenError } from "../../../worker/store/types.ts";
import { deferred, memoryStore, until } from "../../../worker/testing.ts";

const none: KindEvidence = { idbDatabase: false, idbMarker: false, opfsLentMarker: false, opfs: true };

describe("choosing the kind", () => {
  test("a new store where OPFS exists: opfs-lent, falling back to idb", () => {
    expect(chooseStoreKind(none)).toMatchObject({ kind: "opfs-lent", fallback: true });
  });

  test("a store in IndexedDB from a build before (its database, with or without its marker) stays idb", () => {
    expect(chooseStoreKind({ ...none, idbDatabase: true }).kind).toBe("idb");
    expect(chooseStoreKind({ ...none, idbDatabase: true, idbMarker: true }).kind).toBe("idb");
  });

  test("an idb store the browser discarded (its marker left, its database gone) stays idb, so the discard is reported", () => {
    expect(chooseStoreKind({ ...none, idbMarker: true }).kind).toBe("idb");
  });

  test("an opfs-lent store (its marker) stays opfs-lent with no fallback, even beside a stray IndexedDB database", () => {
    expect(chooseStoreKind({ ...none, opfsLentMarker: true })).toMatchObject({
      kind: "opfs-lent",
      fallback: false,
    });
    expect(chooseStoreKind({ ...none, opfsLentMarker: true, idbDatabase: true }).kind).toBe("opfs-lent");
    // Both markers: the IndexedDB store is the one a build before this choice used.
    expect(chooseStoreKind({ ...none, opfsLentMarker: true, idbMarker: true }).kind).toBe("idb");
  });

  test("what cannot be told apart safely is idb: no list of databases, or no OPFS", () => {
    expect(chooseStoreKind({ ...none, idbDatabase: undefined }).kind).toBe("idb");
    expect(chooseStoreKind({ ...none, opfs: false }).kind).toBe("idb");
  });

  test("a page forces only a kind it names", () => {
    expect(requestedStoreKind(new URLSearchParams("storeKind=idb"))).toBe("idb");
    expect(requestedStoreKind(new URLSearchParams("storeKind=opfs-lent"))).toBe("opfs-lent");
    expect(requestedStoreKind(new URLSearchParams("storeKind=opfs"))).toBeUndefined();
    expect(requestedStoreKind(new URLSearchParams(""))).toBeUndefined();
  });
});

describe("reading the evidence from the browser", () => {
  afterEach(() => {
    vi.unstubAllGlobals();
  });

  /** OPFS holding these marker files, and IndexedDB holding these databases. */
  function fakeBrowser(markers: Record<string, string>, databases: string[] | undefined) {
    const file = (name: string) => {
      const text = markers[name];
      if (text === undefined) throw new DOMException("no such file", "NotFoundError");
      return { getFile: async () => ({ text: async () => text }) };
    };
    const dir = { getFileHandle: async (name: string) => file(name) };
    const root = { getDirectoryHandle: async () => dir };
    vi.stubGlobal("navigator", { storage: { getDirectory: async () => root } });
    vi.stubGlobal(
      "indexedDB",
      databases ? { databases: async () => databases.map((name) => ({ name, version: 1 })) } : {},
    );
  }
  const marker = JSON.stringify({ storeId: "x", createdAt: 1 });

  test("an IndexedDB database of the store's name, and each kind's marker", async () => {
    fakeBrowser({ "idb-agent.json": marker }, ["agent", "other"]);
    expect(await readKindEvidence("agent")).toEqual({
      idbDatabase: true,
      idbMarker: true,
      opfsLentMarker: false,
      opfs: true,
    });
    fakeBrowser({ "opfs-lent-agent.json": marker }, ["other"]);
    expect(await readKindEvidence("agent")).toEqual({
      idbDatabase: false,
      idbMarker: false,
      opfsLentMarker: true,
      opfs: true,
    });
  });

  test("the probes run at once: the markers are read while IndexedDB's list is still on its way (the lock is held meanwhile)", async () => {
    fakeBrowser({ "opfs-lent-agent.json": marker }, []);
    const listed = deferred<Array<{ name: string; version: number }>>();
    let reads = 0;
    const root = {
      getDirectoryHandle: async () => ({
        getFileHandle: async (name: string) => {
          reads++;
          if (name !== "opfs-lent-agent.json") throw new DOMException("no such file", "NotFoundError");
          return { getFile: async () => ({ text: async () => marker }) };
        },
      }),
    };
    vi.stubGlobal("navigator", { storage: { getDirectory: async () => root } });
    vi.stubGlobal("indexedDB", { databases: () => listed.promise });
    const evidence = readKindEvidence("agent");
    await until(() => reads === 2, { what: "both markers read before the list came" });
    listed.resolve([]);
    expect(await evidence).toEqual({
      idbDatabase: false,
      idbMarker: false,
      opfsLentMarker: true,
      opfs: true,
    });
  });

  test("a browser that cannot list its databases says so (undefined), and a file that is not a marker is none", async () => {
    fakeBrowser({ "idb-agent.json": "not json" }, undefined);
    const warn = vi.spyOn(console, "warn").mockImplementation(() => undefined);
    expect(await readKindEvidence("agent")).toEqual({
      idbDatabase: undefined,
      idbMarker: false,
      opfsLentMarker: false,
      opfs: true,
    });
    warn.mockRestore();
  });

  test("without OPFS or IndexedDB (Node): nothing to go on, so idb", async () => {
    const evidence = await readKindEvidence("agent");
    expect(evidence).toEqual({
      idbDatabase: undefined,
      idbMarker: false,
      opfsLentMarker: false,
      opfs: false,
    });
    expect(chooseStoreKind(evidence).kind).toBe("idb");
  });
});

describe("the platform that chooses at open", () => {
  /** A platform of `kind` whose open gives a memory store, or fails with `error`. */
  function platform(kind: "idb" | "opfs-lent", opened: string[], error?: Error): HostPlatform {
    return {
      storeKind: kind,
      storeName: "agent",
      build: "b",
      jspi: kind === "idb",
      openStore: async () => {
        opened.push(kind);
        if (error) throw error;
        return memoryStore();
      },
      openScratchStore: async () => memoryStore(),
      deleteScratchStore: async () => undefined,
    };
  }

  test("a new store opens opfs-lent, and the platform then says opfs-lent", async () => {
    const opened: string[] = [];
    const p = choosingPlatform({
      platforms: { idb: platform("idb", opened), "opfs-lent": platform("opfs-lent", opened) },
      decide: async () => chooseStoreKind(none),
    });
    const store = await p.openStore();
    expect(opened).toEqual(["opfs-lent"]);
    expect(p.storeKind).toBe("opfs-lent");
    expect(p.jspi).toBe(false);
    expect(p.choice?.kind).toBe("opfs-lent");
    await store.close();
  });

  test("a lent worker without OPFS sync access handles: the new store opens as idb instead", async () => {
    const opened: string[] = [];
    const unsupported = new StoreOpenError("this browser has no OPFS sync access handles", "unsupported", "");
    const p = choosingPlatform({
      platforms: { idb: platform("idb", opened), "opfs-lent": platform("opfs-lent", opened, unsupported) },
      decide: async () => chooseStoreKind(none),
    });
    const store = await p.openStore();
    expect(opened).toEqual(["opfs-lent", "idb"]);
    expect(p.storeKind).toBe("idb");
    expect(p.choice).toMatchObject({
      kind: "idb",
      why: expect.stringContaining("no OPFS sync access handles"),
    });
    await store.close();
  });

  test("any other failure of a new store, or an existing opfs-lent store's failure, is reported, never hidden by idb", async () => {
    for (const [evidence, error] of [
      [none, new StoreOpenError("disk I/O error", "unknown", "")],
      [none, new Error("the tab did not answer")],
      [{ ...none, opfsLentMarker: true }, new StoreOpenError("no sync access handles", "unsupported", "")],
    ] as const) {
      const opened: string[] = [];
      const p = choosingPlatform({
        platforms: { idb: platform("idb", opened), "opfs-lent": platform("opfs-lent", opened, error) },
        decide: async () => chooseStoreKind(evidence),
      });
      await expect(p.openStore()).rejects.toBe(error);
      expect(opened).toEqual(["opfs-lent"]);
    }
  });

  test("an existing idb store opens as idb without trying OPFS", async () => {
    const opened: string[] = [];
    const p = choosingPlatform({
      platforms: { idb: platform("idb", opened), "opfs-lent": platform("opfs-lent", opened) },
      decide: async () => chooseStoreKind({ ...none, idbDatabase: true }),
    });
    const store = await p.openStore();
    expect(opened).toEqual(["idb"]);
    expect(p.storeKind).toBe("idb");
    await store.close();
  });
});
