/**
 * Moving a conversation between two stores (two homes: a browser's and a server space's) as a durable
 * handover keyed by a transfer id T. Ids are per store, so the receiver renumbers everything.
 *
 * - Step 1, `prepare` (sender, one commit): the conversation is marked away (`out` move T,
 *   `pending`). From that commit its tasks run nowhere here (the scheduler skips them and writes
 *   nothing of theirs; a running invocation is stopped in memory, its stored state untouched, and
 *   any later commit of it is refused; step 1 lets it return, for at most STOP_GRACE_MS, before the
 *   package leaves), and every write to it is refused with `ConversationMoved`. The package is then read from that frozen state: the visible history flattened, every document,
 *   every submission, the live tasks and the finished tasks they name. Again with T (while pending):
 *   the same package (the tasks that were running at step 1 are carried as running, also after a
 *   reopen turned them back to pending here).
 * - Step 2, `adopt` (receiver, one commit): checks the package whole, then creates the conversation
 *   with new ids (entries keep their order and get increasing ids), its tasks as they were (a running
 *   one as recovery leaves it: it runs again with `runtime.resumed`), and the `in` record T ->
 *   conversation. Again with T: the same conversation. After `refuse` T: refused forever.
 * - Step 2 in parts, for a package larger than one message: `stage` stores each part of its JSON
 *   text durably (one commit each; idempotent; the count fixed by the first part; at most
 *   MAX_STAGED_BYTES in all), then `adoptStaged` joins them and adopts as `adopt` does, deleting the
 *   parts in that commit; `refuse` deletes them too. A part of a refused transfer is refused.
 * - Step 3, `finish` (sender): T is done; the local copy stays for reading, marked as living in the
 *   peer's conversation; its live tasks end `orphaned` ("moved") without running any code.
 * - `cancel` (sender): undo a pending move. Only after the receiver durably refused T (`refuse`
 *   answers `refused`, or the id it adopted T as: then finish instead); the caller (the orchestrator,
 *   worker/app/moves.ts) holds that rule. The tasks run here again; the ones running at step 1 run
 *   with `runtime.resumed`.
 *
 * Every step refuses with `MoveRefused` and changes nothing when it cannot be done. Renumbering ids
 * inside values is typed: a task kind's `moveIds` hook (define.ts), and the layer above's hooks for
 * documents and submission payloads (`MoveHooks`). What does not move: the fork parent (history is
 * flattened), finished subagents' conversations (they stay behind, read-only), documents' history
 * for later forks (a fork of the moved conversation reads its current "asOf" documents).
 */
import type { AnyTaskDefinition, MoveIds, Registry, Tx } from "./define.ts";
import { ConversationMoved, HarnessError, MoveRefused } from "./errors.ts";
import { assertJson, readSubmissionRow } from "./persist.ts";
import { type Overlay, patchTask, type Records } from "./records.ts";
import type { Scheduler } from "./scheduler.ts";
import type { Session } from "./session.ts";
import type {
  ConversationId,
  EntryEdit,
  EntryId,
  EntryRecord,
  Json,
  MoveRecord,
  SubmissionId,
  SubmissionRecord,
  TaskId,
  TaskOutcome,
  TaskRecord,
  TaskState,
} from "./types.ts";

export const MOVE_FORMAT = "durable-agent/move";
export const MOVE_VERSION = 1;

/** How long step 1 lets the conversation's stopped invocations return before the package leaves. */
export const STOP_GRACE_MS = 2000;

/** A transfer id: 1-200 characters of letters, digits and `-_.:`. */
const TRANSFER = /^[\w.:-]{1,200}$/;

/** What the layer above renumbers: the values of the documents and submissions it defines. */
export interface MoveHooks {
  /** A document's value (absent, or returning the value: it holds no id). */
  document?(name: string, value: Json, ids: MoveIds): Json;
  /** A submission's payload (what was submitted, until placed). */
  payload?(submission: MovedSubmission, ids: MoveIds): Json | undefined;
}

export type MovedEntry = Omit<EntryRecord, "conversationId">;
export type MovedSubmission = Omit<SubmissionRecord, "conversationId">;
export type MovedTask = Omit<TaskRecord, "conversationId">;

/** What step 1 hands the receiver: versioned JSON, checked whole before anything is written. */
export interface MovePackage {
  readonly format: typeof MOVE_FORMAT;
  readonly version: typeof MOVE_VERSION;
  readonly transfer: string;
  readonly preparedAt: number;
  /** The conversation in the sender's store. */
  readonly conversation: { readonly id: ConversationId; readonly createdAt: number };
  /** Its visible history, flattened (a fork's inherited entries first), in id order. */
  readonly entries: readonly MovedEntry[];
  readonly documents: ReadonlyArray<{
    readonly name: string;
    readonly value: Json;
    readonly version: number;
  }>;
  readonly submissions: readonly MovedSubmission[];
  /** Its live tasks, and the finished ones they name (waits, checkpoints, documents), in id order. */
  readonly tasks: readonly MovedTask[];
}

