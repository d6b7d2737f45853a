/**
 * The two read-only views of live work, in the specification's shapes: `taskGraph()` (spec §9.5),
 * the live tasks as a structure keyed by decimal id, and `inspect()` (spec §2.2), every live task
 * with what the scheduler makes of it plus the queued and placed submissions. Both read published
 * records only (never the line), so nothing is visible before its COMMIT; settled tasks and
 * submissions are excluded. Building either changes no state and enables no scheduling.
 * `TaskGraphMount` is the live graph behind `watchTaskGraph()`: built from the published records when
 * its first watch attaches, advanced on each publication that changes a node (a node set or deleted,
 * or its owned conversations grown: unchanged nodes are shared), silent on one that changes none, and
 * dropped with its last watch.
 */
import { WATCH_FRAME_LIMIT, Watch } from "./observe.ts";
import type { Records } from "./records.ts";
import type { Blocked, Scheduler } from "./scheduler.ts";
import type {
  BlockedReason,
  ChangeSet,
  ConversationId,
  JoinPolicy,
  SubmissionRecord,
  TaskId,
  TaskOutcome,
  TaskRecord,
} from "./types.ts";

/** A live task's state without its payloads: checkpoint phase, wait, held outcome. */
export type TaskGraphState =
  | { readonly status: "pending" | "running"; readonly phase: string }
  | {
      readonly status: "waiting";
      readonly phase: string;
      readonly on: readonly TaskId[];
      readonly policy: JoinPolicy;
      /** A durable timer's due time, epoch ms (timers.ts). */
      readonly until?: number;
    }
  | { readonly status: "completing"; readonly outcome: TaskOutcome["status"] };

export interface TaskGraphNode {
  readonly id: TaskId;
  readonly kind: string;
  readonly conversationId: ConversationId;
  /** The owning task; absent for a conversation-owned task. */
  readonly owner?: TaskId;
  readonly background: boolean;
  readonly abortRequested: boolean;
  readonly state: TaskGraphState;
  /** Conversations this task owns, in id order. */
  readonly conversations: readonly ConversationId[];
}

/** Live tasks only, keyed by their decimal id. */
export interface TaskGraph {
  readonly tasks: Readonly<Record<string, TaskGraphNode>>;
}

/** What the scheduler makes of a live task now. */
export type TaskInspectionState =
  | { readonly kind: "running" }
  /** Reservable now (`migrates`: the registered definition is newer than the record). */
  | { readonly kind: "ready"; readonly migrates: boolean }
  /** `on`: the live part of its wait, or, when abort-marked, its live ordinary owned work (spec §5.5). */
  | { readonly kind: "waiting"; readonly on: readonly TaskId[]; readonly until?: number }
  /** Outcome held until its ordinary owned work drains (spec §5.5). */
  | { readonly kind: "completing" }
  /** Its definition is missing, too old, or failed to migrate; `error` says which and why. */
  | { readonly kind: "blocked"; readonly reason: BlockedReason; readonly error?: string };

export interface TaskInspection {
  readonly record: TaskRecord;
  readonly state: TaskInspectionState;
}

export interface HarnessInspection {
  readonly scheduling: "paused" | "running" | "closing";
  /** Every live task, in id order. */
  readonly tasks: readonly TaskInspection[];
  /** Queued and placed submissions, in id order. */
  readonly submissions: readonly SubmissionRecord[];
  /** Faults the scheduler wrote for unreadable task records, with their diagnostics. */
  readonly diagnostics: ReadonlyArray<{ readonly id: TaskId; readonly message: string }>;
  /** Why the engine stopped, once the store failed under it. */
  readonly fatal?: string;
}

function liveIds(records: Records): TaskId[] {
  return [...records.live].sort((a, b) => a - b);
}

export function buildTaskGraph(records: Records): TaskGraph {
  const tasks: Record<string, TaskGraphNode> = {};
  for (const id of liveIds(records)) {
    const t = records.tasks.get(id);
    if (!t) continue;
    const state = graphState(t);
    if (!state) continue;
    tasks[String(id)] = {
      id,
      kind: t.kind,
      conversationId: t.conversationId,
      ...(t.owner !== undefined ? { owner: t.owner } : {}),
      background: t.background,
      abortRequested: t.abortRequested,
      state,
      conversations: [...(records.ownedConversations.get(id) ?? [])].sort((a, b) => a - b),
    };
  }
  return { tasks };
}

export class TaskGraphMount {
  #graph: TaskGraph;
  readonly #watches = new Set<Watch<TaskGraph>>();
  readonly #unsubscribe: () => void;

  constructor(
    readonly records: Records,
    subscribe: (listener: (change: ChangeSet) => void) => () => void,
    readonly onIdle: () => void,
  ) {
    this.#graph = buildTaskGraph(records);
    this.#unsubscribe = subscribe((change) => this.#onChange(change));
  }

