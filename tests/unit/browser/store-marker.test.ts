/**
 * The store's marker file (worker/browser/store-marker.ts): only a well-formed marker names a store;
 * anything else reads as no marker, so a stray file can never make a store look discarded. Where
 * OPFS is missing (Node here) there is no marker and writing one does nothing.
 */
import { describe, expect, test } from "vitest";
import { opfsMarker, parseMarker } from "../../../worker/browser/store-marker.ts";

describe("reading a marker", () => {
  test("a marker's fields, with and without its last export", () => {
    expect(parseMarker(JSON.stringify({ storeId: "a", createdAt: 5 }))).toEqual({
      storeId: "a",
      createdAt: 5,
    });
    expect(
      parseMarker(JSON.stringify({ storeId: "a", createdAt: 5, lastExport: { at: 9, fileName: "c.json" } })),
    ).toEqual({ storeId: "a", createdAt: 5, lastExport: { at: 9, fileName: "c.json" } });
  });

  test("anything else is not a marker", () => {
    for (const text of [
      "",
      "{",
      "null",
      "[]",
      '"a"',
      JSON.stringify({ storeId: "", createdAt: 5 }),
      JSON.stringify({ storeId: 3, createdAt: 5 }),
      JSON.stringify({ storeId: "a" }),
      JSON.stringify({ storeId: "a", createdAt: "5" }),
      JSON.stringify({ storeId: "a", createdAt: 5, lastExport: null }),
      JSON.stringify({ storeId: "a", createdAt: 5, lastExport: { at: 9 } }),
    ])
      expect(parseMarker(text), text).toBeUndefined();
  });
});

test("without OPFS there is no marker, and writing one does nothing", async () => {
  const marker = opfsMarker("idb", "default");
  await marker.write({ storeId: "a", createdAt: 1 });
  expect(await marker.read()).toBeUndefined();
});
