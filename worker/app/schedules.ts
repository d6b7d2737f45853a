/**
 * Schedules (issue 31, part 4): "every weekday at 9:00, summarize my notes" or "in 2 hours, check
 * …", attached to a conversation. A schedule is kept in its conversation's `app.schedules`
 * document (so every tab's view shows it, and it goes with its conversation when that is deleted
 * or moved; a fork does not inherit it) and carried by one background task, `app.schedule`, that
 * sleeps on the core's durable timer (worker/core/timers.ts) until the next occurrence.
 *
 * When it fires, one commit submits the input (per occurrence, keyed `schedule:<id>:<time>` so a
 * replay is the same submission), writes its note into the transcript, records the firing in the
 * document and commits the wait for the next occurrence (or ends the task: a one-off is done). So a
 * firing happens exactly once whatever crashes, reloads or tabs there are: the timer's reserving
 * commit and this one are the only writes (the single engine per store guarantees one scheduler).
 *
 * Catch-up: an occurrence the timer reached more than `LATE_MS` after its time was missed (the app
 * was closed, or the machine slept). On that firing the schedule's `catchUp` decides: `run` submits
 * each missed occurrence once (at most `MAX_CATCH_UP`, the rest counted skipped), `skip` submits none;
 * either way a note says how many were missed, when, and which was done.
 *
 * Edits, pauses and resumes bump the schedule's revision and start a new task; the old task is
 * aborted, and a task that wakes to find its revision gone ends without firing (so even a crash
 * between the edit and the abort fires nothing twice). Deleting removes it and aborts its task.
 * Moving its conversation to another home (worker/core/move.ts) takes the schedule along: the
 * document is copied, and the task moves as it is (`moveIds`: its input, checkpoint and result hold
 * no id), still sleeping on its timer with its due time. From the sender's step 1 its timer fires
 * nowhere there (the conversation is away; its task ends `orphaned` at step 3); the receiver's
 * scheduler fires it at its time (at once when it came due during the move), so no occurrence fires
 * twice: the last firing before the move is in the moved document (`after`), and each occurrence's
 * input keeps its request id, which the moved submissions carry too.
 * A cron expression has five fields (minute hour day month weekday), read in the schedule's IANA time
 * zone by croner; its words come from cronstrue. Bad drafts are refused with `ScheduleInvalid`.
 */
import { Cron } from "croner";
// The file itself: cronstrue names only `main`, which the server bundle (platform neutral) does not read.
import cronstrue from "cronstrue/dist/cronstrue.js";
import type { AgentHarness } from "../agent/harness.ts";
import { defineTask, type TaskDefinition, type Tx } from "../core/define.ts";
import { HarnessError, UnknownConversation } from "../core/errors.ts";
import { timerWait } from "../core/timers.ts";
import type { ConversationId, Json, TaskId } from "../core/types.ts";
import type {
  Schedule,
  ScheduleDraft,
  SchedulePreview,
  SchedulesDoc,
  ScheduleWhen,
} from "../protocol/api.ts";
import { scheduleNote } from "../protocol/readers.ts";

export const SCHEDULES_DOC = "app.schedules";
export const SCHEDULE_TASK = "app.schedule";
/** The document's fork rule (AgentHarnessOptions.documents): a fork does not inherit schedules. */
export const SCHEDULE_DOCUMENTS = [{ name: SCHEDULES_DOC, fork: "initial" as const }];
/** A firing later than this after its occurrence means the occurrence was missed (app closed). */
export const LATE_MS = 2 * 60_000;
/** The most missed occurrences one start runs; older ones are counted skipped. */
export const MAX_CATCH_UP = 10;
/** How many occurrences one firing looks at (the rest of a long absence is counted, not listed). */
const MAX_SCAN = 1000;

/** A draft the engine cannot use. */
export class ScheduleInvalid extends HarnessError {
  constructor(
    code: "bad_cron" | "bad_time_zone" | "past_time" | "bad_text" | "unknown_schedule",
    message: string,
  ) {
    super(code, message);
  }
}

function checkTimeZone(timeZone: string): void {
  try {
    new Intl.DateTimeFormat("en", { timeZone });
  } catch {
    throw new ScheduleInvalid(
      "bad_time_zone",
      `"${timeZone}" is not a time zone (try one like Europe/Berlin)`,
    );
  }
}

