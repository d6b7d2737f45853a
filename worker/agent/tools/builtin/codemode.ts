/**
 * `codemode`: runs a model-written script in the QuickJS sandbox (worker/sandbox/), whose globals are
 * the conversation's other tools as async functions. Each tool call is a nested call of this one,
 * keyed by its position among the script's calls, so its result is committed (by the nested task)
 * before the script receives it, and the value handed over is the committed one.
 * Replay: the call is replay-safe. Its first run records, in one memo, the virtual clock's start, the
 * random seed and the sandbox's fingerprint (interpreter variant, prelude, tool set). After a crash the
 * script runs again with those, so it makes the same calls, which reattach to their nested tasks by
 * key and hand back the journaled results. A rerun that makes another call under a key, stops short of
 * the calls the first run made, or finds another fingerprint fails the call with `replay diverged:`
 * and the first difference; nothing is guessed.
 * The script's return value becomes the call's details, stored whole in the transcript, so its JSON
 * is bounded (`resultBytes`, 1 MiB by default): a larger one fails the call with
 * `ResultLimitExceeded`.
 */
import { Type } from "typebox";
import type { Json } from "../../../core/types.ts";
import { ReplayDiverged, ResultLimitExceeded } from "../../../sandbox/errors.ts";
import { INTERPRETER_VARIANT } from "../../../sandbox/interpreter.ts";
import { PRELUDE_VERSION } from "../../../sandbox/prelude.ts";
import {
  type CallAnswer,
  DEFAULT_SANDBOX_LIMITS,
  runScript,
  type SandboxLimits,
} from "../../../sandbox/run.ts";
import { DEFAULT_RESULT_BYTES } from "../../../sandbox/types.ts";
import { utf8Length } from "../../workspace/fs.ts";
import {
  defineTool,
  NestedCallMismatch,
  type ToolApi,
  type ToolDefinition,
  type ToolResult,
} from "../contract.ts";

export {
  CpuSliceExceeded,
  CpuTimeExceeded,
  MemoryLimitExceeded,
  NestedCallLimitExceeded,
  OutputLimitExceeded,
  ReplayDiverged,
  ResultLimitExceeded,
  SandboxLimitError,
  ScriptError,
  StackLimitExceeded,
} from "../../../sandbox/errors.ts";
export { DEFAULT_SANDBOX_LIMITS, type SandboxLimits } from "../../../sandbox/run.ts";

export const CODEMODE_TOOL = "codemode";

/** What a script's world is made of; a replay under another one is refused. */
export interface SandboxFingerprint {
  /**
   * The interpreter's variant (`INTERPRETER_VARIANT`). The field keeps its first name, `engine`:
   * fingerprints are stored in the memos of calls that may resume after an upgrade.
   */
  readonly engine: string;
  readonly prelude: number;
  /** Tool name -> a hash of its parameters' schema. */
  readonly tools: Readonly<Record<string, string>>;
}

/** What the first run of a call records before the script starts. */
interface ScriptRecord {
  readonly start: number;
  readonly seed: number;
  readonly fingerprint: SandboxFingerprint;
}

const parameters = Type.Object({
  script: Type.String({
    description:
      "The body of an async JavaScript function. Use `await` and `return` at its top level; `console.log` prints.",
  }),
});

const DESCRIPTION = [
  "Run a JavaScript script that calls the other tools as async functions and returns a value.",
  'Each tool is a global async function taking its arguments object, e.g. `const r = await ls({ path: "." })`',
  "(also reachable as `tools.name`); it resolves to `{ text, details }` and throws an Error with the tool's",
  "message when the tool fails. `console.log` output is shown; the script's return value is the result.",
  "The sandbox is deterministic (virtual clock, seeded Math.random, UTC) and has no network or DOM.",
].join(" ");

/** FNV-1a over a string, as 8 hex digits. */
function hash(text: string): string {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return (h >>> 0).toString(16).padStart(8, "0");
}

export function fingerprintOf(tools: readonly ToolDefinition[]): SandboxFingerprint {
  const byName: Record<string, string> = {};
  for (const tool of [...tools].sort((a, b) => (a.name < b.name ? -1 : 1)))
    byName[tool.name] = hash(JSON.stringify(tool.parameters));
  return { engine: INTERPRETER_VARIANT, prelude: PRELUDE_VERSION, tools: byName };
}

/** The first difference between the recorded fingerprint and the current one, in words. */
export function fingerprintDifference(
  recorded: SandboxFingerprint,
  now: SandboxFingerprint,
): string | undefined {
  if (recorded.engine !== now.engine)
    return `the sandbox interpreter changed from ${recorded.engine} to ${now.engine}`;
  if (recorded.prelude !== now.prelude)
    return `the sandbox prelude changed from version ${recorded.prelude} to ${now.prelude}`;
  const names = [...new Set([...Object.keys(recorded.tools), ...Object.keys(now.tools)])].sort();
  for (const name of names) {
    const before = recorded.tools[name];
    const after = now.tools[name];
    if (before === after) continue;
    if (before === undefined) return `the tool set changed: ${name} was added`;
    if (after === undefined) return `the tool set changed: ${name} was removed`;
    return `the tool set changed: ${name} has other parameters`;
  }
  return undefined;
}

