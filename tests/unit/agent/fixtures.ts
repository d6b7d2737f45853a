/**
 * Shared fixtures of the agent tests: a harness on a memory store with pi-ai's faux provider, a gated
 * tool, and readers for transcripts, pi.live and the inbox. Importing this module registers the
 * afterEach that releases every deferred a test left pending and closes what the test opened.
 */
import {
  fauxAssistantMessage,
  type Message,
  type ToolCall,
  type ToolResultMessage,
} from "@mariozechner/pi-ai";
import { Type } from "typebox";
import { afterEach } from "vitest";
import { type ReplayPolicy, textResult } from "../../../worker/agent/tools/contract.ts";
import {
  type AgentChange,
  AgentHarness,
  type AgentHarnessOptions,
  type Conversation,
  DOC,
  defineTool,
  type EntryRecord,
  type InboxState,
  type LiveState,
  type MemoryStore,
} from "../../../worker/index.ts";
import {
  deferred,
  type FauxAgentModel,
  type FauxRequest,
  type FauxResponder,
  fauxAgentModel,
  memoryStore,
  releaseDeferreds,
} from "../../../worker/testing.ts";

export const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  // A failed test may leave a responder or a tool held: let it go so the engine can close.
  releaseDeferreds();
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** A conversation's entries without pi.system ones (the tool set is announced only when a test has tools). */
export async function transcript(c: Conversation): Promise<EntryRecord[]> {
  return (await c.entries()).filter((e) => e.kind !== "pi.system");
}

export interface Setup {
  h: AgentHarness;
  root: Conversation;
  faux: FauxAgentModel;
  store: MemoryStore;
}

export async function open(
  respond: FauxResponder,
  options: AgentHarnessOptions & { store?: MemoryStore; root?: { agent?: AgentChange } } = {},
): Promise<Setup> {
  const faux = fauxAgentModel(respond);
  const { store: given, root, ...rest } = options;
  const store = given ?? (await memoryStore());
  const h = await AgentHarness.open(store, { models: faux.models, defaultModel: faux.ref, ...rest });
  cleanups.push(async () => {
    await h.close().catch(() => undefined);
    faux.unregister();
  });
  // The root is created here, lazily (spec §2.2): `root.agent` is its agent, applied in that commit.
  return { h, root: await h.root(root ?? {}), faux, store };
}

/**
 * Options that fault a phase from a hook (spec §7.2): `hook` throws `message` (while `when()` holds);
 * a hook's throw is reported, and this reporter throws it on, which faults the phase that ran it.
 */
export function faultingHook(
  hook: "afterTool" | "afterResponse" | "beforeCompact",
  message: string,
  when: () => boolean = () => true,
): Pick<AgentHarnessOptions, "onReport" | "hooks"> {
  const bug = () => {
    if (when()) throw new Error(message);
  };
  return {
    onReport: (error) => {
      throw error;
    },
    hooks: { [hook]: [bug] },
  };
}

export const liveOf = (h: AgentHarness, c = 1): LiveState => (h.docNow(c, DOC.live) ?? {}) as LiveState;
export const inboxOf = (h: AgentHarness, c = 1): InboxState =>
  (h.docNow(c, DOC.inbox) ?? { items: [] }) as unknown as InboxState;
export const messagesOf = (e: EntryRecord): Message[] =>
  Array.isArray(e.model) ? (e.model as unknown as Message[]) : [];
export const messageOf = (e: EntryRecord): Message => messagesOf(e)[0]!;
export const kinds = (entries: readonly EntryRecord[]) => entries.map((e) => e.kind);
export const textOf = (m: Message): string => {
  if (typeof m.content === "string") return m.content;
  return m.content
    .map((b) => ("text" in b ? b.text : b.type === "toolCall" ? `call:${b.name}` : ""))
    .join("");
};
export const last = <T>(list: readonly T[]): T => list[list.length - 1]!;
export const roles = (request: FauxRequest) => request.messages.map((m) => m.role);
export const diagnosticsOf = (e: EntryRecord) =>
  (e.data as { diagnostics: Array<{ severity: string; code?: string; message: string }> }).diagnostics;

/** Answers with the text of the last user message. */
export const echo: FauxResponder = (req) => {
  const user = [...req.messages].reverse().find((m) => m.role === "user");
  return fauxAssistantMessage(`echo: ${user ? textOf(user) : "?"}`);
};

