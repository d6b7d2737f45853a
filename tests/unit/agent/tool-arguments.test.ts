/**
 * The engine's tool-argument validation (worker/agent/tools/arguments.ts) gives what pi-ai's
 * validateToolArguments gives for every input, and skips pi-ai's copy-and-convert only where that
 * result is the arguments themselves (a plain schema, frozen JSON data that satisfies it).
 */
import {
  fauxToolCall,
  validateToolArguments as piValidate,
  type Tool,
  type ToolCall,
} from "@mariozechner/pi-ai";
import { Type } from "typebox";
import { describe, expect, it } from "vitest";
import { satisfiesPlainSchema, validateToolArguments } from "../../../worker/agent/tools/arguments.ts";
import "../../../worker/testing.ts"; // hands pi-ai to the engine
import { callsThenAnswer, itemTool, open } from "./fixtures.ts";

const deepFreeze = <T>(value: T): T => {
  if (typeof value === "object" && value !== null) {
    for (const item of Object.values(value)) deepFreeze(item);
    Object.freeze(value);
  }
  return value;
};

const tool = (parameters: Tool["parameters"]): Tool => ({ name: "t", description: "a tool", parameters });
const call = (args: unknown): ToolCall =>
  ({ type: "toolCall", id: "c1", name: "t", arguments: args }) as ToolCall;

/** Both validations, as a value or the error's message. */
function both(t: Tool, args: unknown): { ours: unknown; theirs: unknown } {
  const run = (f: () => unknown) => {
    try {
      return { value: f() };
    } catch (error) {
      return { error: (error as Error).message };
    }
  };
  return {
    ours: run(() => validateToolArguments(t, call(args))),
    theirs: run(() => piValidate(t, call(args))),
  };
}

const plain = Type.Object({
  path: Type.String({ description: "where" }),
  count: Type.Optional(Type.Integer()),
  flags: Type.Optional(Type.Array(Type.Boolean())),
  nested: Type.Optional(Type.Object({ x: Type.Number(), note: Type.Null() })),
});

describe("tool argument validation", () => {
  it("returns frozen arguments that satisfy a plain schema as they are, equal to pi-ai's result", () => {
    const args = deepFreeze({
      path: "a.txt",
      count: 3,
      flags: [true],
      nested: { x: 1.5, note: null },
      extra: "k",
    });
    const { ours, theirs } = both(tool(plain), args);
    expect(ours).toEqual(theirs);
    expect(validateToolArguments(tool(plain), call(args))).toBe(args);
  });

  it("gives pi-ai's result for every input the shortcut does not cover", () => {
    const cases: Array<[Tool["parameters"], unknown]> = [
      [plain, { path: "a.txt", count: 3 }], // not frozen: pi-ai's copy
      [plain, deepFreeze({ path: "a.txt", count: "3" })], // converted to a number by pi-ai
      [plain, deepFreeze({ path: 7 })], // converted to a string
      [plain, deepFreeze({ count: 3 })], // required property missing: pi-ai's error
      [plain, deepFreeze({ path: "a", count: 1.5 })], // not an integer
      [Type.Object({ n: Type.Number({ minimum: 10 }) }), deepFreeze({ n: 5 })], // a bound: not plain
      [Type.Object({ v: Type.Union([Type.Number(), Type.String()]) }), deepFreeze({ v: "1" })], // a union converts
      [Type.Object({ k: Type.Literal("a") }), deepFreeze({ k: "a" })],
      [Type.Object({ n: Type.Number() }, { additionalProperties: false }), deepFreeze({ n: 1, x: 2 })],
    ];
    for (const [schema, args] of cases) {
      const { ours, theirs } = both(tool(schema), args);
      expect(ours).toEqual(theirs);
    }
    const notFrozen = { path: "a.txt" };
    expect(validateToolArguments(tool(plain), call(notFrozen))).not.toBe(notFrozen);
  });

  it("judges a schema as it is at each call: one made non-plain after a first call is not served stale", () => {
    const schema = Type.Object({ n: Type.Number() });
    const args = deepFreeze({ n: 5 });
    expect(validateToolArguments(tool(schema), call(args))).toBe(args);
    (schema.properties.n as unknown as Record<string, unknown>)["minimum"] = 10;
    expect(satisfiesPlainSchema(schema, args)).toBe(false);
    expect(() => validateToolArguments(tool(schema), call(args))).toThrow(/minimum|>= 10|greater/i);
  });

  it("hands beforeTool hooks a copy of their own, as pi-ai's validation did: one edited in place is what the tool runs with", async () => {
    const { tool, seen } = itemTool({});
    const { root } = await open(callsThenAnswer(fauxToolCall("apply", { item: "one" }, { id: "c1" })), {
      tools: [tool],
      hooks: {
        beforeTool: [
          (call) => {
            (call.arguments as { item: string }).item = "edited";
            return undefined;
          },
        ],
      },
    });
    expect(await (await root.submit({ type: "input", content: "go" })).wait()).toMatchObject({
      status: "done",
    });
    expect(seen).toEqual([{ item: "edited" }]);
  });
});
