/**
 * The simulator's named invariants, read from the committed store (SQL on the run's memory store)
 * and from the ledger of what the client and the fake world saw. `checkAll` holds at any moment
 * (after every act and every reopening); `checkQuiet` holds when nothing is live (after a settle and
 * at the end). Each returns how many checks it made; a broken one throws `SimInvariantBroken` with
 * its name. The names:
 * - `acknowledged-kept`: every submission the client saw acknowledged, and every entry a subscriber
 *   saw published, is in the committed store (a reopened store holds everything published before).
 * - `input-once`: no input is placed twice in a conversation, and no request id admitted twice.
 * - `tool-policy`: an unsafe tool runs at most once per call; a keyed effect is applied at most once
 *   per key; a call has at most one result (exactly one when idle).
 * - `task-graph`: a live task's owner exists and is live; an abort mark on a live task reaches its live
 *   owned tasks (marks flow down); an aborted owner ended no earlier than its owned tasks (handlers run
 *   bottom-up); a task that completes waits for its owned work.
 * - `inbox`: every queued item names a queued submission of its conversation, and every queued input
 *   is in its conversation's inbox.
 * - `usage-sums`: each conversation's pi.usage equals the usage of its own assistant and compaction
 *   answers added up (nothing charged twice, nothing lost).
 * - `answered`: when idle, every acknowledged input is settled (or, after a model fault failed its
 *   run, still queued for the next submission: the inbox's rule); those of a conversation that saw
 *   no model fault, abort or withdrawal are answered (`done`), and so are those sent after the abort
 *   that precedes a deletion which a crash undid.
 * - `migrated`: a timer task created under version 1 and finished after the upgrade ran version 2.
 * - `run-ends` (world.ts): the run goes idle within a bound of virtual time and of rounds of work
 *   (idle polls, repeating timers that change nothing, are bounded by virtual time alone).
 */
import type { AgentHarness, MemoryStore, TaskId } from "../../worker/index.ts";

export class SimInvariantBroken extends Error {
  constructor(
    readonly invariant: string,
    message: string,
  ) {
    super(message);
    this.name = "SimInvariantBroken";
  }
}

export interface Ledger {
  /** Request id -> where and as what the client saw it acknowledged. */
  acked: Map<string, { conversationId: number; submissionId: number }>;
  /** Request id -> where the client sent it. */
  sent: Map<string, { conv: number; conversationId: number; whenBusy: "followUp" | "steer" }>;
  /** Executions of the unsafe tool, per call id. */
  unsafeRuns: Map<string, number>;
  /** The keyed effect service: per key, effects applied and calls made. */
  keyed: Map<string, { applied: number; calls: number }>;
  /** Every entry a subscriber saw published. */
  seenEntries: Map<number, { conversationId: number; body: string }>;
  deletedConversations: Set<number>;
  /** Conversations whose requests met a model fault (an input may end unanswered there). */
  modelFaulted: Set<number>;
  /** Conversations the client aborted or withdrew from. */
  aborted: Set<number>;
  /** Inputs sent before the client aborted their conversation to delete it (it may survive a crash). */
  abortedRequests: Set<string>;
  upgraded: boolean;
  timers: Map<TaskId, { conversationId: number; version: number }>;
}

const broken = (name: string, message: string): never => {
  throw new SimInvariantBroken(name, message);
};

interface Row {
  [k: string]: unknown;
}

export interface Snapshot {
  entries: Row[];
  tasks: Row[];
  submissions: Row[];
  docs: Row[];
  conversations: Row[];
  patches: Row[];
}

/** The committed tables, read in one job of the store's line (so no commit falls between two of them). */
export async function snapshot(store: MemoryStore): Promise<Snapshot> {
  return store.read(async (sql) => {
    const all = async (q: string) => (await sql.all(q)) as Row[];
    return {
      entries: await all("SELECT id, conversation_id, kind, body FROM entries ORDER BY id"),
      tasks: await all(
        "SELECT id, conversation_id, kind, version, owner_task, background, abort_requested, status, state, ended_at FROM tasks ORDER BY id",
      ),
      submissions: await all("SELECT id, conversation_id, request_id, body FROM submissions ORDER BY id"),
      docs: await all(
        "SELECT conversation_id, name, value FROM documents WHERE name IN ('pi.inbox', 'pi.usage')",
      ),
      conversations: await all("SELECT id, owner_task FROM conversations ORDER BY id"),
      patches: await all(
        "SELECT id, conversation_id, name FROM doc_patches WHERE name IN ('pi.inbox', 'pi.usage')",
      ),
    };
  });
}

