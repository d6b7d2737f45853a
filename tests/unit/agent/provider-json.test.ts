/**
 * `providerJson` (records.ts): a provider's message made strict JSON where it enters, as the JSON
 * round trip makes it. Plain data is copied directly (its undefined members dropped); anything the
 * round trip would change otherwise takes the round trip, so the result is the same either way.
 */
import { describe, expect, test } from "vitest";
import { providerJson } from "../../../worker/agent/records.ts";

const roundTrip = (v: unknown): unknown => JSON.parse(JSON.stringify(v));

describe("providerJson", () => {
  test("plain data: a fresh copy without its undefined members, equal to the JSON round trip", () => {
    const message = {
      role: "assistant",
      content: [
        { type: "toolCall", id: "c1", name: "t", arguments: { n: 1, deep: { a: [1, "x", null, true] } } },
      ],
      errorMessage: undefined,
      responseId: undefined,
      usage: { input: 1, output: 2, cost: { total: 0.5 } },
      nothing: Object.assign(Object.create(null), { a: 1, b: undefined }),
    };
    const copy = providerJson(message);
    expect(copy).toStrictEqual(roundTrip(message));
    expect(Object.hasOwn(copy, "errorMessage")).toBe(false);
    expect(copy).not.toBe(message);
    expect(copy.content[0]).not.toBe(message.content[0]);
    expect(copy.content[0]!.arguments).not.toBe(message.content[0]!.arguments);
  });

  test("the direct copy is frozen all the way down: the engine made it strict JSON, so committing it walks it no more", () => {
    const message = {
      role: "assistant",
      content: [{ type: "text", text: "hi" }],
      usage: { cost: { total: 1 } },
    };
    const copy = providerJson(message);
    expect(Object.isFrozen(copy)).toBe(true);
    expect(Object.isFrozen(copy.content)).toBe(true);
    expect(Object.isFrozen(copy.content[0])).toBe(true);
    expect(Object.isFrozen(copy.usage.cost)).toBe(true);
    // The caller's value is left as it was.
    expect(Object.isFrozen(message)).toBe(false);
    expect(Object.isFrozen(message.content[0])).toBe(false);
  });

  test("what is not plain data takes the round trip: a Date, a class instance, NaN, -0, a hole, an undefined item, a function, toJSON", () => {
    class Point {
      constructor(
        readonly x: number,
        readonly y: number,
      ) {}
    }
    const sparse: number[] = [1, 2, 3];
    delete sparse[1];
    const values: unknown[] = [
      { at: new Date(0) },
      { p: new Point(1, 2) },
      { n: Number.NaN, i: Number.POSITIVE_INFINITY },
      { z: -0 },
      { a: sparse },
      { a: [1, undefined, 3] },
      { f: () => 1, keep: 1 },
      { t: { toJSON: () => "custom" } },
      { m: new Map([[1, 2]]) },
      { [Symbol("s")]: 1, keep: 2 },
      {
        get g() {
          return 5;
        },
      },
    ];
    for (const value of values) expect(providerJson(value)).toStrictEqual(roundTrip(value));
    expect(Object.is((providerJson({ z: -0 }) as { z: number }).z, 0)).toBe(true);
  });

  test("an own __proto__ member is kept as a member, as JSON.parse keeps it", () => {
    const value = JSON.parse('{"__proto__": {"x": 1}, "y": 2}') as Record<string, unknown>;
    const copy = providerJson(value);
    expect(Object.getPrototypeOf(copy)).toBe(Object.prototype);
    expect(Object.hasOwn(copy, "__proto__")).toBe(true);
    expect(copy).toStrictEqual(roundTrip(value));
  });

  test("a cycle throws as the round trip does", () => {
    const a: Record<string, unknown> = {};
    a["self"] = a;
    expect(() => providerJson(a)).toThrow(TypeError);
  });
});
