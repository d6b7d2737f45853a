/**
 * The built-in demo model: offline, deterministic, free. It is a pi-ai API provider (api "demo") so
 * the engine drives it exactly like a real model: it streams text at a settable speed, calls the
 * built-in tools on a few trigger phrases, and summarises tool results. Same context, same events
 * (except `timestamp`, which is the wall clock like every provider's).
 *
 * Triggers (in the last user message, any case): "run a long task" -> `sleep` (3 s; "run a long task
 * of 60 seconds" for longer), "write a note" ->
 * `ls` of `notes/` and then `write` to the next free `notes/note-<n>.md` (so a note written in
 * another conversation is never overwritten), "list the files" -> `ls`, "read <path>" -> `read`,
 * "sum the sizes of the files" -> `codemode` with a small script (add "slowly" and it runs a
 * two-second `sleep` per file), "use my tool <name>" (optionally "with {json}") -> `codemode` with a
 * script calling that tool (a user tool from the settings, say), "call the tool <name>" (optionally
 * "with {json}") -> that tool itself, directly (an MCP server's tool, say). A tool is only called when
 * the context offers it.
 */
import type {
  Api,
  AssistantMessage,
  AssistantMessageEvent,
  AssistantMessageEventStream,
  Context,
  ImageContent,
  Message,
  Model,
  StreamOptions,
  TextContent,
  ToolCall,
  ToolResultMessage,
  Usage,
  UserMessage,
} from "@mariozechner/pi-ai";
import { SUMMARY_SYSTEM_PROMPT } from "../agent/compaction/range.ts";
import { type PiAi, whenPiAiLoads } from "../agent/models/pi-ai.ts";
import { errorMessage } from "../core/errors.ts";

export const DEMO_API = "demo";
export const DEMO_PROVIDER = "demo";
export const DEMO_SOURCE_ID = "durable-harness:demo-provider";

export const demoModel: Model<"demo"> = {
  id: "demo-1",
  name: "Demo (offline)",
  api: DEMO_API,
  provider: DEMO_PROVIDER,
  baseUrl: "demo:offline",
  reasoning: false,
  input: ["text"],
  cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 },
  contextWindow: 128_000,
  maxTokens: 8_192,
};

// ---------------------------------------------------------------------------------------------
// Speed

export interface DemoSpeed {
  /** Characters per text or tool-argument delta (at least 1). */
  readonly charsPerChunk: number;
  /** Pause before each delta; 0 streams as fast as the event loop allows. */
  readonly chunkDelayMs: number;
}

export const DEFAULT_DEMO_SPEED: DemoSpeed = Object.freeze({ charsPerChunk: 8, chunkDelayMs: 15 });

let speed: DemoSpeed = DEFAULT_DEMO_SPEED;

/** Sets the speed of streams started from now on; returns the previous speed. */
export function setDemoSpeed(next: Partial<DemoSpeed>): DemoSpeed {
  const previous = speed;
  const charsPerChunk = Math.max(1, Math.floor(next.charsPerChunk ?? speed.charsPerChunk));
  const chunkDelayMs = Math.max(0, next.chunkDelayMs ?? speed.chunkDelayMs);
  speed = Object.freeze({ charsPerChunk, chunkDelayMs });
  return previous;
}

export function getDemoSpeed(): DemoSpeed {
  return speed;
}

// ---------------------------------------------------------------------------------------------
// What to answer

export interface DemoReply {
  readonly text: string;
  readonly toolCalls: readonly ToolCall[];
}

const HELP =
  'I can work with the files in this workspace. Try:\n- "list the files"\n- "write a note"\n' +
  '- "read notes/note-1.md"\n- "run a long task"\n- "sum the sizes of the files"';

/**
 * The script the demo model writes for "sum the sizes of the files": it walks the workspace with
 * `ls` and adds up the file sizes (`slowly`: a two-second `sleep` per file).
 */
