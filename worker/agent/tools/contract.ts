/**
 * The tool contract. A tool is a TypeBox-typed function the model may call; the engine validates its
 * arguments, records intent, runs it with a `ToolApi`, and commits its result. `replay` says what
 * recovery may do after a crash between intent and result: `safe` runs it again with the stored
 * arguments, anything else records an `interrupted` error result.
 */
import type { ImageContent, TextContent, Tool, Usage } from "@mariozechner/pi-ai";
import type { Static, TSchema } from "typebox";
import type { AnyTaskDefinition, TaskDefinition, Tx } from "../../core/define.ts";
import type {
  Checkpoint,
  ConversationId,
  EntryId,
  EntryRecord,
  Json,
  SubmissionId,
  TaskId,
  TaskOwnership,
  TaskRecord,
} from "../../core/types.ts";
import type { ExecutionEnv } from "../env.ts";
import type { ModelResolver } from "../models/resolver.ts";
import type { AgentState, DocToken, ModelRef, ThinkingLevel, ToolDiagnostic } from "../records.ts";
import { utf8Length } from "../workspace/fs.ts";

export type ReplayPolicy = "safe" | "unsafe";

/** What a result asks of the run (spec §7.3 ToolControl). */
export interface ToolControl {
  terminate?: boolean;
  handoff?: string;
  addTools?: string[];
}

export interface ToolResult {
  /** What the model sees. */
  content: Array<TextContent | ImageContent>;
  /** For UIs and programs; never sent to the model. */
  details?: Json;
  isError?: boolean;
  /**
   * `terminate`: end the run with the tool-calling answer when every result of the round asks it.
   * `handoff`: end the run and start the context over from this text (a `pi.reset` entry whose user
   * message it is, as `Conversation.reset(handoff)` writes); the last handoff of a round wins.
   * `addTools`: tool names the round's closing commit adds to the conversation's stored `pi.agent`
   * `tools` filter (appended to an exact list unless present, taken out of `{ remove }`; an absent
   * filter already offers every tool, so nothing is written), effective at the next preparation.
   */
  control?: ToolControl;
  /** What the call spent on models of its own (a subagent, a summarizer): stored with the result, counted in pi.usage.tools. */
  usage?: Usage;
  /**
   * Remarks about the call for the model and the UI, never its data (spec §7.3): stored after those
   * recorded through `api.diagnostic()` and before the harness's own.
   */
  diagnostics?: ToolDiagnostic[];
}

/**
 * The registry snapshot a call's phase took (spec §7.3 `registry`, the extensions' `RegistrySnapshot`
 * as a tool sees it: extensions by name, their tools, the task definitions).
 */
export interface ToolRegistryView {
  installed(): readonly { readonly name: string }[];
  extension(name: string): { readonly name: string } | undefined;
  tools(): readonly { readonly extension: string; readonly tool: ToolDefinition }[];
  tasks(): readonly AnyTaskDefinition[];
  task(name: string): AnyTaskDefinition | undefined;
  hasTask(name: string): boolean;
}

/** The calling conversation's agent as the call's phase resolved it (spec §7.3 `agent()`; `Conversation.agent()`'s shape). */
export interface ToolAgentView {
  /** The selected extensions' names, in order. */
  readonly extensions: readonly string[];
  /** The tools after overrides, wrappers and the conversation's filter, in order. */
  readonly tools: ReadonlyMap<string, ToolDefinition>;
  /** The prompt sections, in order (instructions not included). */
  readonly sections: readonly { readonly key: string }[];
  /** The stored pi.agent it was resolved from. */
  readonly state: AgentState;
  readonly model?: ModelRef;
  readonly thinkingLevel: ThinkingLevel;
  readonly instructions?: string;
}

/** An input a tool submits to a conversation (tools write passive entries through `commit`). */
export interface ToolInput {
  content: string | Array<TextContent | ImageContent>;
  /** Derive it from the task id (say `subagent:${api.taskId}`) so a rerun finds its admission. */
  requestId?: string;
  whenBusy?: "followUp" | "steer" | "reject";
}

/** How an input settled: answered (the answer entry), or not (with the reason). */
export type ToolSettlement =
  | { status: "done"; answer: EntryId }
  | { status: "unanswered"; reason: string; detail?: string };

/** A submission admitted through a tool's conversation handle; `wait` rejects once the invocation ended. */
export interface ToolSubmission {
  readonly id: SubmissionId;
  wait(): Promise<ToolSettlement>;
}

/**
 * An invocation-bound conversation handle (spec §7.3): every operation rejects once the call's
 * invocation ended, while what it admitted stays durable. It accepts input submissions only.
 */