const messageOf = (body: unknown): Record<string, unknown> | undefined => {
  const b = JSON.parse(String(body)) as { model?: unknown[] };
  return Array.isArray(b.model) ? (b.model[0] as Record<string, unknown>) : undefined;
};

/** The invariants that hold at any moment. */
export function checkAt(s: Snapshot, l: Ledger, when: string): number {
  let checks = 0;
  const live = new Set(s.conversations.map((c) => Number(c.id)));
  // acknowledged-kept
  const subs = new Map(s.submissions.map((r) => [Number(r.id), r]));
  for (const [requestId, a] of l.acked) {
    if (l.deletedConversations.has(a.conversationId) || !live.has(a.conversationId)) continue;
    checks++;
    if (!subs.has(a.submissionId))
      broken(
        "acknowledged-kept",
        `${when}: acknowledged ${requestId} (submission ${a.submissionId}) is not in the store`,
      );
  }
  const entryIds = new Map(s.entries.map((e) => [Number(e.id), e]));
  for (const [id, seen] of l.seenEntries) {
    if (l.deletedConversations.has(seen.conversationId) || !live.has(seen.conversationId)) continue;
    checks++;
    const stored = entryIds.get(id);
    if (!stored || Number(stored.conversation_id) !== seen.conversationId)
      broken(
        "acknowledged-kept",
        `${when}: published entry ${id} of conversation ${seen.conversationId} is not in the store ${process.env.DBG ? JSON.stringify([...entryIds.keys()]) + [...l.seenEntries.keys()] : ""}`,
      );
  }
  // input-once
  const placed = new Map<string, number>();
  for (const e of s.entries) {
    if (e.kind !== "pi.user") continue;
    const m = messageOf(e.body);
    const text = typeof m?.content === "string" ? m.content : JSON.stringify(m?.content ?? "");
    const r = /msg (r\d+)/.exec(text)?.[1];
    if (!r) continue;
    const key = `${e.conversation_id}:${r}`;
    placed.set(key, (placed.get(key) ?? 0) + 1);
  }
  for (const [key, n] of placed) {
    checks++;
    if (n > 1) broken("input-once", `${when}: input ${key} placed ${n} times`);
  }
  const requests = new Map<string, number>();
  for (const r of s.submissions) {
    const body = JSON.parse(String(r.body)) as { payload?: { content?: unknown } };
    const text = JSON.stringify(body.payload?.content ?? "");
    const req = /msg (r\d+)/.exec(text)?.[1];
    if (!req) continue;
    const key = `${r.conversation_id}:${req}`;
    requests.set(key, (requests.get(key) ?? 0) + 1);
  }
  for (const [key, n] of requests) {
    checks++;
    if (n > 1) broken("input-once", `${when}: input ${key} admitted as ${n} submissions`);
  }
  // tool-policy
  for (const [call, n] of l.unsafeRuns) {
    checks++;
    if (n > 1) broken("tool-policy", `${when}: the unsafe tool ran ${n} times for call ${call}`);
  }
  for (const [key, k] of l.keyed) {
    checks++;
    if (k.applied > 1) broken("tool-policy", `${when}: keyed effect ${key} applied ${k.applied} times`);
  }
  const results = new Map<string, number>();
  for (const e of s.entries) {
    if (e.kind !== "pi.tool-result") continue;
    const key = `${e.conversation_id}:${String(messageOf(e.body)?.toolCallId)}`;
    results.set(key, (results.get(key) ?? 0) + 1);
  }
  for (const [key, n] of results) {
    checks++;
    if (n > 1) broken("tool-policy", `${when}: tool call ${key} has ${n} results`);
  }
  // task-graph
  const tasks = new Map(s.tasks.map((t) => [Number(t.id), t]));
  for (const t of s.tasks) {
    if (t.owner_task === null) continue;
    const owner = tasks.get(Number(t.owner_task));
    checks++;
    if (!owner)
      broken(
        "task-graph",
        `${when}: task ${t.id} (${t.kind}) is owned by task ${t.owner_task}, which does not exist`,
      );
    else {
      if (t.status !== "terminal" && owner.status === "terminal")
        broken(
          "task-graph",
          `${when}: live task ${t.id} (${t.kind}) has a terminal owner ${owner.id} (${owner.kind})`,
        );
      if (t.status !== "terminal" && owner.abort_requested === 1 && t.abort_requested !== 1)
        broken(
          "task-graph",
          `${when}: abort mark of task ${owner.id} (${owner.kind}) did not flow down to live task ${t.id} (${t.kind})`,
        );
      if (
        owner.status === "terminal" &&
        t.status === "terminal" &&
        Number(owner.ended_at) < Number(t.ended_at)
      )
        broken(
          "task-graph",
          `${when}: task ${owner.id} (${owner.kind}) ended before its owned task ${t.id} (${t.kind})`,
        );
    }
  }
  // inbox
  const byId = new Map(
    s.submissions.map((r) => [
      Number(r.id),
      {
        conversation_id: r.conversation_id,
        parsed: JSON.parse(String(r.body)) as { status: string; type: string },
      },
    ]),
  );
  const queued = new Set<number>();
  const patched = new Set(s.patches.map((p) => `${p.conversation_id}:${p.name}`));
  // A document with patches stored after its row is read whole only by replaying them: skipped.
  const whole = (d: Row) => !patched.has(`${d.conversation_id}:${d.name}`);
  const inboxes = s.docs.filter((d) => d.name === "pi.inbox" && whole(d));
  const checkedInbox = new Set(inboxes.map((d) => Number(d.conversation_id)));
  for (const d of inboxes) {
    const items =
      (JSON.parse(String(d.value)) as { items?: Array<{ id: number; mode: string }> }).items ?? [];
    for (const item of items) {
      checks++;
      const sub = byId.get(item.id);
      if (!sub)
        broken(
          "inbox",
          `${when}: inbox of conversation ${d.conversation_id} holds submission ${item.id}, which does not exist`,
        );
      else if (Number(sub.conversation_id) !== Number(d.conversation_id) || sub.parsed.status !== "queued")
        broken(
          "inbox",
          `${when}: inbox of conversation ${d.conversation_id} holds submission ${item.id}, ${sub.parsed.status} in conversation ${sub.conversation_id}`,
        );
      queued.add(item.id);
    }
  }
  for (const [id, sub] of byId) {
    if (sub.parsed.status !== "queued" || !checkedInbox.has(Number(sub.conversation_id))) continue;
    checks++;
    if (!queued.has(id))
      broken(
        "inbox",
        `${when}: submission ${id} is queued but in no inbox ${process.env.DBG ? JSON.stringify(s.patches) + JSON.stringify(s.submissions) : ""}`,
      );
  }
  return checks;
}