export function sumSizesScript(slowly: boolean): string {
  return [
    "async function walk(path) {",
    "  const listing = await ls({ path });",
    "  let files = 0;",
    "  let bytes = 0;",
    "  for (const entry of listing.details?.entries ?? []) {",
    '    const child = path === "." ? entry.name : path + "/" + entry.name;',
    '    if (entry.kind === "dir") {',
    "      const inner = await walk(child);",
    "      files += inner.files;",
    "      bytes += inner.bytes;",
    "      continue;",
    "    }",
    ...(slowly ? ["    await sleep({ seconds: 2, steps: 2 });"] : []),
    "    files += 1;",
    "    bytes += entry.size;",
    '    console.log(child + ": " + entry.size + " bytes");',
    "  }",
    "  return { files, bytes };",
    "}",
    'const { files, bytes } = await walk(".");',
    "return { files, totalBytes: bytes };",
  ].join("\n");
}

/** The script the demo model writes for "use my tool <name> with <args>": one call, its result returned. */
export function useToolScript(name: string, args: Record<string, unknown>): string {
  return [
    `const result = await tools.${name}(${JSON.stringify(args)});`,
    'console.log("' + name + ' answered: " + result.text);',
    "return result.details?.result ?? result.text;",
  ].join("\n");
}

/** "use my tool NAME [with {json}]": the tool's name and its arguments (undefined when not asked). */
function useToolRequest(said: string): { name: string; args: Record<string, unknown> } | undefined {
  return toolRequest(
    /\buse\s+(?:my\s+)?tool\s+[`"']?([A-Za-z_][A-Za-z0-9_]*)[`"']?(?:\s+with\s+(\{[\s\S]*\}))?/i.exec(said),
  );
}

/** "call the tool NAME [with {json}]": a direct call of that tool (undefined when not asked). */
function callToolRequest(said: string): { name: string; args: Record<string, unknown> } | undefined {
  return toolRequest(
    /\bcall\s+(?:the\s+)?tool\s+[`"']?([A-Za-z0-9_-]{1,64})[`"']?(?:\s+with\s+(\{[\s\S]*\}))?/i.exec(said),
  );
}

function toolRequest(
  match: RegExpExecArray | null,
): { name: string; args: Record<string, unknown> } | undefined {
  if (!match) return undefined;
  let args: Record<string, unknown> = {};
  if (match[2]) {
    try {
      const parsed: unknown = JSON.parse(match[2]);
      if (typeof parsed === "object" && parsed !== null && !Array.isArray(parsed))
        args = parsed as Record<string, unknown>;
    } catch {
      // Not JSON: the tool gets no arguments and says what it misses.
    }
  }
  return { name: match[1]!, args };
}

function contentText(content: string | Array<TextContent | ImageContent>): string {
  if (typeof content === "string") return content;
  return content
    .filter((c): c is TextContent => c.type === "text")
    .map((c) => c.text)
    .join("\n");
}

function clip(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
}

function offered(context: Context, name: string): boolean {
  return context.tools?.some((t) => t.name === name) ?? false;
}

function priorWrites(messages: readonly Message[]): number {
  let n = 0;
  for (const m of messages) {
    if (m.role !== "assistant") continue;
    for (const c of m.content) if (c.type === "toolCall" && c.name === "write") n++;
  }
  return n;
}

interface Intent {
  readonly tool: string;
  /** A tool the call needs offered too (the one a script calls). */
  readonly needs?: string;
  readonly args: Record<string, unknown>;
  readonly preamble: string;
}

const NOTES_DIR = "notes";

function asksForNote(said: string): boolean {
  return /\bwrite\s+(?:me\s+)?(?:a|another|one)\s+note\b/.test(said.toLowerCase());
}

function noteIntent(said: string, n: number): Intent {
  const path = `${NOTES_DIR}/note-${n}.md`;
  const content =
    `# Note ${n}\n\nWritten by the offline demo model.\n\nYou asked: "${clip(said, 200)}"\n\n` +
    "Every step of this conversation is committed to SQLite in your browser, so this note and the chat survive a reload.\n";
  return { tool: "write", args: { path, content }, preamble: `Writing a note to ${path}.` };
}

/** The note number after the highest `note-<n>.md` an `ls` of the notes directory listed (1 when none). */
function nextFreeNote(listing: ToolResultMessage): number {
  let highest = 0;
  for (const match of resultText(listing).matchAll(/^note-(\d+)\.md \(/gm))
    highest = Math.max(highest, Number(match[1]));
  return highest + 1;
}

/** Whether an `ls` of the workspace root listed the notes directory. */
const listsNotesDir = (listing: ToolResultMessage) =>
  !listing.isError && resultText(listing).split("\n").includes(`${NOTES_DIR}/`);

function intentOf(said: string, messages: readonly Message[], context: Context): Intent | undefined {
  const lower = said.toLowerCase();
  const direct = callToolRequest(said);
  if (direct)
    return { tool: direct.name, args: direct.args, preamble: `Calling the \`${direct.name}\` tool.` };
  const use = useToolRequest(said);
  if (use) {
    return {
      tool: "codemode",
      needs: use.name,
      args: { script: useToolScript(use.name, use.args) },
      preamble: `I'll call your \`${use.name}\` tool from a small script.`,
    };
  }
  if (/\b(?:sum|add up|total)\b.*\bsizes?\b/.test(lower)) {
    const slowly = /\bslowly\b/.test(lower);
    return {
      tool: "codemode",
      args: { script: sumSizesScript(slowly) },
      preamble: "I'll write a small script that lists the files and adds up their sizes.",
    };
  }
  if (/\blong task\b/.test(lower)) {
    // "run a long task of 60 seconds": as long as asked (at most ten minutes), a step a second.
    const asked = /\blong task of (\d{1,3}) seconds?\b/.exec(lower);
    const seconds = asked ? Math.min(600, Number(asked[1])) : 3;
    const steps = asked ? Math.max(1, seconds) : 6;
    return {
      tool: "sleep",
      args: { seconds, steps },
      preamble: `Starting a long task: ${seconds} seconds in ${steps} steps.`,
    };
  }
  if (asksForNote(said)) {
    // With `ls` offered, look for a free name first: the workspace root, then the notes directory
    // if there is one; the write follows the listing.
    if (offered(context, "ls"))
      return { tool: "ls", args: { path: "." }, preamble: "Let me find a free name for the note." };
    return noteIntent(said, priorWrites(messages) + 1);
  }
  if (
    /\b(?:list|show)\s+(?:me\s+)?(?:the\s+|my\s+|all\s+(?:the\s+)?)?files\b/.test(lower) ||
    /^ls\b/.test(lower)
  ) {
    return { tool: "ls", args: { path: "." }, preamble: "Let me list the files in the workspace." };
  }
  const read = /\bread\s+(?:the\s+)?(?:file\s+)?["'`]?([^\s"'`]+)/i.exec(said);
  const path = read?.[1]?.replace(/[.,;:!?)]+$/, "");
  if (path) return { tool: "read", args: { path }, preamble: `Reading ${path}.` };
  return undefined;
}

function resultText(result: ToolResultMessage): string {
  return contentText(result.content).trim();
}

function preview(text: string, maxLines: number, maxChars: number): string {
  const lines = text.split("\n");
  let out = clip(lines.slice(0, maxLines).join("\n"), maxChars);
  if (lines.length > maxLines) out += `\n… (${lines.length - maxLines} more lines)`;
  return out;
}

function summariseOne(result: ToolResultMessage, call: ToolCall | undefined): string {
  const text = resultText(result);
  const firstLine = text.split("\n")[0] ?? "";
  if (result.isError) return `The \`${result.toolName}\` tool reported a problem: ${clip(firstLine, 300)}`;
  switch (result.toolName) {
    case "ls": {
      if (text === "(empty directory)" || text === "")
        return 'The workspace is empty so far. Try "write a note".';
      const names = text
        .split("\n")
        .filter((l) => l !== "" && !l.startsWith("["))
        .map((l) => l.replace(/ \(\d+ bytes\)$/, ""));
      const shown = names.slice(0, 10).join(", ");
      const more = names.length > 10 ? ` and ${names.length - 10} more` : "";
      return `I found ${names.length} ${names.length === 1 ? "entry" : "entries"} in the workspace: ${shown}${more}.`;
    }
    case "write": {
      const path = typeof call?.arguments.path === "string" ? call.arguments.path : undefined;
      return `Done: ${firstLine}.${path ? ` Say "read ${path}" to see it.` : ""}`;
    }
    case "read": {
      const path = typeof call?.arguments.path === "string" ? call.arguments.path : "the file";
      const quoted = preview(text, 12, 1200)
        .split("\n")
        .map((l) => `> ${l}`)
        .join("\n");
      return `Here is ${path}:\n\n${quoted}`;
    }
    case "sleep":
      return `The long task is finished. ${firstLine}.`;
    case "codemode":
      return `My script ran:\n\n${preview(text, 12, 1200)}`;
    default:
      return `The \`${result.toolName}\` tool returned: ${preview(text, 5, 400)}`;
  }
}

/**
 * A compaction's summary request: the demo model lists what the user asked (it does not really
 * summarize), so Compact works offline too and never answers with a tool call.
 */
function demoSummary(conversation: string): string {
  const asked = conversation
    .split("\n")
    .filter((line) => line.startsWith("[User]: "))
    .map((line) => `- "${clip(line.slice("[User]: ".length).trim(), 80)}"`);
  const calls = conversation.split("\n").filter((line) => line.startsWith("[Assistant tool calls]: ")).length;
  return [
    "Summary by the offline demo model (it lists requests; a real model keeps decisions, facts and open tasks).",
    asked.length > 0 ? `The user asked:\n${asked.slice(-8).join("\n")}` : "The user asked nothing yet.",
    `Tool rounds so far: ${calls}.`,
  ].join("\n\n");
}

/** The reply that calls `intent`'s tool; ids derive from the transcript length (unique in a conversation). */
function callFor(intent: Intent, length: number): DemoReply {
  const call: ToolCall = {
    type: "toolCall",
    id: `demo_${length}_0`,
    name: intent.tool,
    arguments: { ...intent.args },
  };
  return { text: intent.preamble, toolCalls: [call] };
}

function lastUser(messages: readonly Message[], before: number): UserMessage | undefined {
  for (let i = before - 1; i >= 0; i--) {
    const m = messages[i]!;
    if (m.role === "user") return m;
  }
  return undefined;
}

/**
 * The listing "write a note" looks at, when the tool results from `start` on are exactly one `ls`
 * made for it (of the workspace root or of the notes directory): the turn goes on from there.
 */
function noteListing(
  messages: readonly Message[],
  start: number,
): { listing: ToolResultMessage; path: string; said: string } | undefined {
  const results = messages.slice(start) as ToolResultMessage[];
  const assistant = messages[start - 1];
  if (results.length !== 1 || results[0]!.toolName !== "ls" || assistant?.role !== "assistant")
    return undefined;
  const path = assistant.content.find((c): c is ToolCall => c.type === "toolCall")?.arguments.path;
  if (path !== "." && path !== NOTES_DIR) return undefined;
  const user = lastUser(messages, start);
  const said = user ? contentText(user.content).trim() : "";
  return asksForNote(said) ? { listing: results[0]!, path, said } : undefined;
}

/** The next step of "write a note" after a listing: look into the notes directory, or write. */
function nextNoteStep(found: { listing: ToolResultMessage; path: string; said: string }): Intent {
  if (found.path === "." && listsNotesDir(found.listing))
    return { tool: "ls", args: { path: NOTES_DIR }, preamble: "There are notes already; let me see which." };
  return noteIntent(found.said, found.path === "." ? 1 : nextFreeNote(found.listing));
}

/** What the demo model answers to `context`: a pure function of the transcript and offered tools. */
export function planDemoReply(context: Context): DemoReply {
  const messages = context.messages;
  const last = messages[messages.length - 1];
  if (!last) return { text: `Hello! I'm the offline demo model. ${HELP}`, toolCalls: [] };
  if (context.systemPrompt === SUMMARY_SYSTEM_PROMPT && last.role === "user")
    return { text: demoSummary(contentText(last.content)), toolCalls: [] };

  if (last.role === "toolResult") {
    let start = messages.length;
    while (start > 0 && messages[start - 1]!.role === "toolResult") start--;
    const assistant = messages[start - 1];
    const calls = assistant?.role === "assistant" ? assistant.content : [];
    const found = noteListing(messages, start);
    if (found) {
      const step = nextNoteStep(found);
      if (offered(context, step.tool)) return callFor(step, messages.length);
    }
    const parts = messages.slice(start).map((m) => {
      const result = m as ToolResultMessage;
      const call = calls.find((c): c is ToolCall => c.type === "toolCall" && c.id === result.toolCallId);
      return summariseOne(result, call);
    });
    return { text: parts.join("\n\n"), toolCalls: [] };
  }

  if (last.role === "assistant") return { text: "I'm here when you need me. " + HELP, toolCalls: [] };

  const said = contentText(last.content).trim();
  const intent = intentOf(said, messages, context);
  if (intent) {
    if (!offered(context, intent.tool)) {
      return {
        text: `I would use the \`${intent.tool}\` tool for that, but it is not available in this conversation.`,
        toolCalls: [],
      };
    }
    if (intent.needs !== undefined && !offered(context, intent.needs)) {
      return {
        text: `I don't see a tool named \`${intent.needs}\` in this conversation. Add it in the settings (Your tools) or enable it for this conversation.`,
        toolCalls: [],
      };
    }
    return callFor(intent, messages.length);
  }
  const echo = said === "" ? "" : `You said: "${clip(said.replace(/\s+/g, " "), 120)}". `;
  return {
    text: `${echo}I'm the offline demo model: I need no API key and answer the same way every time, in the browser or on a server. ${HELP}`,
    toolCalls: [],
  };
}

// ---------------------------------------------------------------------------------------------
// Streaming

const ZERO_USAGE: Usage = Object.freeze({
  input: 0,
  output: 0,
  cacheRead: 0,
  cacheWrite: 0,
  totalTokens: 0,
  cost: Object.freeze({ input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 }),
}) as Usage;

function zeroUsage(): Usage {
  return { ...ZERO_USAGE, cost: { ...ZERO_USAGE.cost } };
}

/**
 * What a real model would have counted, estimated at four characters a token (the demo costs
 * nothing): the app's usage display then shows real-looking figures with no key.
 */
const estimatedTokens = (chars: number) => Math.ceil(chars / 4);

/** The request's side, counted once per request (every streamed snapshot reuses it). */
function estimatedInputTokens(context: Context): number {
  return estimatedTokens((context.systemPrompt ?? "").length + JSON.stringify(context.messages).length);
}

function estimatedUsage(input: number, content: readonly Block[]): Usage {
  const output = estimatedTokens(JSON.stringify(content).length);
  return { ...zeroUsage(), input, output, totalTokens: input + output };
}

function chunks(text: string, size: number): string[] {
  const out: string[] = [];
  // Split on code points so a delta never ends inside a surrogate pair.
  const points = Array.from(text);
  for (let i = 0; i < points.length; i += size) out.push(points.slice(i, i + size).join(""));
  return out;
}

/** Waits `ms` (or one microtask for 0); resolves early when `signal` aborts. */
function pause(ms: number, signal: AbortSignal | undefined): Promise<void> {
  if (ms <= 0 || signal?.aborted) return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener("abort", done, { once: true });
  });
}

type Block = TextContent | ToolCall;

function cloneBlock(block: Block): Block {
  return block.type === "text"
    ? { ...block }
    : { ...block, arguments: JSON.parse(JSON.stringify(block.arguments)) as ToolCall["arguments"] };
}

function streamDemo(
  pi: PiAi,
  model: Model<Api>,
  context: Context,
  options?: StreamOptions,
): AssistantMessageEventStream {
  const stream = pi.createAssistantMessageEventStream();
  const signal = options?.signal;
  const { charsPerChunk, chunkDelayMs } = speed;
  const content: Block[] = [];
  const inputTokens = estimatedInputTokens(context);
  const base = {
    role: "assistant" as const,
    api: model.api,
    provider: model.provider,
    model: model.id,
    timestamp: Date.now(),
  };
  const snapshot = (stopReason: AssistantMessage["stopReason"] = "stop"): AssistantMessage => ({
    ...base,
    content: content.map(cloneBlock),
    usage: estimatedUsage(inputTokens, content),
    stopReason,
  });
  const push = (event: AssistantMessageEvent) => stream.push(event);
  const abortNow = (): boolean => {
    if (!signal?.aborted) return false;
    const error: AssistantMessage = { ...snapshot("aborted"), errorMessage: "Request was aborted" };
    push({ type: "error", reason: "aborted", error });
    stream.end(error);
    return true;
  };

  const run = async () => {
    await Promise.resolve();
    if (abortNow()) return;
    const reply = planDemoReply(context);
    push({ type: "start", partial: snapshot() });

    if (reply.text !== "") {
      const index = content.length;
      const block: TextContent = { type: "text", text: "" };
      content.push(block);
      push({ type: "text_start", contentIndex: index, partial: snapshot() });
      for (const delta of chunks(reply.text, charsPerChunk)) {
        await pause(chunkDelayMs, signal);
        if (abortNow()) return;
        block.text += delta;
        push({ type: "text_delta", contentIndex: index, delta, partial: snapshot() });
      }
      push({ type: "text_end", contentIndex: index, content: block.text, partial: snapshot() });
    }

    for (const call of reply.toolCalls) {
      const index = content.length;
      const block: ToolCall = { type: "toolCall", id: call.id, name: call.name, arguments: {} };
      content.push(block);
      push({ type: "toolcall_start", contentIndex: index, partial: snapshot() });
      let json = "";
      for (const delta of chunks(JSON.stringify(call.arguments), charsPerChunk)) {
        await pause(chunkDelayMs, signal);
        if (abortNow()) return;
        json += delta;
        block.arguments = pi.parseStreamingJson(json);
        push({ type: "toolcall_delta", contentIndex: index, delta, partial: snapshot() });
      }
      block.arguments = JSON.parse(json) as ToolCall["arguments"];
      push({
        type: "toolcall_end",
        contentIndex: index,
        toolCall: cloneBlock(block) as ToolCall,
        partial: snapshot(),
      });
    }

    if (abortNow()) return;
    const reason = reply.toolCalls.length > 0 ? "toolUse" : "stop";
    const message = snapshot(reason);
    push({ type: "done", reason, message });
    stream.end(message);
  };

  run().catch((error: unknown) => {
    const failed: AssistantMessage = {
      ...snapshot("error"),
      errorMessage: errorMessage(error),
    };
    push({ type: "error", reason: "error", error: failed });
    stream.end(failed);
  });
  return stream;
}

/**
 * Registers the demo provider with pi-ai (api "demo") as soon as pi-ai is loaded (at once when it is;
 * always before a request can reach it: see pi-ai.ts); calling it again is harmless.
 */
export function registerDemoProvider(): void {
  whenPiAiLoads((pi) => {
    const stream = (model: Model<Api>, context: Context, options?: StreamOptions) =>
      streamDemo(pi, model, context, options);
    pi.registerApiProvider({ api: DEMO_API, stream, streamSimple: stream }, DEMO_SOURCE_ID);
  });
}