function cronOf(expression: string, timeZone: string): Cron {
  const fields = expression.trim().split(/\s+/);
  if (fields.length !== 5)
    throw new ScheduleInvalid(
      "bad_cron",
      `"${expression}" has ${fields.length} fields; a schedule has five: minute hour day month weekday`,
    );
  try {
    return new Cron(fields.join(" "), { timezone: timeZone, paused: true });
  } catch (error) {
    throw new ScheduleInvalid(
      "bad_cron",
      `"${expression}" is not a cron expression: ${(error as Error).message}`,
    );
  }
}

/** The first occurrence strictly after `after`, or undefined when none is to come. */
export function nextOccurrence(when: ScheduleWhen, timeZone: string, after: number): number | undefined {
  if (when.kind === "once") return when.at > after ? when.at : undefined;
  return cronOf(when.cron, timeZone).nextRun(new Date(after))?.getTime();
}

/** A time in words in the schedule's time zone: "Mon 5 Jan, 09:00". */
export function timeInWords(at: number, timeZone: string): string {
  return new Intl.DateTimeFormat("en-GB", {
    timeZone,
    weekday: "short",
    day: "numeric",
    month: "short",
    hour: "2-digit",
    minute: "2-digit",
  }).format(at);
}

/** Check a draft (throws ScheduleInvalid) and say it in words with its next times. */
export function previewSchedule(draft: ScheduleDraft, now: number): SchedulePreview {
  if (typeof draft.text !== "string" || draft.text.trim() === "")
    throw new ScheduleInvalid("bad_text", "a schedule needs the words it will send");
  checkTimeZone(draft.timeZone);
  if (draft.when.kind === "once") {
    if (!Number.isSafeInteger(draft.when.at) || draft.when.at <= now)
      throw new ScheduleInvalid("past_time", `${timeInWords(draft.when.at, draft.timeZone)} is in the past`);
    return {
      description: `Once, ${timeInWords(draft.when.at, draft.timeZone)} (${draft.timeZone})`,
      next: [draft.when.at],
    };
  }
  const cron = cronOf(draft.when.cron, draft.timeZone);
  const next = cron.nextRuns(3, new Date(now)).map((d) => d.getTime());
  if (next.length === 0) throw new ScheduleInvalid("bad_cron", `"${draft.when.cron}" never comes again`);
  let words: string;
  try {
    words = cronstrue.toString(draft.when.cron.trim(), { use24HourTimeFormat: true, verbose: false });
  } catch {
    words = draft.when.cron.trim();
  }
  return { description: `${words} (${draft.timeZone})`, next };
}

// --- The document ---------------------------------------------------------------------------

function readSchedules(tx: Tx, conversationId: ConversationId): Schedule[] {
  return [
    ...((tx.readDoc<Json>(conversationId, SCHEDULES_DOC) as unknown as SchedulesDoc | undefined)?.items ??
      []),
  ];
}

function writeSchedules(tx: Tx, conversationId: ConversationId, items: readonly Schedule[]): void {
  tx.writeDoc(conversationId, SCHEDULES_DOC, { items } as unknown as Json);
}

function replace(tx: Tx, conversationId: ConversationId, next: Schedule): void {
  writeSchedules(
    tx,
    conversationId,
    readSchedules(tx, conversationId).map((s) => (s.id === next.id ? next : s)),
  );
}

// --- The task -------------------------------------------------------------------------------

type ScheduleInput = { scheduleId: string; revision: number };
type ScheduleState = { phase: "plan" } | { phase: "fire"; due: number };

/** The schedule this task carries, if it is still its current revision and not paused. */
function current(tx: Tx, conversationId: ConversationId, input: ScheduleInput): Schedule | undefined {
  const s = readSchedules(tx, conversationId).find((x) => x.id === input.scheduleId);
  return s && s.revision === input.revision && !s.paused && !s.done ? s : undefined;
}

const ended = (result: string) => ({ status: "terminal", outcome: { status: "completed", result } }) as const;