/** The receiver's answer to `refuse`. */
export type RefuseAnswer = { status: "refused" } | { status: "adopted"; conversationId: ConversationId };

export interface MoveContext {
  readonly session: Session;
  readonly scheduler: Scheduler;
  readonly registry: Registry;
  readonly hooks: MoveHooks;
}

function checkTransfer(transfer: unknown): asserts transfer is string {
  if (typeof transfer !== "string" || !TRANSFER.test(transfer))
    throw new MoveRefused(
      "bad_package",
      `a transfer id must be 1-200 letters, digits or -_.:, not ${JSON.stringify(transfer)}`,
    );
}

const isLiveState = (s: TaskState) => s.status !== "terminal";

/** The live tasks of a conversation, in id order. */
function liveTasksOf(o: Overlay, c: ConversationId): TaskRecord[] {
  const out: TaskRecord[] = [];
  for (const id of o.base.live) {
    const t = o.task(id);
    if (t && t.conversationId === c && isLiveState(t.state)) out.push(t);
  }
  return out.sort((a, b) => a.id - b.id);
}

/** A collecting id map (the sender's pass): ids stay, the tasks named are noted. */
function collectingIds(c: ConversationId, named: Set<TaskId>): MoveIds {
  return {
    task: (id) => {
      named.add(id);
      return id;
    },
    entry: (id) => id,
    entryAtOrBefore: (id) => id,
    submission: (id) => id,
    conversation: (id) => {
      if (id !== c)
        throw new MoveRefused("bad_package", `a value names conversation ${id}, which does not move`);
      return id;
    },
  };
}

/** Run a definition's hooks over a task's stored values with `ids` (the result: the renumbered task). */
function moveTask(t: MovedTask, definition: AnyTaskDefinition, ids: MoveIds): MovedTask {
  const hooks = definition.moveIds!;
  const state = moveState(t.state, hooks, ids);
  const memos: Record<string, Json> = {};
  for (const [name, value] of Object.entries(t.memos ?? {}))
    memos[name] = hooks.memo ? hooks.memo(name, value, ids) : value;
  return {
    id: ids.task(t.id),
    kind: t.kind,
    version: t.version,
    input: hooks.input(t.input, ids) as Json,
    ...(t.owner !== undefined ? { owner: ids.task(t.owner) } : {}),
    background: t.background,
    abortRequested: t.abortRequested,
    state,
    ...(t.memos !== undefined ? { memos } : {}),
    ...(t.startedAt !== undefined ? { startedAt: t.startedAt } : {}),
    ...(t.endedAt !== undefined ? { endedAt: t.endedAt } : {}),
  };
}

function moveState(
  state: TaskState,
  hooks: NonNullable<AnyTaskDefinition["moveIds"]>,
  ids: MoveIds,
): TaskState {
  switch (state.status) {
    case "pending":
    case "running":
      return { status: state.status, checkpoint: hooks.checkpoint(state.checkpoint, ids) };
    case "waiting":
      return {
        status: "waiting",
        checkpoint: hooks.checkpoint(state.checkpoint, ids),
        on: state.on.map((id) => ids.task(id)),
        policy: state.policy,
        ...(state.until !== undefined ? { until: state.until } : {}),
      };
    default: {
      const outcome = state.outcome as TaskOutcome & { result?: Json };
      const moved =
        outcome.result !== undefined && hooks.result
          ? ({ ...outcome, result: hooks.result(outcome.result, ids) } as TaskOutcome)
          : outcome;
      return { status: state.status, outcome: moved };
    }
  }
}

/** The definition that can renumber and run `t` here, or a `task_kind` refusal. */
function movableDefinition(
  registry: Registry,
  t: { id: TaskId; kind: string; version: number },
): AnyTaskDefinition {
  const definition = registry.get(t.kind);
  if (!definition?.moveIds)
    throw new MoveRefused(
      "task_kind",
      `task ${t.id} is a ${t.kind}, a kind that cannot move (it has no moveIds hook)`,
    );
  if (definition.version !== t.version)
    throw new MoveRefused(
      "task_kind",
      `task ${t.id} (${t.kind}) is stored at version ${t.version}, this engine runs version ${definition.version}`,
    );
  return definition;
}

/** Run the hooks of every value the move renumbers over a collecting map, so a refusal shows before any write. */
function collect(
  ctx: MoveContext,
  c: ConversationId,
  tasks: readonly TaskRecord[],
  documents: ReadonlyArray<{ name: string; value: Json }>,
  submissions: readonly MovedSubmission[],
  named: Set<TaskId>,
): void {
  const ids = collectingIds(c, named);
  for (const t of tasks) moveTask(t, movableDefinition(ctx.registry, t), ids);
  for (const d of documents) ctx.hooks.document?.(d.name, d.value, ids);
  for (const s of submissions) if (s.payload !== undefined) ctx.hooks.payload?.(s, ids);
}

