/**
 * The partial answer in pi.live, kept current while a response streams: a throttled writer commits
 * the newest partial at most every `intervalMs`. A commit stores only what changed since the stored
 * partial (document patches: text appended to the growing block, new blocks, changed fields), so a
 * long answer is stored about once, not once per progress commit; anything a patch cannot say (a
 * block that shrank or changed kind, a removed field) is written whole.
 */
import type { AssistantMessage } from "@mariozechner/pi-ai";
import type { DocPatch } from "../../core/doc-patch.ts";
import type { ConversationId, Json, TaskId } from "../../core/types.ts";
import { DOC, type LiveState, live, writeDoc } from "../records.ts";
import { ThrottledWriter } from "../throttle.ts";
import type { GenerationRuntime } from "./turn.ts";

type Block = AssistantMessage["content"][number];
const MESSAGE: readonly ["generation", "message"] = ["generation", "message"];
/** Block fields that only grow while a response streams. */
const GROWING = ["text", "thinking"] as const;

export class PartialWriter {
  #latest: AssistantMessage | undefined;
  readonly #writer: ThrottledWriter;

  constructor(
    runtime: GenerationRuntime,
    conversationId: ConversationId,
    taskId: TaskId,
    attempt: number,
    intervalMs: number,
  ) {
    const write = async () => {
      const message = this.#latest;
      if (!message || message.content.length === 0) return;
      const copy = JSON.parse(JSON.stringify(message)) as AssistantMessage;
      await runtime.commit((tx) => {
        const state = live(tx, conversationId);
        const stored = state.generation;
        const patches =
          stored?.taskId === taskId &&
          stored.attempt === attempt &&
          stored.message &&
          Object.keys(stored).length === 3
            ? messagePatches(stored.message, copy)
            : undefined;
        if (patches) {
          if (patches.length > 0) tx.patchDoc(conversationId, DOC.live, patches);
        } else {
          writeDoc<LiveState>(tx, conversationId, DOC.live, {
            ...state,
            generation: { taskId, attempt, message: copy },
          });
        }
        return undefined;
      });
    };
    this.#writer = new ThrottledWriter({ intervalMs, write });
  }

  offer(partial: AssistantMessage): void {
    this.#latest = partial;
    this.#writer.mark();
  }

  stop(): Promise<void> {
    return this.#writer.stop();
  }
}

/** Patches taking the stored partial `before` to `after`, or undefined when only a whole write can. */
export function messagePatches(before: AssistantMessage, after: AssistantMessage): DocPatch[] | undefined {
  if (after.content.length < before.content.length) return undefined;
  const patches: DocPatch[] = [];
  const was = before as unknown as Record<string, Json | undefined>;
  const now = after as unknown as Record<string, Json | undefined>;
  for (const key of new Set([...Object.keys(was), ...Object.keys(now)])) {
    if (key === "content") continue;
    const value = now[key];
    if (value === undefined) {
      if (was[key] !== undefined) return undefined;
    } else if (JSON.stringify(was[key]) !== JSON.stringify(value)) {
      patches.push({ path: [...MESSAGE, key], set: value });
    }
  }
  for (let i = 0; i < after.content.length; i++) {
    const next = after.content[i]!;
    const prev = before.content[i];
    const path = [...MESSAGE, "content", i];
    if (!prev) {
      patches.push({ path, set: next as unknown as Json });
      continue;
    }
    const grown = growth(prev, next);
    if (grown) {
      if (grown.text) patches.push({ path: [...path, grown.field], append: grown.text });
    } else if (JSON.stringify(prev) !== JSON.stringify(next)) {
      patches.push({ path, set: next as unknown as Json });
    }
  }
  return patches;
}

/** When `next` is `prev` with one growing field extended, that field and the added text. */
function growth(prev: Block, next: Block): { field: string; text: string } | undefined {
  if (prev.type !== next.type) return undefined;
  const a = prev as unknown as Record<string, unknown>;
  const b = next as unknown as Record<string, unknown>;
  for (const field of GROWING) {
    const from = a[field];
    const to = b[field];
    if (typeof from !== "string" || typeof to !== "string" || !to.startsWith(from)) continue;
    const { [field]: _a, ...restA } = a;
    const { [field]: _b, ...restB } = b;
    if (JSON.stringify(restA) === JSON.stringify(restB)) return { field, text: to.slice(from.length) };
  }
  return undefined;
}
