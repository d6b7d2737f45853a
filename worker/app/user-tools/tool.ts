/**
 * User tools (issue 14 item 6): tools a user writes in JavaScript in the app's settings, each one
 * installed as its own extension (`user:<name>`) so a conversation can select or drop it like any
 * other. A tool's body is an async function `(args, tools) => ...`; it runs in the QuickJS sandbox of
 * `codemode` under the same limits, never in the page, and calls the conversation's other tools
 * through `tools` (nested calls keyed by position, journaled before the body receives them).
 * Invariants:
 * - a source is checked completely before anything is stored (`checkUserTool`): name, description,
 *   JSON-schema parameters, and a body that compiles to a function in the sandbox; a failure throws
 *   `UserToolInvalid` saying what is wrong;
 * - a call keeps the code it started with (the definition is resolved once per call); a rerun after
 *   a crash under another version of the tool fails with `replay diverged`, nothing is guessed.
 */

import type { Extension } from "../../agent/extensions/types.ts";
import {
  CODEMODE_TOOL,
  fingerprintDifference,
  fingerprintOf,
  runJournaledScript,
  type SandboxFingerprint,
} from "../../agent/tools/builtin/codemode.ts";
import type { ToolDefinition, ToolResult } from "../../agent/tools/contract.ts";
import { HarnessError } from "../../core/errors.ts";
import type { Json } from "../../core/types.ts";
import { ReplayDiverged } from "../../sandbox/errors.ts";
import { DEFAULT_SANDBOX_LIMITS, runScript, type SandboxLimits } from "../../sandbox/run.ts";

/** What the user writes. */
export interface UserToolSource {
  readonly name: string;
  readonly description: string;
  /** A JSON schema of an object (`type: "object"`). */
  readonly parameters: Json;
  /** An async function's source: `async (args, tools) => ...`. */
  readonly body: string;
}

/** What the store keeps: the source, its version (1 on the first save), and when it was saved. */
export interface UserToolRecord extends UserToolSource {
  readonly version: number;
  readonly savedAt: number;
  /**
   * Arrived with an imported conversation file and not yet enabled everywhere: opt-in, left out of
   * the default selection (only the conversations that name it get it).
   */
  readonly imported?: true;
}

export const USER_EXTENSION_PREFIX = "user:";
export const MAX_USER_TOOL_BODY = 64 * 1024;
export const MAX_USER_TOOL_DESCRIPTION = 2_000;
const MAX_SCHEMA_CHARS = 16 * 1024;
/** A JavaScript identifier, so a script reaches the tool as a global function. */
const USER_TOOL_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,63}$/;

export const userExtensionName = (tool: string): string => `${USER_EXTENSION_PREFIX}${tool}`;
export const isUserExtension = (name: string): boolean => name.startsWith(USER_EXTENSION_PREFIX);

/** A user tool the engine refuses to store: what is wrong, in `code` and the message. */
export class UserToolInvalid extends HarnessError {
  override readonly name = "UserToolInvalid";
  constructor(
    code: "invalid_name" | "name_taken" | "invalid_description" | "invalid_schema" | "invalid_body",
    message: string,
  ) {
    super(code, message);
  }
}

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v);

/** The schema's problem, in words, or undefined when it is a usable object schema. */
export function schemaProblem(schema: unknown): string | undefined {
  if (!isObject(schema)) return "the parameters must be a JSON object (a JSON schema)";
  if (JSON.stringify(schema).length > MAX_SCHEMA_CHARS)
    return `the parameters' schema is longer than ${MAX_SCHEMA_CHARS} characters`;
  if (schema["type"] !== "object") return 'the parameters\' schema must have "type": "object"';
  const properties = schema["properties"] ?? {};
  if (!isObject(properties)) return 'the schema\'s "properties" must be an object';
  for (const [key, value] of Object.entries(properties)) {
    if (!isObject(value)) return `the schema of property ${JSON.stringify(key)} must be an object`;
    const type = value["type"];
    const types = ["string", "number", "integer", "boolean", "object", "array", "null"];
    if (type !== undefined && !(typeof type === "string" && types.includes(type)))
      return `property ${JSON.stringify(key)} has an unknown type ${JSON.stringify(type)}`;
  }
  const required = schema["required"];
  if (required !== undefined) {
    if (!Array.isArray(required) || !required.every((r) => typeof r === "string"))
      return 'the schema\'s "required" must be a list of property names';
    const missing = required.find((r) => !Object.hasOwn(properties, r as string));
    if (missing !== undefined) return `required property ${JSON.stringify(missing)} is not in "properties"`;
  }
  return undefined;
}

