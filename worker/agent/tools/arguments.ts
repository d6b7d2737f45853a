/**
 * Tool arguments validated as pi-ai's `validateToolArguments` validates them, without its cost where
 * its outcome is known in advance. pi-ai deep-copies the arguments (structuredClone), converts them
 * toward the schema (TypeBox `Value.Convert`, then its own JSON-schema coercion), checks them and
 * returns the converted copy. For a *plain* schema (objects, arrays, strings, numbers, integers,
 * booleans and nulls, with `properties`, `required`, `items`, a boolean `additionalProperties`,
 * `description` and `title` and nothing else: no unions, enums, literals, references, formats,
 * bounds or patterns) and arguments that are already JSON data of that shape, every conversion is
 * the identity and the check passes, so the result equals the arguments. Those are returned as they
 * are, when they are already frozen (the engine's own copy, out of a committed answer: nothing can
 * change them) and go straight to a commit, which would freeze pi-ai's copy anyway. Anything else, including every value that
 * fails, goes to pi-ai, which also writes the error message.
 *
 * The plain-shape check walks the schema and the value together each time: nothing is cached, so
 * a schema changed after a first call is judged as it is now.
 */
import type { Tool, ToolCall } from "@mariozechner/pi-ai";
import { piAi } from "../models/pi-ai.ts";

/** The own keys a plain schema node may have (TypeBox's `~kind` and `~optional` included). */
const PLAIN_KEYS = new Set([
  "type",
  "properties",
  "required",
  "items",
  "additionalProperties",
  "description",
  "title",
  "~kind",
  "~optional",
]);

const PLAIN_KINDS = new Set(["Object", "Array", "String", "Number", "Integer", "Boolean", "Null"]);

/** Whether `node`'s own keys are all plain ones (its children are judged where the value meets them). */
function plainNode(node: Record<string, unknown>): boolean {
  for (const key of Object.getOwnPropertyNames(node)) if (!PLAIN_KEYS.has(key)) return false;
  if (Object.getOwnPropertySymbols(node).length > 0) return false;
  const kind = node["~kind"];
  if (kind !== undefined && !(typeof kind === "string" && PLAIN_KINDS.has(kind))) return false;
  const extra = node["additionalProperties"];
  return extra === undefined || typeof extra === "boolean";
}

const isRecord = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v);

/**
 * True when `schema` is plain and `value` is JSON data that satisfies it; false means "not known
 * here", never "invalid" (pi-ai decides those).
 */
export function satisfiesPlainSchema(schema: unknown, value: unknown, depth = 0): boolean {
  if (!isRecord(schema) || depth > 64 || !plainNode(schema)) return false;
  switch (schema["type"]) {
    case "string":
      return typeof value === "string";
    case "number":
      return typeof value === "number" && Number.isFinite(value);
    case "integer":
      return typeof value === "number" && Number.isInteger(value);
    case "boolean":
      return typeof value === "boolean";
    case "null":
      return value === null;
    case "array": {
      const items = schema["items"];
      if (!Array.isArray(value) || !isRecord(items) || schema["properties"] !== undefined) return false;
      for (let i = 0; i < value.length; i++)
        if (!(i in value) || !satisfiesPlainSchema(items, value[i], depth + 1)) return false;
      return true;
    }
    case "object":
      return plainObject(schema, value, depth);
    default:
      return false;
  }
}

function plainObject(schema: Record<string, unknown>, value: unknown, depth: number): boolean {
  if (!isRecord(value) || Object.getPrototypeOf(value) !== Object.prototype) return false;
  const properties = schema["properties"] ?? {};
  const required = schema["required"] ?? [];
  if (!isRecord(properties) || !Array.isArray(required) || schema["items"] !== undefined) return false;
  for (const key of required) if (typeof key !== "string" || !Object.hasOwn(value, key)) return false;
  for (const key of Object.keys(properties))
    if (Object.hasOwn(value, key) && !satisfiesPlainSchema(properties[key], value[key], depth + 1))
      return false;
  const extraAllowed = schema["additionalProperties"] !== false;
  for (const key of Object.keys(value)) {
    if (Object.hasOwn(properties, key)) continue;
    if (!extraAllowed || !isJsonData(value[key], depth + 1)) return false;
  }
  return true;
}

/** JSON data: what JSON.parse could have made (plain objects, arrays, finite numbers, strings...). */
function isJsonData(value: unknown, depth: number): boolean {
  if (depth > 64) return false;
  switch (typeof value) {
    case "string":
    case "boolean":
      return true;
    case "number":
      return Number.isFinite(value);
    case "object": {
      if (value === null) return true;
      if (Array.isArray(value)) {
        for (let i = 0; i < value.length; i++)
          if (!(i in value) || !isJsonData(value[i], depth + 1)) return false;
        return true;
      }
      if (Object.getPrototypeOf(value) !== Object.prototype) return false;
      for (const key of Object.keys(value))
        if (!isJsonData((value as Record<string, unknown>)[key], depth + 1)) return false;
      return true;
    }
    default:
      return false;
  }
}

/** Deeply frozen: the value and everything in it. */
function deeplyFrozen(value: unknown): boolean {
  if (typeof value !== "object" || value === null) return true;
  if (!Object.isFrozen(value)) return false;
  for (const item of Object.values(value)) if (!deeplyFrozen(item)) return false;
  return true;
}

/**
 * pi-ai's validateToolArguments (same result, same errors), skipping its work where the result is
 * the arguments. `copy`: the result goes where a copy of one's own may be expected (beforeTool hooks
 * see it before anything freezes it), so pi-ai's copy is always made.
 */
export function validateToolArguments(tool: Tool, call: ToolCall, options: { copy?: boolean } = {}): unknown {
  const args = call.arguments;
  if (!options.copy && satisfiesPlainSchema(tool.parameters, args) && deeplyFrozen(args)) return args;
  return piAi().validateToolArguments(tool, call);
}