  get value(): TaskGraph {
    return this.#graph;
  }

  watch(limit = WATCH_FRAME_LIMIT): Watch<TaskGraph> {
    const watch: Watch<TaskGraph> = new Watch(this.#graph, limit, () => {
      this.#watches.delete(watch);
      if (this.#watches.size === 0) this.#release();
    });
    this.#watches.add(watch);
    return watch;
  }

  /** End every watch (close). */
  endAll(): void {
    for (const w of [...this.#watches]) w.end("closed");
    this.#release();
  }

  #released = false;
  #release(): void {
    if (this.#released) return;
    this.#released = true;
    this.#unsubscribe();
    this.onIdle();
  }

  #onChange(change: ChangeSet): void {
    if (change.tasks.length === 0 && change.conversations.length === 0) return;
    const next = buildTaskGraph(this.records).tasks;
    const before = this.#graph.tasks;
    const tasks: Record<string, TaskGraphNode> = {};
    let changed = Object.keys(next).length !== Object.keys(before).length;
    for (const [id, node] of Object.entries(next)) {
      const prev = before[id];
      if (prev && JSON.stringify(prev) === JSON.stringify(node)) tasks[id] = prev;
      else {
        tasks[id] = node;
        changed = true;
      }
    }
    if (!changed) return;
    this.#graph = { tasks };
    for (const w of this.#watches) w.push({ seq: change.seq, value: this.#graph, ops: [] });
  }
}

function graphState(t: TaskRecord): TaskGraphState | undefined {
  const s = t.state;
  switch (s.status) {
    case "pending":
    case "running":
      return { status: s.status, phase: s.checkpoint.phase };
    case "waiting":
      return {
        status: "waiting",
        phase: s.checkpoint.phase,
        on: [...s.on],
        policy: s.policy,
        ...(s.until !== undefined ? { until: s.until } : {}),
      };
    case "completing":
      return { status: "completing", outcome: s.outcome.status };
    default:
      return undefined;
  }
}

/**
 * Each live task, in id order. An abort-marked task waits for its live ordinary owned work before
 * anything else unless an invocation still runs (spec §5.5: its abort handler starts only once that
 * work drained, so neither its definition nor its own wait matters yet); otherwise a drain's verdict (a failed migration) wins
 * over the registry check.
 */
export function inspectTasks(records: Records, scheduler: Scheduler): TaskInspection[] {
  const out: TaskInspection[] = [];
  for (const id of liveIds(records)) {
    const record = records.tasks.get(id);
    if (!record) continue;
    const owned = record.abortRequested ? liveOwnedWork(records, id) : [];
    const b = scheduler.blocked.get(id);
    const state: TaskInspectionState =
      owned.length > 0 && !scheduler.active.has(id) && record.state.status !== "completing"
        ? { kind: "waiting", on: owned }
        : b
          ? blockedState(b)
          : inspectionState(record, records, scheduler);
    out.push({ record, state });
  }
  return out;
}

/** The live tasks a task owns and the live ordinary tasks of the conversations it owns, in id order. */
function liveOwnedWork(records: Records, id: TaskId): TaskId[] {
  const out = [...(records.children.get(id) ?? [])];
  for (const c of records.ownedConversations.get(id) ?? [])
    out.push(...(records.conversationTasks.get(c) ?? []));
  return out.sort((a, b) => a - b);
}

function blockedState(b: Blocked): TaskInspectionState {
  return { kind: "blocked", reason: b.reason, ...(b.detail ? { error: b.detail } : {}) };
}

function inspectionState(t: TaskRecord, records: Records, scheduler: Scheduler): TaskInspectionState {
  const s = t.state;
  if (s.status === "running") return { kind: "running" };
  if (s.status === "completing") return { kind: "completing" };
  // An abort mark lets a waiting task leave its wait for its abort handler (spec §5.5); otherwise it
  // waits for the live part of its `on`.
  if (s.status === "waiting" && !t.abortRequested) {
    const on = s.on.filter((w) => records.live.has(w));
    if (on.length > 0) return { kind: "waiting", on, ...(s.until !== undefined ? { until: s.until } : {}) };
    // A durable timer not due yet (timers.ts).
    if (s.until !== undefined && s.until > scheduler.session.now())
      return { kind: "waiting", on, until: s.until };
  }
  const checked = scheduler.check(t);
  return "migrates" in checked ? { kind: "ready", migrates: checked.migrates } : blockedState(checked);
}

export function openSubmissions(records: Records): SubmissionRecord[] {
  return [...records.submissions.values()]
    .filter((s) => s.status === "queued" || s.status === "placed")
    .sort((a, b) => a.id - b.id);
}