/** Step 1 (sender). Resolves with the package; refuses with MoveRefused, changing nothing. */
export async function prepare(
  ctx: MoveContext,
  transfer: string,
  conversationId: ConversationId,
  also?: (tx: Tx) => void,
): Promise<MovePackage> {
  checkTransfer(transfer);
  const { session, scheduler } = ctx;
  await session.ensureDocs(conversationId).catch(() => undefined);
  const record = await session.commit((tx, o): MoveRecord & { role: "out" } => {
    const existing = o.move("out", transfer);
    if (existing?.role === "out") {
      if (existing.conversationId !== conversationId)
        throw new MoveRefused("moving", `transfer ${transfer} moves conversation ${existing.conversationId}`);
      if (existing.status === "pending") return existing;
      if (existing.status === "done")
        throw new MoveRefused("moved", `conversation ${conversationId} moved (transfer ${transfer} is done)`);
      throw new MoveRefused("cancelled", `transfer ${transfer} was cancelled`);
    }
    if (o.move("in", transfer))
      throw new MoveRefused("bad_package", `this store received transfer ${transfer}: it cannot send it too`);
    const conversation = o.conversation(conversationId);
    if (!conversation) throw new MoveRefused("unknown_conversation", `no conversation ${conversationId}`);
    if (conversation.owner)
      throw new MoveRefused(
        "owned",
        `conversation ${conversationId} belongs to a task of conversation ${conversation.owner.conversationId}: it moves only with it`,
      );
    const away = o.away(conversationId);
    if (away)
      throw new MoveRefused(
        away.status === "pending" ? "moving" : "moved",
        `conversation ${conversationId} is ${away.status === "pending" ? "moving already" : "in another home"} (transfer ${away.transfer})`,
      );
    const tasks = liveTasksOf(o, conversationId);
    // A subagent still working: its conversation (owned by a task of this one) has live work. Such a
    // conversation is in memory (the open loads those of live tasks and those live tasks own; later
    // ones are created here): the loaded records are enough, no scope to load.
    for (const owned of o.base.conversations.values()) {
      if (owned.owner?.conversationId !== conversationId) continue;
      if (o.isLive(owned.owner.taskId) || liveTasksOf(o, owned.id).length > 0)
        throw new MoveRefused(
          "subagent",
          `conversation ${conversationId} has a subagent still working (conversation ${owned.id}): wait for it or stop it first`,
        );
    }
    for (const t of tasks)
      if (session.records.corrupt.has(t.id))
        throw new MoveRefused("task_kind", `task ${t.id} (${t.kind}) cannot be read: it cannot move`);
    o.needDocs(conversationId);
    const documents = documentsOf(o.base, conversationId);
    const named = new Set<TaskId>();
    collect(ctx, conversationId, tasks, documents, [], named);
    for (const id of named) {
      const t = o.task(id);
      if (t && t.conversationId !== conversationId)
        throw new MoveRefused(
          "bad_package",
          `a task of conversation ${conversationId} names task ${id} of another conversation`,
        );
    }
    also?.(tx);
    const record: MoveRecord & { role: "out" } = {
      transfer,
      role: "out",
      status: "pending",
      conversationId,
      at: tx.now(),
      interrupted: tasks.filter((t) => t.state.status === "running").map((t) => t.id),
    };
    o.setMove(record);
    return record;
  });
  // From the commit on, nothing of it runs here: stop what runs, its stored state untouched (its
  // commits are refused), and let the stopped code return before the package leaves, so the
  // receiver does not start while this home's code still runs (a handler ignoring its signal gets
  // STOP_GRACE_MS).
  const reason = new ConversationMoved(conversationId, "moving", transfer);
  const stopped: Promise<void>[] = [];
  for (const [id, invocation] of scheduler.active)
    if (session.records.tasks.get(id)?.conversationId === conversationId) {
      invocation.stop(reason);
      if (invocation.launched) stopped.push(invocation.done);
    }
  // Cancelled later, they run again as interrupted (what was begun may have happened).
  for (const id of record.interrupted) session.records.interrupted.add(id);
  if (stopped.length > 0) {
    let timer: ReturnType<typeof setTimeout> | undefined;
    await Promise.race([
      Promise.all(stopped),
      new Promise<void>((resolve) => {
        timer = setTimeout(resolve, STOP_GRACE_MS);
      }),
    ]);
    clearTimeout(timer);
  }
  return buildPackage(ctx, record);
}