/** The `app.schedule` task over `agent` (read when it fires: the harness it is registered in). */
export function scheduleTask(
  agent: () => AgentHarness,
): TaskDefinition<ScheduleInput, ScheduleState, string> {
  return defineTask<ScheduleInput, ScheduleState, string>({
    name: SCHEDULE_TASK,
    version: 1,
    initial: () => ({ phase: "plan" }),
    // Nothing it stores names a task, an entry, a submission or a conversation: it moves as it is.
    moveIds: { input: (input) => input, checkpoint: (checkpoint) => checkpoint, result: (r) => r },
    phases: {
      plan: async (task, runtime) => {
        await runtime.commit((tx) => {
          const s = current(tx, task.conversationId, task.input);
          if (!s) return ended("replaced");
          const due = nextOccurrence(s.when, s.timeZone, s.after);
          if (due === undefined) {
            const { next: _, ...rest } = s;
            replace(tx, task.conversationId, { ...rest, done: true });
            return ended("done");
          }
          replace(tx, task.conversationId, { ...s, next: due });
          return timerWait<ScheduleState, string>({ phase: "fire", due }, due);
        });
      },
      fire: async (task, runtime) => {
        await runtime.commit((tx) => {
          const s = current(tx, task.conversationId, task.input);
          if (!s) return ended("replaced");
          return fire(tx, agent(), task.conversationId, s, task.state.checkpoint.due);
        });
      },
    },
    abort: async (_task, runtime) => {
      await runtime.commit(() => ({
        status: "terminal",
        outcome: { status: "aborted", reason: "schedule changed" },
      }));
    },
  });
}

/** One firing, inside the task's commit: submit, say it, record it, and wait for the next one. */
function fire(tx: Tx, agent: AgentHarness, conversationId: ConversationId, s: Schedule, due: number) {
  const now = tx.now();
  const occurrences = [due];
  let total = 1;
  for (let at = nextOccurrence(s.when, s.timeZone, due); at !== undefined && at <= now; ) {
    total++;
    if (occurrences.length < MAX_SCAN) occurrences.push(at);
    at = nextOccurrence(s.when, s.timeZone, at);
    if (total > 100_000) break;
  }
  const last = occurrences.at(-1)!;
  const missed = occurrences.filter((at) => now - at > LATE_MS);
  const missedTotal = total - (occurrences.length - missed.length);
  const onTime = occurrences.filter((at) => now - at <= LATE_MS);
  const run = s.catchUp === "run" ? [...missed.slice(-MAX_CATCH_UP), ...onTime] : onTime;
  const ranMissed = s.catchUp === "run" ? Math.min(missed.length, MAX_CATCH_UP) : 0;
  const skipped = missedTotal - ranMissed;
  const words = (list: number[]) => {
    const shown = list.slice(0, 5).map((at) => timeInWords(at, s.timeZone));
    return list.length > 5 ? `${shown.join(", ")} and ${list.length - 5} more` : shown.join(", ");
  };
  let note: string;
  if (missedTotal === 0) note = `Scheduled run: ${s.description}.`;
  else {
    const count = missedTotal === 1 ? "1 scheduled run was" : `${missedTotal} scheduled runs were`;
    const what =
      s.catchUp === "run"
        ? skipped > 0
          ? `Ran the latest ${ranMissed} once each now and skipped ${skipped}.`
          : missedTotal === 1
            ? "Ran it once now."
            : "Ran each once now."
        : "Skipped, as this schedule says.";
    note = `While the app was closed, ${count} missed (${words(missed)}). ${what}`;
  }
  agent.submitIn(tx, conversationId, {
    type: "write",
    requestId: `schedule-note:${s.id}:${due}`,
    entry: scheduleNote.draft({ scheduleId: s.id, text: note }),
  });
  for (const at of run)
    agent.submitIn(tx, conversationId, {
      type: "input",
      content: s.text,
      requestId: `schedule:${s.id}:${at}`,
    });
  const next = nextOccurrence(s.when, s.timeZone, Math.max(last, now));
  const { next: _, ...rest } = s;
  const fired: Schedule = {
    ...rest,
    after: last,
    last: { at: now, ran: run.length, skipped },
    ...(next === undefined ? { done: true } : { next }),
  };
  replace(tx, conversationId, fired);
  return next === undefined
    ? ended("done")
    : timerWait<ScheduleState, string>({ phase: "fire", due: next }, next);
}

// --- What the engine's calls do ---------------------------------------------------------------

function requireSchedule(tx: Tx, conversationId: ConversationId, id: string): Schedule {
  const s = readSchedules(tx, conversationId).find((x) => x.id === id);
  if (!s)
    throw new ScheduleInvalid("unknown_schedule", `conversation ${conversationId} has no schedule ${id}`);
  return s;
}

function start(tx: Tx, h: AgentHarness, conversationId: ConversationId, s: Schedule): TaskId {
  const definition = h.registry.get(SCHEDULE_TASK) as TaskDefinition<ScheduleInput, ScheduleState, string>;
  return tx.createTask(
    definition,
    { scheduleId: s.id, revision: s.revision },
    { ownership: { kind: "conversation" }, conversationId, background: true },
  );
}

