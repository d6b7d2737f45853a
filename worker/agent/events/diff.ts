/**
 * What changed between two committed values, as events say it: the in-flight assistant message
 * (spec §9.4 `message_update`) and a tool's retained output window. Pure functions over immutable
 * values; a change they cannot express as deltas is sent whole, never guessed.
 */
import type { AssistantMessage } from "@mariozechner/pi-ai";
import type { MessageChange, OutputChange } from "./types.ts";

type Block = AssistantMessage["content"][number];
type Path = (string | number)[];

const same = (a: unknown, b: unknown): boolean => a === b || JSON.stringify(a) === JSON.stringify(b);

/**
 * The changes taking the partial `before` to `after` (one attempt): an inserted block starts, an
 * append to a block's `text`/`thinking` is a delta, appends to strings inside a tool call's
 * `arguments` are `toolcall_delta`s, any other change inside a block sends the block, and any other
 * change to `content` sends the whole message. `[]` when only fields outside `content` (usage)
 * changed; undefined when nothing did.
 */
export function messageChanges(
  before: AssistantMessage,
  after: AssistantMessage,
): MessageChange[] | undefined {
  if (before === after || same(before, after)) return undefined;
  const was = before.content;
  const now = after.content;
  if (now.length < was.length) return [{ type: "message", message: after }];
  const changes: MessageChange[] = [];
  for (let i = 0; i < now.length; i++) {
    const next = now[i]!;
    const prev = was[i];
    if (!prev) {
      changes.push({ type: startOf(next), contentIndex: i, block: next });
      continue;
    }
    if (prev === next || same(prev, next)) continue;
    if (prev.type !== next.type) return [{ type: "message", message: after }];
    changes.push(...blockChanges(i, prev, next));
  }
  return changes;
}

function startOf(block: Block): "text_start" | "thinking_start" | "toolcall_start" {
  return block.type === "text"
    ? "text_start"
    : block.type === "thinking"
      ? "thinking_start"
      : "toolcall_start";
}

/** One block of the same type that changed. */
function blockChanges(i: number, prev: Block, next: Block): MessageChange[] {
  if (prev.type === "toolCall" && next.type === "toolCall") {
    const { arguments: a, ...restA } = prev;
    const { arguments: b, ...restB } = next;
    if (same(restA, restB)) {
      const appends: Array<{ path: Path; delta: string }> = [];
      if (stringAppends(a, b, [], appends))
        return appends.map(({ path, delta }) => ({ type: "toolcall_delta", contentIndex: i, path, delta }));
    }
    return [{ type: "block", contentIndex: i, block: next }];
  }
  const field = prev.type === "text" ? "text" : prev.type === "thinking" ? "thinking" : undefined;
  if (field) {
    const from = (prev as unknown as Record<string, unknown>)[field];
    const to = (next as unknown as Record<string, unknown>)[field];
    const { [field]: _a, ...restA } = prev as unknown as Record<string, unknown>;
    const { [field]: _b, ...restB } = next as unknown as Record<string, unknown>;
    if (typeof from === "string" && typeof to === "string" && to.startsWith(from) && same(restA, restB)) {
      const type = field === "text" ? "text_delta" : "thinking_delta";
      return [{ type, contentIndex: i, delta: to.slice(from.length) }];
    }
  }
  return [{ type: "block", contentIndex: i, block: next }];
}

/**
 * True when `b` is `a` with only strings grown at their ends (same keys, same array lengths);
 * collects each growth. False for any other difference.
 */
function stringAppends(
  a: unknown,
  b: unknown,
  path: Path,
  out: Array<{ path: Path; delta: string }>,
): boolean {
  if (typeof a === "string" && typeof b === "string") {
    if (!b.startsWith(a)) return false;
    if (b.length > a.length) out.push({ path, delta: b.slice(a.length) });
    return true;
  }
  if (Array.isArray(a) && Array.isArray(b)) {
    if (a.length !== b.length) return false;
    return a.every((x, k) => stringAppends(x, b[k], [...path, k], out));
  }
  if (a && b && typeof a === "object" && typeof b === "object" && !Array.isArray(a) && !Array.isArray(b)) {
    const ka = Object.keys(a);
    const kb = Object.keys(b);
    if (ka.length !== kb.length || !ka.every((k) => k in b)) return false;
    return ka.every((k) =>
      stringAppends((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k], [...path, k], out),
    );
  }
  return same(a, b);
}

/**
 * How a tool's retained output went from `before` to `after`. `trimmedBytes` is how many UTF-8 bytes
 * the window says it dropped from its front in between (the growth of the slot's `droppedBytes`):
 * the change is then a front trim of that many bytes and an append, when the texts agree; anything
 * else (a restart, a cut that shortened it otherwise) replaces the window. Whatever it returns,
 * applying it to `before` gives exactly `after`.
 */
export function outputChange(
  before: string | undefined,
  after: string | undefined,
  trimmedBytes: number,
): OutputChange | undefined {
  const was = before ?? "";
  const now = after ?? "";
  if (was === now) return undefined;
  if (now.startsWith(was)) return { append: now.slice(was.length) };
  const cut = trimmedBytes > 0 ? charsInBytes(was, trimmedBytes) : undefined;
  if (cut !== undefined && cut < was.length && now.startsWith(was.slice(cut))) {
    const append = now.slice(was.length - cut);
    return append ? { trimStart: cut, append } : { trimStart: cut };
  }
  return { set: now };
}

/** The number of UTF-16 units that make up the first `bytes` UTF-8 bytes of `text`, if a boundary. */
function charsInBytes(text: string, bytes: number): number | undefined {
  let counted = 0;
  let i = 0;
  while (counted < bytes && i < text.length) {
    const code = text.codePointAt(i)!;
    counted += code < 0x80 ? 1 : code < 0x800 ? 2 : code < 0x10000 ? 3 : 4;
    i += code >= 0x10000 ? 2 : 1;
  }
  return counted === bytes ? i : undefined;
}