/** A conversation's documents from memory (its documents must be loaded), by name. */
function documentsOf(
  records: Records,
  c: ConversationId,
): Array<{ name: string; value: Json; version: number }> {
  records.needDocs(c);
  const prefix = `${c}:`;
  const out: Array<{ name: string; value: Json; version: number }> = [];
  for (const [key, value] of records.docs) {
    if (!key.startsWith(prefix)) continue;
    out.push({ name: key.slice(prefix.length), value, version: records.docVersions.get(key) ?? 1 });
  }
  return out.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

const withoutConversation = <T extends { conversationId: ConversationId }>(
  record: T,
): Omit<T, "conversationId"> => {
  const { conversationId: _c, ...rest } = record;
  return rest;
};

/** The package of a pending move, read from the state step 1 froze (the same every time). */
async function buildPackage(ctx: MoveContext, record: MoveRecord & { role: "out" }): Promise<MovePackage> {
  const { session } = ctx;
  const c = record.conversationId;
  const conversation = session.records.conversations.get(c)!;
  const entries = await session.entries(c);
  await session.ensureDocs(c);
  const documents = documentsOf(session.records, c);
  const submissions = (
    await session.store.read(async (sql) => {
      const out = [];
      for (const row of await sql.all("SELECT * FROM submissions WHERE conversation_id = ? ORDER BY id", [c]))
        out.push(await readSubmissionRow(sql, row));
      return out;
    })
  ).map(withoutConversation);
  const tasks = new Map<TaskId, TaskRecord>();
  for (const id of session.records.live) {
    const t = session.records.tasks.get(id)!;
    if (t.conversationId === c) tasks.set(id, t);
  }
  // The finished tasks the live ones, the documents and the payloads name (to a fixpoint).
  let named = new Set<TaskId>();
  collect(ctx, c, [...tasks.values()], documents, submissions, named);
  while ([...named].some((id) => !tasks.has(id))) {
    for (const id of named) {
      if (tasks.has(id)) continue;
      const t = await session.task(id);
      if (!t || t.conversationId !== c)
        throw new MoveRefused(
          "bad_package",
          `conversation ${c} names task ${id}, which is not one of its tasks`,
        );
      tasks.set(id, t);
    }
    named = new Set();
    collect(ctx, c, [...tasks.values()], documents, submissions, named);
  }
  const interrupted = new Set(record.interrupted);
  const moved = [...tasks.values()]
    .sort((a, b) => a.id - b.id)
    .map((t): MovedTask => {
      const s = t.state;
      // Running at step 1 (a reopen since may have turned it back to pending here): carried as running.
      const state: TaskState =
        interrupted.has(t.id) && (s.status === "pending" || s.status === "running")
          ? { status: "running", checkpoint: s.checkpoint }
          : s;
      return { ...withoutConversation(t), state };
    });
  return {
    format: MOVE_FORMAT,
    version: MOVE_VERSION,
    transfer: record.transfer,
    preparedAt: record.at,
    conversation: { id: c, createdAt: conversation.createdAt },
    entries: entries.map(withoutConversation),
    documents,
    submissions,
    tasks: moved,
  };
}

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v);
const isId = (v: unknown): v is number => Number.isSafeInteger(v) && (v as number) >= 1;
const STATUSES = new Set(["pending", "running", "waiting", "completing", "terminal"]);
const SUBMISSION_STATUSES = new Set(["queued", "placed", "done", "unanswered"]);

