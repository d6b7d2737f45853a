/**
 * Noticing a store the browser discarded (worker/core/store-identity.ts): the verdict of a store
 * found at open against the marker outside it, and the store's identity, which is committed before
 * a marker may name it and survives a reopen.
 */
import { describe, expect, test } from "vitest";
import { schema } from "../../../worker/core/schema.ts";
import {
  ensureStoreId,
  judgeStore,
  readStoreId,
  type StoreMarker,
} from "../../../worker/core/store-identity.ts";
import { openStore } from "../../../worker/store/open.ts";

const marker: StoreMarker = { storeId: "store-a", createdAt: 1_700_000_000_000 };

describe("the verdict at open", () => {
  test("no marker: an empty store is new, a store with data is taken as it is (older than markers)", () => {
    expect(judgeStore({ schemaVersion: 0, storeId: undefined }, undefined)).toEqual({ kind: "new" });
    expect(judgeStore({ schemaVersion: 7, storeId: undefined }, undefined)).toEqual({ kind: "unmarked" });
    expect(judgeStore({ schemaVersion: 7, storeId: "store-b" }, undefined)).toEqual({ kind: "unmarked" });
  });

  test("the marker names this store: the same store", () => {
    expect(judgeStore({ schemaVersion: 7, storeId: "store-a" }, marker)).toEqual({
      kind: "same",
      storeId: "store-a",
    });
  });

  test("the marker names a store that is not here: discarded, whatever is here instead", () => {
    // The browser deleted the IndexedDB store: the open finds an empty one.
    expect(judgeStore({ schemaVersion: 0, storeId: undefined }, marker)).toEqual({
      kind: "discarded",
      marker,
      found: "empty",
    });
    // Something wrote to the empty store since (an engine that knew no markers): no identity.
    expect(judgeStore({ schemaVersion: 7, storeId: undefined }, marker)).toEqual({
      kind: "discarded",
      marker,
      found: "unnamed",
    });
    // Another store is here.
    expect(judgeStore({ schemaVersion: 7, storeId: "store-b" }, marker)).toEqual({
      kind: "discarded",
      marker,
      found: "other",
    });
  });
});

describe("the store's identity", () => {
  test("an empty store has none; a migrated one gets one in a commit, once, and keeps it across a reopen", async () => {
    const store = await openStore({ kind: "memory" });
    expect(await readStoreId(store)).toBeUndefined();
    await store.migrate(schema);
    expect(await readStoreId(store)).toBeUndefined();
    const commits = store.stats.commits;
    const id = await ensureStoreId(store, () => "store-x");
    expect(id).toBe("store-x");
    expect(store.stats.commits).toBe(commits + 1);
    // A second call keeps the first identity.
    expect(await ensureStoreId(store, () => "store-y")).toBe("store-x");
    const image = store.image();
    await store.close();

    const reopened = await openStore({ kind: "memory", image });
    await reopened.migrate(schema);
    expect(await readStoreId(reopened)).toBe("store-x");
    // The reopened store and a marker naming it: the same store.
    expect(
      judgeStore(
        { schemaVersion: reopened.schemaVersion, storeId: await readStoreId(reopened) },
        { storeId: "store-x", createdAt: 1 },
      ).kind,
    ).toBe("same");
    await reopened.close();
  });
});
