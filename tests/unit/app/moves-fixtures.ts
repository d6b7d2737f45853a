/**
 * Two homes in one process for the move tests: each an AgentHarness on its own memory store, with
 * the same tools (`launch`: unsafe, applies its effect at once; `stamp`: safe, keyed, and held until
 * its home's `hold` is released, so a move can catch it running) and one faux model. The scenario a
 * move is tested on: a conversation whose run is in the middle of a tool round (launch finished,
 * stamp running) with a second input queued behind it.
 */
import { fauxAssistantMessage, fauxToolCall, type Message } from "@mariozechner/pi-ai";
import { Type } from "typebox";
import { afterAll, afterEach, beforeAll } from "vitest";
import { defineTool, textResult } from "../../../worker/agent/tools/contract.ts";
import {
  AgentHarness,
  type ConversationId,
  type EntryRecord,
  type SubmissionRecord,
} from "../../../worker/index.ts";
import type { MemoryStore } from "../../../worker/store/open.ts";
import { type FauxAgentModel, fauxAgentModel } from "../../../worker/testing.ts";
import { KeyedEffects } from "../core/fixtures/fakes.ts";

export const FIRST = { type: "input", content: "first", requestId: "r1" } as const;
export const SECOND = { type: "input", content: "second", requestId: "r2", whenBusy: "followUp" } as const;

/** The outside world both homes act on: it outlives any crash. */
export class World {
  readonly launch = new KeyedEffects();
  readonly stamp = new KeyedEffects();
  /** Broken rules seen while running (a tool run by a home that does not own its conversation...). */
  readonly violations: string[] = [];
}

export interface Home {
  readonly name: string;
  store: MemoryStore;
  harness: AgentHarness;
  /** Stamp calls wait while this is held; `release()` lets them (and later ones) go. */
  held: boolean;
  releases: Array<() => void>;
  /** Resolves when a stamp call started executing in this home. */
  stampStarted: Promise<void>;
  dead: boolean;
}

/** The model: the tool round for "first", an answer once both results are in, an answer to "second". */
export function respond(request: { messages: Message[] }) {
  const messages = request.messages;
  const lastUser = [...messages].reverse().find((m) => m.role === "user");
  const text = typeof lastUser?.content === "string" ? lastUser.content : "";
  const after = messages.slice(messages.lastIndexOf(lastUser!) + 1);
  if (text === "first" && !after.some((m) => m.role === "toolResult"))
    return fauxAssistantMessage(
      [
        fauxToolCall("launch", { item: "rocket" }, { id: "call-launch" }),
        fauxToolCall("stamp", { item: "invoice-7" }, { id: "call-stamp" }),
      ],
      { stopReason: "toolUse" },
    );
  return fauxAssistantMessage(`done ${text}`);
}

/**
 * The hooks every moves test file shares: one faux model for the file (made before its tests,
 * unregistered after), and the homes a test opened closed after it (`track`).
 */
export function movesSuite(): { readonly faux: FauxAgentModel; track(...homes: Home[]): void } {
  let faux: FauxAgentModel | undefined;
  let opened: Home[] = [];
  beforeAll(() => {
    faux = makeFaux();
  });
  afterAll(() => faux?.unregister());
  afterEach(async () => {
    for (const home of opened) await home.harness.close().catch(() => undefined);
    opened = [];
  });
  return {
    get faux() {
      if (!faux) throw new Error("the faux model is made before the file's tests");
      return faux;
    },
    track: (...homes) => {
      opened.push(...homes);
    },
  };
}

export function makeFaux(): FauxAgentModel {
  return fauxAgentModel((request) => respond(request));
}