/** Check a package whole (shape, ids, references); throws MoveRefused `bad_package` naming the first problem. */
export function checkPackage(value: unknown): MovePackage {
  const bad = (why: string): never => {
    throw new MoveRefused("bad_package", `the move package is malformed: ${why}`);
  };
  if (!isObject(value)) return bad("it is not an object");
  if (value["format"] !== MOVE_FORMAT) bad(`its format is not ${MOVE_FORMAT}`);
  if (value["version"] !== MOVE_VERSION) bad(`its version ${JSON.stringify(value["version"])} is unknown`);
  try {
    assertJson(value);
  } catch (error) {
    bad((error as Error).message);
  }
  checkTransfer(value["transfer"]);
  if (!Number.isFinite(value["preparedAt"])) bad("preparedAt is not a number");
  const conversation = value["conversation"];
  if (!isObject(conversation) || !isId(conversation["id"]) || !Number.isFinite(conversation["createdAt"]))
    bad("its conversation is not { id, createdAt }");
  const increasing = (list: unknown, what: string): Array<Record<string, unknown>> => {
    if (!Array.isArray(list)) return bad(`its ${what} are not a list`);
    let previous = 0;
    for (const item of list) {
      if (!isObject(item) || !isId(item["id"]) || (item["id"] as number) <= previous)
        bad(`its ${what} need increasing positive integer ids`);
      previous = (item as { id: number }).id;
    }
    return list as Array<Record<string, unknown>>;
  };
  const entries = increasing(value["entries"], "entries");
  const entryIds = new Set<number>();
  for (const e of entries) {
    const where = `entry ${e["id"]}`;
    if (typeof e["kind"] !== "string" || e["kind"] === "") bad(`${where} has no kind`);
    if (e["head"] !== undefined && !(e["head"] === e["id"] || entryIds.has(e["head"] as number)))
      bad(`${where}'s head names no earlier entry of the package`);
    if (e["edits"] !== undefined) {
      if (!Array.isArray(e["edits"])) bad(`${where}'s edits are not a list`);
      for (const edit of e["edits"] as unknown[])
        if (!isObject(edit) || !entryIds.has(edit["target"] as number))
          bad(`${where} edits an entry the package lacks`);
    }
    if (e["byTaskId"] !== undefined && !isId(e["byTaskId"])) bad(`${where}'s task is not an id`);
    if (e["timestamp"] !== undefined && !Number.isFinite(e["timestamp"]))
      bad(`${where}'s time is not a number`);
    entryIds.add(e["id"] as number);
  }
  const documents = value["documents"];
  if (!Array.isArray(documents)) bad("its documents are not a list");
  const names = new Set<string>();
  for (const d of documents as unknown[]) {
    if (!isObject(d) || typeof d["name"] !== "string" || d["name"] === "" || names.has(d["name"]))
      bad("a document has no name, or a name twice");
    if ((d as Record<string, unknown>)["value"] === undefined) bad("a document has no value");
    if (!isId((d as Record<string, unknown>)["version"]))
      bad("a document's version is not a positive integer");
    names.add((d as { name: string }).name);
  }
  const requests = new Set<string>();
  for (const s of increasing(value["submissions"], "submissions")) {
    const where = `submission ${s["id"]}`;
    if (s["type"] !== "input" && s["type"] !== "write") bad(`${where} is neither an input nor a write`);
    if (!SUBMISSION_STATUSES.has(s["status"] as string)) bad(`${where}'s status is unknown`);
    if (s["requestId"] !== undefined) {
      if (typeof s["requestId"] !== "string" || requests.has(s["requestId"]))
        bad(`${where}'s request id is invalid or repeated`);
      requests.add(s["requestId"] as string);
    }
    for (const field of ["entry", "answer"])
      if (s[field] !== undefined && !entryIds.has(s[field] as number))
        bad(`${where}'s ${field} is not an entry of the package`);
  }
  const tasks = increasing(value["tasks"], "tasks");
  const taskIds = new Set(tasks.map((t) => t["id"] as number));
  for (const t of tasks) {
    const where = `task ${t["id"]}`;
    if (typeof t["kind"] !== "string" || t["kind"] === "") bad(`${where} has no kind`);
    if (!isId(t["version"])) bad(`${where}'s version is not a positive integer`);
    if (t["input"] === undefined) bad(`${where} has no input`);
    if (t["owner"] !== undefined && !taskIds.has(t["owner"] as number))
      bad(`${where}'s owner is not a task of the package`);
    if (typeof t["background"] !== "boolean" || typeof t["abortRequested"] !== "boolean")
      bad(`${where}'s flags are not booleans`);
    // Only conversation-owned tasks may be background (spec §5.5), as createTask refuses.
    if (t["owner"] !== undefined && t["background"] === true) bad(`${where} is task-owned and background`);
    if (t["memos"] !== undefined && !isObject(t["memos"])) bad(`${where}'s memos are not an object`);
    const state = t["state"];
    if (!isObject(state) || !STATUSES.has(state["status"] as string)) bad(`${where}'s state is unknown`);
    const s = state as Record<string, unknown>;
    if (s["status"] === "completing" || s["status"] === "terminal") {
      if (!isObject(s["outcome"]) || typeof s["outcome"]["status"] !== "string")
        bad(`${where} has no outcome`);
    } else {
      if (!isObject(s["checkpoint"]) || typeof s["checkpoint"]["phase"] !== "string")
        bad(`${where} has no checkpoint`);
      if (s["status"] === "waiting") {
        if (!Array.isArray(s["on"]) || !(s["on"] as unknown[]).every((id) => taskIds.has(id as number)))
          bad(`${where} waits on a task the package lacks`);
        if (s["policy"] !== "failFast" && s["policy"] !== "allSettled")
          bad(`${where}'s join policy is unknown`);
        if (s["until"] !== undefined && !(Number.isSafeInteger(s["until"]) && (s["until"] as number) >= 0))
          bad(`${where}'s timer is not a time`);
      }
    }
  }
  return value as unknown as MovePackage;
}