export interface ToolConversation {
  readonly id: ConversationId;
  /** Admit an input; with `requestId`, the submission admitted under it before is returned instead. */
  submit(input: ToolInput): Promise<ToolSubmission>;
  /** Abort the conversation's live work (`background`: across background boundaries); resolves once idle. */
  abort(options?: { background?: boolean }): Promise<void>;
  waitForIdle(): Promise<void>;
  /** Calls `listener` with the entries each commit appends to this conversation, until the invocation ends. */
  onEntries(listener: (entries: readonly EntryRecord[]) => void): () => void;
}

export interface ToolApi {
  /** Aborted when the call is cancelled or its invocation ends. */
  readonly signal: AbortSignal;
  readonly toolCallId: string;
  /** The call's task: the owner of what the call creates with `ownership: { kind: "task", taskId }`. */
  readonly taskId: TaskId;
  readonly conversationId: ConversationId;
  /**
   * A commit of the call's task (spec §7.3): create conversations it owns, tasks, documents, in one
   * atomic write. Rejects once the invocation ended. The callback must not use a conversation handle.
   */
  commit<T>(change: (tx: Tx) => T): Promise<T>;
  /**
   * An invocation-bound handle to a conversation whose record is in memory (the call's own, the
   * conversations with live work and those this call created), or undefined. Records load on demand
   * (issue 30): an idle conversation the engine has not read since its open answers undefined here.
   */
  conversation(id: ConversationId): ToolConversation | undefined;
  /** A committed entry by id. */
  entry(id: EntryId): Promise<EntryRecord | undefined>;
  /** First-writer-wins value of the call's task (insert-or-read in one commit), kept for a rerun. */
  memo<T extends Json>(name: string, candidate: T | ((tx: Tx) => T)): Promise<T>;
  /** A task definition the harness holds, by name (to create its tasks in `commit`). */
  taskDefinition(name: string): AnyTaskDefinition | undefined;
  /**
   * This conversation's environment, built for this execution by the harness's `env` builder (spec
   * §7.3); undefined when the harness has no builder: without an `env` option there is no
   * environment (spec §2.2), and a tool reaches no workspace. The built-in file tools use it.
   */
  readonly env: ExecutionEnv | undefined;
  /** Streamed partial output; the engine throttles and persists it. */
  output(chunk: string): void;
  /**
   * A nested tool call, owned by this one and keyed by position (or `key`). With `sameAsRecorded`, a
   * key that an earlier run of this call (before a crash) used for another tool or other arguments
   * rejects with `NestedCallMismatch` instead of handing back that other call's result.
   */
  executeTool(
    name: string,
    args: unknown,
    options?: { key?: string; sameAsRecorded?: boolean },
  ): Promise<ToolResult>;
  /** The nested call an earlier run of this call (before a crash) made under `key`, if any. */
  recordedCall(key: string): Promise<{ name: string; arguments: Json } | undefined>;
  /** The tools this call's conversation may call now, by name (what a nested call resolves). */
  tools(): ReadonlyMap<string, ToolDefinition>;
  /** The registry snapshot the call's phase took (spec §7.3): an install while the call runs is not in it. */
  readonly registry: ToolRegistryView;
  /** The calling conversation's agent, as the call's phase resolved it (fixed for the call). */
  agent(): Promise<ToolAgentView>;
  /** The harness's models (`AgentHarnessOptions.models`): the catalogue generation resolves from. */
  readonly models: ModelResolver;
  /**
   * Record a remark about the call (spec §7.3): in the call's pi.live slot with the next progress
   * commit, and in its result's diagnostics, before those the result gives. Every diagnostic is
   * model-visible; a `warn` does not make the result an error. A bad one is a TypeError; throws once
   * the call ended.
   */
  diagnostic(diagnostic: ToolDiagnostic): void;
  /**
   * Replace the call's running details with a complete JSON value (no merge); resolves once a stored
   * commit carries it (a progress commit, or at the latest the result's). A result without details
   * gets the last value. Never sent to the model while the call runs. Rejects once the call ended.
   */
  details(value: Json): Promise<void>;
  /**
   * Create a task in the call's conversation (spec §7.3), ownership explicit: `{ kind: "task", taskId:
   * api.taskId }` makes it the call's own (the call's result waits for it: its task holds
   * `completing` while it is live), `{ kind: "conversation" }` a top-level one (`background` allowed).
   * Rejects once the call ended, and when the call's task is abort-marked.
   */
  createTask<I, S extends Checkpoint, R>(
    definition: TaskDefinition<I, S, R>,
    input: NoInfer<I>,
    options: { readonly ownership: TaskOwnership; readonly background?: boolean },
  ): Promise<TaskId>;
  /** A task's committed record (undefined when there is none). Rejects once the call ended. */
  getTask(id: TaskId): Promise<TaskRecord | undefined>;
  /** A task's terminal record, once it has one; rejects once the call ended (or its invocation). */
  waitForTask(id: TaskId): Promise<TaskRecord>;
  /**
   * A committed document of a conversation (spec §7.3 `DocumentReader`; the call's own by default):
   * by name, or through its token (migrated in memory, never written). Undefined when absent: a read
   * never creates one. Rejects once the call ended.
   */
  snapshot<T extends Json>(
    doc: string | DocToken<T>,
    conversationId?: ConversationId,
  ): Promise<T | undefined>;
}