/** The live task carrying schedule `id` (any revision). */
async function tasksOf(h: AgentHarness, conversationId: ConversationId, id?: string): Promise<TaskId[]> {
  return (await h.tasks({ kind: SCHEDULE_TASK }))
    .filter(
      (t) =>
        t.conversationId === conversationId &&
        t.state.status !== "terminal" &&
        (id === undefined || (t.input as ScheduleInput).scheduleId === id),
    )
    .map((t) => t.id);
}

/** Abort the tasks of older revisions (they would end by themselves when they wake). */
async function abortStale(
  h: AgentHarness,
  conversationId: ConversationId,
  s: Schedule | undefined,
  id: string,
) {
  for (const taskId of await tasksOf(h, conversationId, id)) {
    const t = await h.getTask(taskId);
    if (s && (t?.input as ScheduleInput | undefined)?.revision === s.revision && !s.paused) continue;
    await h.abortTask(taskId).catch(() => undefined);
  }
}

export async function createSchedule(
  h: AgentHarness,
  conversationId: ConversationId,
  draft: ScheduleDraft,
): Promise<Schedule> {
  if (!(await h.loadConversation(conversationId))) throw new UnknownConversation(conversationId);
  return h.transaction((tx) => {
    const now = tx.now();
    const { description } = previewSchedule(draft, now);
    const s: Schedule = {
      id: crypto.randomUUID(),
      text: draft.text,
      when: draft.when,
      timeZone: draft.timeZone,
      catchUp: draft.catchUp,
      description,
      paused: false,
      revision: 1,
      createdAt: now,
      after: now,
    };
    writeSchedules(tx, conversationId, [...readSchedules(tx, conversationId), s]);
    start(tx, h, conversationId, s);
    return s;
  });
}

export async function updateSchedule(
  h: AgentHarness,
  conversationId: ConversationId,
  id: string,
  draft: ScheduleDraft,
): Promise<Schedule> {
  if (!(await h.loadConversation(conversationId))) throw new UnknownConversation(conversationId);
  const s = await h.transaction((tx) => {
    const now = tx.now();
    const old = requireSchedule(tx, conversationId, id);
    const { description } = previewSchedule(draft, now);
    const { next: _, done: __, ...rest } = old;
    const edited: Schedule = {
      ...rest,
      text: draft.text,
      when: draft.when,
      timeZone: draft.timeZone,
      catchUp: draft.catchUp,
      description,
      revision: old.revision + 1,
      after: now,
    };
    replace(tx, conversationId, edited);
    if (!edited.paused) start(tx, h, conversationId, edited);
    return edited;
  });
  await abortStale(h, conversationId, s, id);
  return s;
}

export async function pauseSchedule(
  h: AgentHarness,
  conversationId: ConversationId,
  id: string,
  paused: boolean,
): Promise<Schedule> {
  if (!(await h.loadConversation(conversationId))) throw new UnknownConversation(conversationId);
  const s = await h.transaction((tx) => {
    const old = requireSchedule(tx, conversationId, id);
    if (old.paused === paused || old.done) return old;
    const { next: _, ...rest } = old;
    // Resuming starts from now: what came due while paused is not caught up.
    const changed: Schedule = { ...rest, paused, revision: old.revision + 1, after: tx.now() };
    replace(tx, conversationId, changed);
    if (!paused) start(tx, h, conversationId, changed);
    return changed;
  });
  await abortStale(h, conversationId, s, id);
  return s;
}

export async function deleteSchedule(
  h: AgentHarness,
  conversationId: ConversationId,
  id: string,
): Promise<void> {
  if (!(await h.loadConversation(conversationId))) throw new UnknownConversation(conversationId);
  await h.transaction((tx) => {
    requireSchedule(tx, conversationId, id);
    writeSchedules(
      tx,
      conversationId,
      readSchedules(tx, conversationId).filter((s) => s.id !== id),
    );
  });
  await abortStale(h, conversationId, undefined, id);
}

/**
 * End the schedule tasks of a conversation about to be deleted (a live task refuses a deletion):
 * each is aborted and awaited. Its schedules go with the conversation's documents.
 */
export async function endSchedules(h: AgentHarness, conversationId: ConversationId): Promise<void> {
  const ids = await tasksOf(h, conversationId);
  for (const id of ids) await h.abortTask(id).catch(() => undefined);
  for (const id of ids) await h.waitForTask(id).catch(() => undefined);
}