/** Step 2 (receiver): adopt a package in one commit; resolves with the new conversation's id. */
export async function adopt(
  ctx: MoveContext,
  raw: unknown,
  also?: (tx: Tx, conversationId: ConversationId) => void,
): Promise<ConversationId> {
  return adoptChecked(ctx, checkPackage(raw), also);
}

async function adoptChecked(
  ctx: MoveContext,
  pkg: MovePackage,
  also?: (tx: Tx, conversationId: ConversationId) => void,
): Promise<ConversationId> {
  const { session, registry, hooks } = ctx;
  const interrupted: TaskId[] = [];
  try {
    return await session.commit((tx, o) => {
      interrupted.length = 0;
      const existing = o.move("in", pkg.transfer);
      if (existing?.role === "in") {
        if (existing.status === "adopted") return existing.conversationId;
        throw new MoveRefused("refused", `this home refused transfer ${pkg.transfer}`);
      }
      if (o.move("out", pkg.transfer))
        throw new MoveRefused("bad_package", `this store sent transfer ${pkg.transfer}: it cannot adopt it`);
      const definitions = new Map<TaskId, AnyTaskDefinition>();
      for (const t of pkg.tasks) definitions.set(t.id, movableDefinition(registry, t));
      // New ids: entries in order (monotonic), then submissions, tasks, the conversation.
      const conversationId = o.nextConversationId++;
      const entryMap = new Map<EntryId, EntryId>();
      const oldEntries = pkg.entries.map((e) => e.id);
      for (const id of oldEntries) entryMap.set(id, o.nextEntryId++);
      const firstNew = (entryMap.get(oldEntries[0]!) ?? o.nextEntryId) - 1;
      const submissionMap = new Map<SubmissionId, SubmissionId>();
      for (const s of pkg.submissions) submissionMap.set(s.id, o.nextSubmissionId++);
      const taskMap = new Map<TaskId, TaskId>();
      for (const t of pkg.tasks) taskMap.set(t.id, o.nextTaskId++);
      const missing = (what: string, id: number): never => {
        throw new MoveRefused("bad_package", `the move package names ${what} ${id}, which it does not carry`);
      };
      const ids: MoveIds = {
        task: (id) => taskMap.get(id) ?? missing("task", id),
        entry: (id) => entryMap.get(id) ?? missing("entry", id),
        entryAtOrBefore: (id) => {
          // The newest moved entry at or before `id` (binary search over the old ids, ascending).
          let lo = 0;
          let hi = oldEntries.length - 1;
          let found = -1;
          while (lo <= hi) {
            const mid = (lo + hi) >> 1;
            if (oldEntries[mid]! <= id) {
              found = mid;
              lo = mid + 1;
            } else hi = mid - 1;
          }
          return found < 0 ? firstNew : entryMap.get(oldEntries[found]!)!;
        },
        submission: (id) => submissionMap.get(id) ?? missing("submission", id),
        conversation: (id) => (id === pkg.conversation.id ? conversationId : missing("conversation", id)),
      };
      // Entries' turns: a task that did not move keeps a distinct id no row holds (its marks are stored).
      const byTask = new Map<TaskId, TaskId>();
      const turnOf = (id: TaskId): TaskId => {
        const moved = taskMap.get(id) ?? byTask.get(id);
        if (moved !== undefined) return moved;
        const fresh = o.nextTaskId++;
        o.keepsIdMarks = true;
        byTask.set(id, fresh);
        return fresh;
      };
      try {
        o.setConversation({ id: conversationId, createdAt: pkg.conversation.createdAt });
        for (const e of pkg.entries) {
          const { id, head, edits, byTaskId, ...rest } = e;
          o.pushEntry({
            ...rest,
            id: entryMap.get(id)!,
            conversationId,
            ...(head !== undefined ? { head: ids.entry(head) } : {}),
            ...(edits !== undefined
              ? { edits: edits.map((edit): EntryEdit => ({ ...edit, target: ids.entry(edit.target) })) }
              : {}),
            ...(byTaskId !== undefined ? { byTaskId: turnOf(byTaskId) } : {}),
          });
        }
        for (const d of pkg.documents)
          o.setDoc(
            conversationId,
            d.name,
            hooks.document ? hooks.document(d.name, d.value, ids) : d.value,
            d.version,
          );
        for (const s of pkg.submissions) {
          const payload = s.payload !== undefined && hooks.payload ? hooks.payload(s, ids) : s.payload;
          const { id, entry, answer, payload: _p, ...rest } = s;
          const record: SubmissionRecord = {
            ...rest,
            id: submissionMap.get(id)!,
            conversationId,
            ...(payload !== undefined ? { payload } : {}),
            ...(entry !== undefined ? { entry: ids.entry(entry) } : {}),
            ...(answer !== undefined ? { answer: ids.entry(answer) } : {}),
          };
          o.markCreatedSubmission(record.id);
          o.setSubmission(record);
        }
        for (const t of pkg.tasks) {
          const moved = moveTask(t, definitions.get(t.id)!, ids);
          const record: TaskRecord = { ...moved, conversationId };
          o.markCreated(record.id);
          o.setTask(record);
          if (record.state.status === "running") interrupted.push(record.id);
        }
      } catch (error) {
        if (error instanceof HarnessError) throw error;
        throw new MoveRefused("bad_package", `the move package does not fit: ${(error as Error).message}`);
      }
      if (o.stagedOf(pkg.transfer)) o.unstage(pkg.transfer);
      o.setMove({
        transfer: pkg.transfer,
        role: "in",
        status: "adopted",
        conversationId,
        from: pkg.conversation.id,
        at: tx.now(),
      });
      also?.(tx, conversationId);
      // Running when the sender stopped them: what they began may have happened (runtime.resumed).
      for (const id of interrupted) session.records.interrupted.add(id);
      return conversationId;
    });
  } catch (error) {
    for (const id of interrupted) session.records.interrupted.delete(id);
    throw error;
  }
}