function tools(world: World, home: Home) {
  const owns = (c: ConversationId) => !home.dead && home.harness.awayOf(c) === undefined;
  return [
    defineTool({
      name: "launch",
      description: "Launch an item (not safe to repeat)",
      parameters: Type.Object({ item: Type.String() }),
      replay: "unsafe",
      async execute(args, api) {
        if (!owns(api.conversationId))
          world.violations.push(`launch ran in ${home.name}, which does not own it`);
        await world.launch.apply(`launch:${api.toolCallId}`, args.item);
        return textResult(`launch applied ${args.item}`);
      },
    }),
    defineTool({
      name: "stamp",
      description: "Stamp an item (safe to repeat)",
      parameters: Type.Object({ item: Type.String() }),
      replay: "safe",
      async execute(args, api) {
        if (!owns(api.conversationId))
          world.violations.push(`stamp ran in ${home.name}, which does not own it`);
        // A memo on the tool's task (break 30K): the move's orphaning commit must drop it here.
        await api.memo("stamp-item", args.item);
        (home as { started?: () => void }).started?.();
        if (home.held)
          await new Promise<void>((resolve, reject) => {
            home.releases.push(resolve);
            api.signal.addEventListener("abort", () => reject(api.signal.reason), { once: true });
          });
        if (!owns(api.conversationId))
          world.violations.push(`stamp applied in ${home.name}, which does not own it`);
        await world.stamp.apply(`stamp:${api.toolCallId}`, args.item);
        return textResult(`stamp applied ${args.item}`);
      },
    }),
  ];
}

/** Open (or reopen) a home's harness on `store`. */
export async function openHome(
  home: Home | { name: string; held: boolean },
  store: MemoryStore,
  world: World,
  faux: FauxAgentModel,
  options: { groupCommit?: boolean; maxValueBytes?: number; now?: () => number } = {},
): Promise<Home> {
  const h = home as Home;
  h.store = store;
  h.dead = false;
  h.releases ??= [];
  h.stampStarted = new Promise<void>((resolve) => {
    (h as { started?: () => void }).started = resolve;
  });
  h.harness = await AgentHarness.open(store, {
    models: faux.models,
    defaultModel: faux.ref,
    tools: tools(world, h),
    ...(options.groupCommit === false ? { groupCommit: false } : {}),
    ...(options.maxValueBytes !== undefined ? { maxValueBytes: options.maxValueBytes } : {}),
    ...(options.now !== undefined ? { now: options.now } : {}),
  });
  return h;
}

export function release(home: Home): void {
  home.held = false;
  for (const r of home.releases.splice(0)) r();
}

/**
 * In `home`: a new conversation, "first" submitted and its tool round caught with launch done and
 * stamp running (held), "second" queued behind it. Resolves with the conversation.
 */
export async function midToolRound(home: Home): Promise<ConversationId> {
  const h = home.harness;
  const conversation = await h.createConversation({ ownership: { kind: "ownerless" } });
  await conversation.submit(FIRST);
  await home.stampStarted;
  // The launch result is committed (its task is terminal) before the move.
  for (;;) {
    const entries = await conversation.entries();
    if (entries.some((e) => e.kind === "pi.tool-result")) break;
    await new Promise((r) => setTimeout(r, 1));
  }
  await conversation.submit(SECOND);
  return conversation.id;
}

const message = (e: EntryRecord) => (e.model as unknown as Message[] | undefined)?.[0];

/** The text of each entry, for comparing transcripts across homes and runs. */
export function transcript(entries: readonly EntryRecord[]): string[] {
  return entries.map((e) => {
    const m = message(e) as
      | { role: string; content: string | Array<{ type: string; text?: string; name?: string }> }
      | undefined;
    if (!m) return e.kind;
    const content =
      typeof m.content === "string"
        ? m.content
        : m.content
            .map((b) => (b.type === "text" ? b.text : b.type === "toolCall" ? `call ${b.name}` : b.type))
            .join("|");
    return `${e.kind} ${m.role}: ${content}`;
  });
}

export async function settled(
  h: AgentHarness,
  c: ConversationId,
  requestId: string,
): Promise<SubmissionRecord | undefined> {
  return h.submissionByRequest(c, requestId);
}