/** A nested call's key was used by an earlier run of the caller for another call (see `executeTool`). */
export class NestedCallMismatch extends Error {
  constructor(
    readonly key: string,
    readonly recorded: { name: string; arguments: Json },
    readonly requested: { name: string; arguments: unknown },
  ) {
    super(
      `nested call ${key} was ${recorded.name}(${JSON.stringify(recorded.arguments)}) before, ` +
        `now ${requested.name}(${JSON.stringify(requested.arguments)})`,
    );
    this.name = "NestedCallMismatch";
  }
}

export interface ToolDefinition<P extends TSchema = TSchema> {
  readonly name: string;
  readonly label?: string;
  readonly description: string;
  readonly parameters: P;
  /** Default "unsafe". */
  readonly replay?: ReplayPolicy;
  /** "sequential": a round that calls this tool runs its calls one after another. Default: the settings'. */
  readonly executionMode?: ToolExecutionMode;
  /**
   * It only reads: no write, no network, no code of the model's. Under an approval policy
   * (settings `approval`, tools/approval.ts) such a tool runs freely by default; any other asks first.
   */
  readonly readOnly?: boolean;
  /**
   * Pure repair of commonly malformed arguments (say, an array sent as a JSON string). Runs before
   * validation, which still checks its result; a throw is an `invalid_arguments` result. The stored
   * call keeps what the model sent.
   */
  prepareArguments?(args: unknown): Static<P>;
  /**
   * What is retained of the call's output and of its result's text (default 50 KiB, 2,000 lines,
   * `head`); what is dropped is reported to the model in a `truncated` warning.
   */
  readonly outputLimits?: {
    readonly maxBytes?: number;
    readonly maxLines?: number;
    readonly retain?: "head" | "tail";
  };
  execute(args: Static<P>, api: ToolApi): Promise<ToolResult>;
}

const TOOL_NAME = /^[a-zA-Z0-9_-]{1,64}$/;

/** Checks the name (providers accept `[a-zA-Z0-9_-]{1,64}`) and returns the definition frozen. */
export type ToolExecutionMode = "parallel" | "sequential";

export function defineTool<P extends TSchema>(def: ToolDefinition<P>): ToolDefinition<P> {
  if (!TOOL_NAME.test(def.name)) {
    throw new TypeError(`invalid tool name ${JSON.stringify(def.name)}: use 1-64 of [a-zA-Z0-9_-]`);
  }
  if (def.replay !== undefined && def.replay !== "safe" && def.replay !== "unsafe") {
    throw new TypeError(`tool ${def.name}: replay must be "safe" or "unsafe"`);
  }
  if (
    def.executionMode !== undefined &&
    def.executionMode !== "parallel" &&
    def.executionMode !== "sequential"
  ) {
    throw new TypeError(`tool ${def.name}: executionMode must be "parallel" or "sequential"`);
  }
  if (def.readOnly !== undefined && typeof def.readOnly !== "boolean") {
    throw new TypeError(`tool ${def.name}: readOnly must be a boolean`);
  }
  checkOutputLimits(def);
  return Object.freeze({ ...def });
}

function checkOutputLimits(def: ToolDefinition): void {
  const limits = def.outputLimits;
  if (limits === undefined) return;
  for (const key of ["maxBytes", "maxLines"] as const) {
    const value = limits[key];
    if (value !== undefined && !(Number.isInteger(value) && value > 0))
      throw new TypeError(`tool ${def.name}: outputLimits.${key} must be a positive integer`);
  }
  if (limits.retain !== undefined && limits.retain !== "head" && limits.retain !== "tail")
    throw new TypeError(`tool ${def.name}: outputLimits.retain must be "head" or "tail"`);
}