/** The source's name, description and schema checked (no code runs); throws UserToolInvalid. */
export function checkUserToolShape(source: unknown): UserToolSource {
  if (!isObject(source))
    throw new UserToolInvalid(
      "invalid_name",
      "a user tool needs a name, a description, parameters and a body",
    );
  const { name, description, parameters, body } = source;
  if (typeof name !== "string" || !USER_TOOL_NAME.test(name))
    throw new UserToolInvalid(
      "invalid_name",
      "the name must be 1-64 letters, digits or _ and not start with a digit (scripts call it as a function)",
    );
  if (typeof description !== "string" || description.trim() === "")
    throw new UserToolInvalid("invalid_description", "the tool needs a description (the model reads it)");
  if (description.length > MAX_USER_TOOL_DESCRIPTION)
    throw new UserToolInvalid(
      "invalid_description",
      `the description is longer than ${MAX_USER_TOOL_DESCRIPTION} characters`,
    );
  const problem = schemaProblem(parameters);
  if (problem) throw new UserToolInvalid("invalid_schema", problem);
  if (typeof body !== "string" || body.trim() === "")
    throw new UserToolInvalid("invalid_body", "the tool needs a body: async (args, tools) => ...");
  if (body.length > MAX_USER_TOOL_BODY)
    throw new UserToolInvalid("invalid_body", `the body is longer than ${MAX_USER_TOOL_BODY / 1024} KiB`);
  return { name, description, parameters: parameters as Json, body };
}

/**
 * The script that defines the body as a value. Parentheses refuse most bodies that are not one
 * expression, not all (`x => x); f(); (y => y` parses): what such a body runs, it runs in the
 * sandbox under the call's limits like any other code of the tool.
 */
const bodyExpression = (body: string): string => `(\n${body}\n)`;

/**
 * Compile the body in the sandbox (never in the page) and check that it is a function; a syntax
 * error or another value throws UserToolInvalid with the sandbox's message.
 */
export async function checkUserToolBody(
  body: string,
  limits: SandboxLimits = DEFAULT_SANDBOX_LIMITS,
): Promise<void> {
  const script = [
    `const tool = ${bodyExpression(body)};`,
    'if (typeof tool !== "function") throw new TypeError("the body must be a function, like async (args, tools) => ...");',
    "return null;",
  ].join("\n");
  try {
    await runScript(
      script,
      {
        start: 0,
        seed: 0,
        functions: [],
        call: () => Promise.reject(new Error("no tool is called while checking a body")),
        print: () => undefined,
      },
      { ...limits, cpuMs: Math.min(limits.cpuMs, 1_000) },
    );
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    throw new UserToolInvalid("invalid_body", `the body does not compile to a function: ${message}`);
  }
}

/** What a call records before its body first runs; a rerun after a crash reads it back. */
interface CallRecord {
  readonly start: number;
  readonly seed: number;
  readonly version: number;
  readonly fingerprint: SandboxFingerprint;
}

/** The tool a record stands for; each call runs the record's body in a fresh sandbox. */
export function createUserTool(
  record: UserToolRecord,
  options: { limits?: Partial<SandboxLimits> } = {},
): ToolDefinition {
  const limits: SandboxLimits = { ...DEFAULT_SANDBOX_LIMITS, ...(options.limits ?? {}) };
  return Object.freeze({
    name: record.name,
    label: `${record.name} (your tool, version ${record.version})`,
    description: record.description,
    parameters: record.parameters as never,
    replay: "safe" as const,
    async execute(args: unknown, api: Parameters<ToolDefinition["execute"]>[1]): Promise<ToolResult> {
      const tools = [...api.tools().values()].filter(
        (t) => t.name !== CODEMODE_TOOL && t.name !== record.name,
      );
      const fingerprint = fingerprintOf(tools);
      const recorded = (await api.memo<Json>("user-tool", () => ({
        start: Date.now(),
        seed: Math.floor(Math.random() * 2 ** 32),
        version: record.version,
        fingerprint: { ...fingerprint },
      }))) as unknown as CallRecord;
      if (recorded.version !== record.version)
        throw new ReplayDiverged(
          `the tool ${record.name} changed from version ${recorded.version} to ${record.version} since this call started`,
        );
      const changed = fingerprintDifference(recorded.fingerprint, fingerprint);
      if (changed) throw new ReplayDiverged(changed);
      const run = await runJournaledScript(
        api,
        `const tool = ${bodyExpression(record.body)};\nreturn await tool(${JSON.stringify(args ?? {})}, tools);`,
        { record: recorded, functions: tools.map((t) => t.name), limits },
      );
      const output = run.output;
      const value = (run.value ?? null) as Json;
      const shown = typeof value === "string" ? value : JSON.stringify(value);
      return {
        content: [{ type: "text", text: output === "" ? shown : `${output}\n${shown}` }],
        details: { result: value, version: record.version, calls: run.calls },
      };
    },
  }) as ToolDefinition;
}

/** The records each installed user extension was built from (to report which version is active). */
const built = new WeakMap<Extension, UserToolRecord>();

/** The extension `user:<name>` holding the record's tool. */
export function userToolExtension(
  record: UserToolRecord,
  options: { limits?: Partial<SandboxLimits> } = {},
): Extension {
  const extension: Extension = Object.freeze({
    name: userExtensionName(record.name),
    tools: Object.freeze([createUserTool(record, options)]),
  });
  built.set(extension, record);
  return extension;
}

/** The record an installed extension was built from (undefined for any other extension). */
export function userToolOf(extension: Extension | undefined): UserToolRecord | undefined {
  return extension ? built.get(extension) : undefined;
}