const textOf = (result: ToolResult): string =>
  result.content.map((c) => (c.type === "text" ? c.text : `[${c.type}]`)).join("\n");

/** What the script receives for a tool's (committed) result. */
function answerOf(result: ToolResult): CallAnswer {
  if (result.isError) return { isError: true, text: textOf(result) };
  return {
    isError: false,
    value:
      result.details === undefined
        ? { text: textOf(result) }
        : { text: textOf(result), details: result.details },
  };
}

/**
 * Run `source` in the sandbox with the call's recorded clock start and seed; each tool the script
 * calls is a nested call keyed by its position (`#<index>`), so a rerun reattaches to the journaled
 * results. A rerun that calls something else under a key, or returns before a call the first run
 * made, throws `ReplayDiverged` naming the difference. The script's console output streams to the
 * call's output and is returned too.
 */
export async function runJournaledScript(
  api: ToolApi,
  source: string,
  options: {
    readonly record: { readonly start: number; readonly seed: number };
    readonly functions: readonly string[];
    readonly globals?: Readonly<Record<string, Json>>;
    readonly limits: SandboxLimits;
  },
): Promise<{ readonly value: unknown; readonly calls: number; readonly output: string }> {
  let output = "";
  const run = await runScript(
    source,
    {
      start: options.record.start,
      seed: options.record.seed,
      functions: [...options.functions],
      ...(options.globals === undefined ? {} : { globals: options.globals }),
      signal: api.signal,
      print: (text) => {
        output += text;
        api.output(text);
      },
      call: async (name, callArgs, index) => {
        try {
          return answerOf(await api.executeTool(name, callArgs, { key: `#${index}`, sameAsRecorded: true }));
        } catch (error) {
          if (error instanceof NestedCallMismatch)
            throw new ReplayDiverged(
              `call ${index} was ${error.recorded.name}(${JSON.stringify(error.recorded.arguments)}) in the first run, ` +
                `${name}(${JSON.stringify(callArgs)}) now`,
            );
          throw error;
        }
      },
    },
    options.limits,
  );
  const extra = await api.recordedCall(`#${run.calls}`);
  if (extra)
    throw new ReplayDiverged(
      `the first run made call ${run.calls} (${extra.name}(${JSON.stringify(extra.arguments)})), the rerun returned before it`,
    );
  // The value becomes the call's details, stored whole: bounded like the output is.
  const bound = options.limits.resultBytes ?? DEFAULT_RESULT_BYTES;
  const returned = run.value === undefined ? 0 : utf8Length(JSON.stringify(run.value));
  if (returned > bound) throw new ResultLimitExceeded(bound, returned);
  return { value: run.value, calls: run.calls, output };
}

export interface CodemodeOptions {
  /** Over the defaults (`DEFAULT_SANDBOX_LIMITS`). */
  readonly limits?: Partial<SandboxLimits>;
  /**
   * Values the host shows the script as read-only globals, read at each run. They are neither
   * journaled nor part of the fingerprint: one that changes between a run and its replay and makes
   * the script call something else fails the replay (`replay diverged`).
   */
  readonly globals?: () => Readonly<Record<string, Json>>;
}

export function createCodemodeTool(options: CodemodeOptions = {}) {
  const limits: SandboxLimits = { ...DEFAULT_SANDBOX_LIMITS, ...(options.limits ?? {}) };
  return defineTool({
    name: CODEMODE_TOOL,
    label: "Run a script",
    description: DESCRIPTION,
    parameters,
    replay: "safe",
    async execute(args, api) {
      const tools = [...api.tools().values()].filter((tool) => tool.name !== CODEMODE_TOOL);
      const fingerprint = fingerprintOf(tools);
      const record = (await api.memo<Json>("codemode", () => ({
        start: Date.now(),
        seed: Math.floor(Math.random() * 2 ** 32),
        fingerprint: { ...fingerprint },
      }))) as unknown as ScriptRecord;
      const changed = fingerprintDifference(record.fingerprint, fingerprint);
      if (changed) throw new ReplayDiverged(changed);
      const run = await runJournaledScript(api, args.script, {
        record,
        functions: tools.map((tool) => tool.name),
        globals: options.globals?.() ?? {},
        limits,
      });
      const output = run.output;
      const shown = run.value === undefined ? "undefined" : JSON.stringify(run.value);
      return {
        content: [{ type: "text", text: `${output === "" ? "" : `${output}\n`}Result: ${shown}` }],
        details: { result: (run.value ?? null) as Json, calls: run.calls },
      };
    },
  });
}