/** Step 3 (sender): the move is done; the local copy becomes read-only, its tasks end without running. */
export async function finish(
  ctx: MoveContext,
  transfer: string,
  remote: ConversationId,
  also?: (tx: Tx) => void,
): Promise<void> {
  checkTransfer(transfer);
  if (!isId(remote))
    throw new MoveRefused(
      "bad_package",
      `the receiver's conversation id ${JSON.stringify(remote)} is not an id`,
    );
  const { session } = ctx;
  const ended = await session.commit((tx, o) => {
    const record = o.move("out", transfer);
    if (record?.role !== "out")
      throw new MoveRefused("unknown_transfer", `this home sent no transfer ${transfer}`);
    if (record.status === "cancelled")
      throw new MoveRefused("cancelled", `transfer ${transfer} was cancelled`);
    if (record.status === "done") {
      if (record.remote !== remote)
        throw new MoveRefused("moved", `transfer ${transfer} is done, as conversation ${record.remote}`);
      return [];
    }
    const now = tx.now();
    const tasks = liveTasksOf(o, record.conversationId);
    for (const t of tasks)
      o.setTask(
        patchTask(t, {
          state: { status: "terminal", outcome: { status: "orphaned", reason: "moved" } },
          memos: null,
          endedAt: now,
        }),
      );
    o.setMove({ ...record, status: "done", remote });
    also?.(tx);
    return tasks.map((t) => t.id);
  });
  for (const id of ended) session.records.interrupted.delete(id);
}

/**
 * Undo a pending move (sender). Only after the receiver durably refused the transfer: the caller
 * holds that rule. Idempotent; refused once the move is done.
 */
export async function cancel(ctx: MoveContext, transfer: string, also?: (tx: Tx) => void): Promise<void> {
  checkTransfer(transfer);
  await ctx.session.commit((tx, o) => {
    const record = o.move("out", transfer);
    if (record?.role !== "out")
      throw new MoveRefused("unknown_transfer", `this home sent no transfer ${transfer}`);
    if (record.status === "done")
      throw new MoveRefused(
        "moved",
        `transfer ${transfer} is done: the conversation lives in the other home`,
      );
    if (record.status === "cancelled") return;
    o.setMove({ ...record, status: "cancelled" });
    also?.(tx);
  });
  ctx.scheduler.kick();
}

/** The receiver's durable refusal: never adopt `transfer` (or the id it was adopted as, if it was). */
export async function refuse(
  ctx: MoveContext,
  transfer: string,
  also?: (tx: Tx) => void,
): Promise<RefuseAnswer> {
  checkTransfer(transfer);
  return ctx.session.commit((tx, o): RefuseAnswer => {
    const record = o.move("in", transfer);
    if (record?.role === "in") {
      if (record.status === "adopted") return { status: "adopted", conversationId: record.conversationId };
      return { status: "refused" };
    }
    if (o.stagedOf(transfer)) o.unstage(transfer);
    o.setMove({ transfer, role: "in", status: "refused", at: tx.now() });
    also?.(tx);
    return { status: "refused" };
  });
}

/** The most one transfer may stage (UTF-8 bytes of its package's JSON text): the import limit. */
export const MAX_STAGED_BYTES = 64 * 1024 * 1024;
/** The most parts one transfer may be cut into. */
export const MAX_PART_COUNT = 100_000;
/** The deepest nesting a staged package's JSON may have (checked before it is parsed). */
const MAX_STAGED_DEPTH = 64;

/** What `stage` answers: how many of the transfer's parts are stored (`adopted`: it was adopted already). */
export type StageAnswer =
  | { status: "staged"; stored: number; count: number }
  | { status: "adopted"; conversationId: ConversationId };

const utf8 = new TextEncoder();