/** The first request of a conversation calls `calls`; every later one answers "done". */
export function callsThenAnswer(...calls: ToolCall[]): FauxResponder {
  return (req) =>
    req.messages.some((m) => m.role === "assistant")
      ? fauxAssistantMessage("done")
      : fauxAssistantMessage(calls, { stopReason: "toolUse" });
}

/** A tool that reports it started, then waits for the gate (or its signal). */
export function gatedTool(name = "hold") {
  const started = deferred();
  const release = deferred();
  const tool = defineTool({
    name,
    description: "Wait until released",
    parameters: Type.Object({}),
    async execute(_args, api) {
      started.resolve();
      await new Promise<void>((resolve, reject) => {
        void release.promise.then(() => resolve());
        api.signal.addEventListener("abort", () => reject(api.signal.reason), { once: true });
      });
      return textResult(`${name} finished`);
    },
  });
  return { tool, started, release };
}

/** A tool whose first call reports it started and waits for the gate; every later call runs at once. Each answers "ran". */
export function heldFirstCallTool(name = "work") {
  const started = deferred();
  const release = deferred();
  let first = true;
  const tool = defineTool({
    name,
    description: name,
    parameters: Type.Object({}),
    async execute() {
      if (first) {
        first = false;
        started.resolve();
        await release.promise;
      }
      return textResult("ran");
    },
  });
  return { tool, started, release };
}

/**
 * The transcript alternates validly: it starts with a user message, every tool call's result follows
 * its assistant message (before any other message), no result appears elsewhere, and two assistant
 * messages never follow each other. Failed and aborted answers do not count (they are never sent).
 */
export function alternationProblems(entries: readonly EntryRecord[]): string[] {
  const problems: string[] = [];
  const messages = entries
    .flatMap(messagesOf)
    .filter((m) => (m.role as string) !== "system")
    .filter((m) => !(m.role === "assistant" && (m.stopReason === "error" || m.stopReason === "aborted")));
  if (messages[0]?.role !== "user") problems.push("does not start with a user message");
  for (let i = 0; i < messages.length; i++) {
    const m = messages[i]!;
    if (m.role === "assistant") {
      const calls = m.content.filter((b): b is ToolCall => b.type === "toolCall");
      const results = messages.slice(i + 1, i + 1 + calls.length) as ToolResultMessage[];
      for (const call of calls) {
        if (!results.some((r) => r.role === "toolResult" && r.toolCallId === call.id))
          problems.push(`call ${call.id} not answered next`);
      }
      if (calls.length === 0 && messages[i + 1]?.role === "assistant")
        problems.push(`two answers in a row at ${i}`);
    } else if (m.role === "toolResult") {
      const owner = [...messages.slice(0, i)].reverse().find((x) => x.role !== "toolResult");
      const ok =
        owner?.role === "assistant" &&
        owner.content.some((b) => b.type === "toolCall" && b.id === m.toolCallId);
      if (!ok) problems.push(`result ${m.toolCallId} is not right after its call`);
    }
  }
  return problems;
}

export const toolResults = async (c: Parameters<typeof transcript>[0]): Promise<EntryRecord[]> =>
  (await transcript(c)).filter((e) => e.kind === "pi.tool-result");

/** A harness on a copy of `store` as it is now (a crash image), with `options`. */
export async function reopen(store: MemoryStore, options: AgentHarnessOptions): Promise<AgentHarness> {
  const copy = await memoryStore(store.image());
  const h = await AgentHarness.open(copy, options);
  cleanups.push(() => h.close().catch(() => undefined));
  return h;
}

/** `{ item }` tool that records each execution's arguments and can be held on its first one. */
export function itemTool(options: { replay?: ReplayPolicy; holdFirst?: boolean; output?: string }) {
  const seen: Array<{ item: unknown }> = [];
  const started = deferred();
  const release = deferred();
  const tool = defineTool({
    name: "apply",
    description: "Apply an item",
    parameters: Type.Object({ item: Type.String() }),
    ...(options.replay ? { replay: options.replay } : {}),
    async execute(args, api) {
      seen.push({ item: args.item });
      if (options.output) api.output(options.output);
      if (options.holdFirst && seen.length === 1) {
        started.resolve();
        await new Promise<void>((resolve, reject) => {
          void release.promise.then(() => resolve());
          api.signal.addEventListener("abort", () => reject(api.signal.reason), { once: true });
        });
      }
      return textResult(`applied ${args.item}`);
    },
  });
  return { tool, seen, started, release };
}