/** The invariants that hold when nothing is live. */
export function checkIdle(s: Snapshot, l: Ledger, when: string): number {
  let checks = 0;
  for (const t of s.tasks) {
    checks++;
    if (t.status !== "terminal") broken("run-ends", `${when}: task ${t.id} (${t.kind}) is still ${t.status}`);
  }
  // tool-policy: each call answered exactly once.
  const results = new Set<string>();
  for (const e of s.entries)
    if (e.kind === "pi.tool-result")
      results.add(`${e.conversation_id}:${String(messageOf(e.body)?.toolCallId)}`);
  const calls = new Set<string>();
  for (const e of s.entries) {
    if (e.kind !== "pi.assistant") continue;
    const m = messageOf(e.body) as
      | { stopReason?: string; content?: Array<{ type: string; id?: string }> }
      | undefined;
    if (m?.stopReason !== "toolUse") continue;
    for (const b of m.content ?? []) if (b.type === "toolCall") calls.add(`${e.conversation_id}:${b.id}`);
  }
  for (const call of calls) {
    checks++;
    if (!results.has(call)) broken("tool-policy", `${when}: tool call ${call} has no result`);
  }
  // usage-sums
  const spent = new Map<number, number>();
  for (const e of s.entries) {
    if (e.kind !== "pi.assistant") continue;
    const m = messageOf(e.body) as { usage?: { totalTokens?: number } } | undefined;
    spent.set(
      Number(e.conversation_id),
      (spent.get(Number(e.conversation_id)) ?? 0) + (m?.usage?.totalTokens ?? 0),
    );
  }
  const patched = new Set(s.patches.map((p) => `${p.conversation_id}:${p.name}`));
  for (const d of s.docs) {
    if (d.name !== "pi.usage" || patched.has(`${d.conversation_id}:${d.name}`)) continue;
    const u = JSON.parse(String(d.value)) as { models?: Record<string, { totalTokens?: number }> };
    const total = Object.values(u.models ?? {}).reduce((a, m) => a + (m.totalTokens ?? 0), 0);
    const parts = spent.get(Number(d.conversation_id)) ?? 0;
    checks++;
    if (total < parts)
      broken(
        "usage-sums",
        `${when}: conversation ${d.conversation_id} counts ${total} tokens in pi.usage, its answers ${parts}`,
      );
  }
  // answered
  const live = new Set(s.conversations.map((c) => Number(c.id)));
  const subs = new Map(
    s.submissions.map((r) => [
      Number(r.id),
      JSON.parse(String(r.body)) as { status: string; reason?: string },
    ]),
  );
  for (const [requestId, a] of l.acked) {
    if (!live.has(a.conversationId)) continue;
    const sub = subs.get(a.submissionId);
    checks++;
    if (!sub) continue; // acknowledged-kept reports it
    // A failed run leaves queued inputs for the next submission (the inbox's rule): allowed after a model fault.
    if (sub.status === "placed" || (sub.status === "queued" && !l.modelFaulted.has(a.conversationId)))
      broken(
        "answered",
        `${when}: acknowledged ${requestId} is still ${sub.status}${process.env.DBG ? JSON.stringify(s.tasks.map((t) => [t.id, t.kind, t.status, t.abort_requested, t.owner_task, String(t.state).slice(0, 200)])) + JSON.stringify(s.docs.filter((d) => d.name === "pi.inbox")) : ""}`,
      );
    if (
      sub.status !== "done" &&
      !l.modelFaulted.has(a.conversationId) &&
      !l.aborted.has(a.conversationId) &&
      !l.abortedRequests.has(requestId)
    )
      broken(
        "answered",
        `${when}: ${requestId} ended ${sub.status} (${sub.reason ?? "?"}) with no fault or abort to forbid an answer`,
      );
  }
  // migrated
  if (l.upgraded)
    for (const [id] of l.timers) {
      const t = s.tasks.find((x) => Number(x.id) === id);
      if (!t) continue;
      checks++;
      const state = JSON.parse(String(t.state)) as {
        outcome?: { status: string; result?: { v?: number }; error?: { message: string } };
      };
      if (
        state.outcome?.status === "faulted" ||
        (state.outcome?.status === "completed" && state.outcome.result?.v !== 2 && Number(t.version) === 2)
      )
        broken("migrated", `${when}: timer task ${id} ended ${JSON.stringify(state.outcome)}`);
    }
  return checks;
}

/**
 * The ledger as it stands now: what was published or acknowledged before the store's read is taken
 * must be in it (reads wait behind every commit admitted before them); what comes while it waits
 * need not be.
 */
function frozen(l: Ledger): Ledger {
  return { ...l, acked: new Map(l.acked), seenEntries: new Map(l.seenEntries) };
}

export async function checkAll(
  _h: AgentHarness,
  l: Ledger,
  store: MemoryStore,
  when: string,
): Promise<number> {
  const before = frozen(l);
  return checkAt(await snapshot(store), before, when);
}

export async function checkQuiet(
  _h: AgentHarness,
  l: Ledger,
  store: MemoryStore,
  when: string,
): Promise<number> {
  const before = frozen(l);
  const s = await snapshot(store);
  return checkAt(s, before, when) + checkIdle(s, before, when);
}