/**
 * Step 2's first half for a package sent in parts (receiver, one commit per part): store part
 * `index` of `count` of transfer T's package text. Idempotent: a part already stored is not stored
 * again (its first text stays). Refused (`MoveRefused`, nothing stored): a bad index or count, a
 * count that disagrees with the parts stored before (`bad_package`), a transfer refused here
 * (`refused`) or sent from here (`bad_package`), more than MAX_STAGED_BYTES in all (`too_large`).
 * A part of a transfer adopted already is ignored (the answer names the conversation).
 */
export async function stage(
  ctx: MoveContext,
  transfer: string,
  index: number,
  count: number,
  part: string,
): Promise<StageAnswer> {
  checkTransfer(transfer);
  if (!Number.isSafeInteger(count) || count < 1 || count > MAX_PART_COUNT)
    throw new MoveRefused("bad_package", `a package is cut into 1 to ${MAX_PART_COUNT} parts, not ${count}`);
  if (!Number.isSafeInteger(index) || index < 0 || index >= count)
    throw new MoveRefused("bad_package", `part ${index} is not one of ${count} parts`);
  if (typeof part !== "string") throw new MoveRefused("bad_package", "a package's part is not text");
  const bytes = utf8.encode(part).length;
  return ctx.session.commit((_tx, o): StageAnswer => {
    const record = o.move("in", transfer);
    if (record?.role === "in") {
      if (record.status === "adopted") return { status: "adopted", conversationId: record.conversationId };
      throw new MoveRefused("refused", `this home refused transfer ${transfer}`);
    }
    if (o.move("out", transfer))
      throw new MoveRefused("bad_package", `this store sent transfer ${transfer}: it cannot adopt it`);
    const staged = o.stagedOf(transfer);
    if (staged && staged.count !== count)
      throw new MoveRefused(
        "bad_package",
        `transfer ${transfer} was cut into ${staged.count} parts, not ${count}: its parts disagree`,
      );
    if (staged?.parts.has(index)) return { status: "staged", stored: staged.parts.size, count };
    let total = bytes;
    for (const b of staged?.parts.values() ?? []) total += b;
    if (total > MAX_STAGED_BYTES)
      throw new MoveRefused(
        "too_large",
        `this conversation is too large to move: a package takes at most ${MAX_STAGED_BYTES.toLocaleString("en")} bytes`,
      );
    o.stagePart({ transfer, index, count, bytes, part });
    return { status: "staged", stored: (staged?.parts.size ?? 0) + 1, count };
  });
}

/** Whether JSON text nests deeper than `max` (scanned, not parsed). */
function nestsDeeper(text: string, max: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c) i++;
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x7b || c === 0x5b) {
      if (++depth > max) return true;
    } else if (c === 0x7d || c === 0x5d) depth--;
  }
  return false;
}

/**
 * Step 2 for a package sent in parts (receiver, one commit): the staged parts of T joined, parsed
 * and checked whole exactly as `adopt` checks a package, then adopted; the adopt commit deletes the
 * parts. Again with T: the same conversation. Refused (`MoveRefused`) as `adopt` is, and
 * `bad_package` when the text is not a package of transfer T; a part still missing is a
 * `HarnessError` `parts_missing` (not final: the sender stages it and asks again).
 */
export async function adoptStaged(
  ctx: MoveContext,
  transfer: string,
  also?: (tx: Tx, conversationId: ConversationId) => void,
): Promise<ConversationId> {
  checkTransfer(transfer);
  const { session } = ctx;
  const record = session.records.moves.get(`in:${transfer}`);
  if (record?.role === "in") {
    if (record.status === "adopted") return record.conversationId;
    throw new MoveRefused("refused", `this home refused transfer ${transfer}`);
  }
  const rows = await session.store.read((sql) =>
    sql.all("SELECT idx, count, part FROM move_parts WHERE transfer = ? ORDER BY idx", [transfer]),
  );
  const count = rows.length > 0 ? Number(rows[0]!["count"]) : undefined;
  if (count === undefined || rows.length !== count)
    throw new HarnessError(
      "parts_missing",
      `transfer ${transfer} has ${rows.length} of ${count ?? "its"} parts here: send the rest first`,
    );
  const text = rows.map((row) => String(row["part"])).join("");
  if (nestsDeeper(text, MAX_STAGED_DEPTH))
    throw new MoveRefused(
      "bad_package",
      `the move package is malformed: it nests deeper than ${MAX_STAGED_DEPTH}`,
    );
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw new MoveRefused("bad_package", `the move package is not JSON: ${(error as Error).message}`);
  }
  const pkg = checkPackage(value);
  if (pkg.transfer !== transfer)
    throw new MoveRefused("bad_package", `the parts of transfer ${transfer} hold transfer ${pkg.transfer}`);
  return adoptChecked(ctx, pkg, also);
}