export function replayPolicyOf(def: Pick<ToolDefinition, "replay">): ReplayPolicy {
  return def.replay ?? "unsafe";
}

/** What the model is shown: name, description, parameters. */
export function toPiTool(def: ToolDefinition): Tool {
  return { name: def.name, description: def.description, parameters: def.parameters };
}

/** A text-only result. */
export function textResult(text: string, details?: Json): ToolResult {
  return details === undefined
    ? { content: [{ type: "text", text }] }
    : { content: [{ type: "text", text }], details };
}

/** A user-facing failure the model should read (missing file, ambiguous edit...). */
export function errorResult(message: string, details?: Json): ToolResult {
  return { ...textResult(message, details), isError: true };
}

// ---------------------------------------------------------------------------------------------
// Output caps

export const OUTPUT_LIMITS = { maxBytes: 50 * 1024, maxLines: 2000 } as const;

export interface CappedHead {
  /** The kept head: at most `maxLines` lines and `maxBytes` UTF-8 bytes. */
  readonly head: string;
  readonly truncated: boolean;
  /** Lines in the input (a final newline does not start a line). */
  readonly totalLines: number;
  /** Lines kept whole. */
  readonly shownLines: number;
  readonly totalBytes: number;
  readonly shownBytes: number;
}

/** The longest prefix of `text` of at most `maxBytes` UTF-8 bytes that does not split a character. */
function prefixWithinBytes(text: string, maxBytes: number): string {
  let bytes = 0;
  let i = 0;
  while (i < text.length) {
    const c = text.charCodeAt(i);
    let width = 1;
    let units = 1;
    if (c >= 0x80 && c < 0x800) width = 2;
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < text.length) {
      const next = text.charCodeAt(i + 1);
      if (next >= 0xdc00 && next <= 0xdfff) {
        width = 4;
        units = 2;
      } else width = 3;
    } else if (c >= 0x800) width = 3;
    if (bytes + width > maxBytes) break;
    bytes += width;
    i += units;
  }
  return text.slice(0, i);
}

/**
 * The head of `text` within both caps, whole lines only (if even the first line is over the byte
 * cap, its longest prefix that fits). No note is added.
 */
export function capHead(
  text: string,
  limits: { maxBytes: number; maxLines: number } = OUTPUT_LIMITS,
): CappedHead {
  const totalBytes = utf8Length(text);
  const lines = text.split("\n");
  if (lines.length > 1 && lines[lines.length - 1] === "") lines.pop();
  const totalLines = text === "" ? 0 : lines.length;
  if (totalBytes <= limits.maxBytes && totalLines <= limits.maxLines) {
    return {
      head: text,
      truncated: false,
      totalLines,
      shownLines: totalLines,
      totalBytes,
      shownBytes: totalBytes,
    };
  }
  let shownLines = 0;
  let shownBytes = 0;
  while (shownLines < lines.length && shownLines < limits.maxLines) {
    const lineBytes = utf8Length(lines[shownLines]!) + (shownLines > 0 ? 1 : 0);
    if (shownBytes + lineBytes > limits.maxBytes) break;
    shownBytes += lineBytes;
    shownLines++;
  }
  let head = lines.slice(0, shownLines).join("\n");
  if (shownLines === 0 && lines.length > 0 && limits.maxLines > 0) {
    head = prefixWithinBytes(lines[0]!, limits.maxBytes);
    shownBytes = utf8Length(head);
  }
  return { head, truncated: true, totalLines, shownLines, totalBytes, shownBytes };
}

function plural(n: number, word: string): string {
  return `${n} ${word}${n === 1 ? "" : "s"}`;
}

/**
 * Keeps the head of `text` within `OUTPUT_LIMITS` (50 KiB and 2,000 lines) and, when something was
 * cut, appends a note saying how much: `[output truncated: N more lines / M more bytes not shown]`.
 */
export function capOutput(text: string): { text: string; truncated: boolean } {
  const cap = capHead(text);
  if (!cap.truncated) return { text, truncated: false };
  const moreLines = cap.totalLines - cap.shownLines;
  const moreBytes = cap.totalBytes - cap.shownBytes;
  const note =
    `[output truncated: ${plural(moreLines, "more line")} / ${plural(moreBytes, "more byte")} not shown;` +
    ` limits are ${OUTPUT_LIMITS.maxLines} lines and ${OUTPUT_LIMITS.maxBytes / 1024} KiB]`;
  return { text: cap.head === "" ? note : `${cap.head}\n\n${note}`, truncated: true };
}
