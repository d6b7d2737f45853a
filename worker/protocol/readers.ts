/**
 * The pure readers a tab shares with the engine: functions of plain data, with no state, no store,
 * no task and no browser API. A tab applies a watch's frames and pages to its copy of a view exactly
 * as the engine's mount does (`applyFrame`, `applyPage`, `pageCursor`), reads a view's built-in
 * documents and messages (`liveOf`, `inboxOf`, `usageOf`, `modelMessages`), tells the ticker's entries
 * apart (`tickEntry`), and words errors and provider problems (`errorMessage`, `providerProblem`,
 * `describeProviderProblem`). Adding a reader here adds it to the tab's bundle: keep them small.
 */

import { defineEntry } from "../agent/records.ts";
import type { TaskId } from "../core/types.ts";

export { describeProviderProblem, providerProblem } from "../agent/models/provider-problem.ts";
export { inboxOf, liveOf, modelMessages, usageOf } from "../agent/records.ts";
export { errorMessage } from "../core/errors.ts";
export { applyFrame, applyPage, pageCursor } from "../core/view-ops.ts";

/** The data of an `app.schedule` entry: what a schedule's firing says in its conversation. */
export type ScheduleNoteData = { scheduleId: string; text: string };
/** A schedule's note in the transcript (worker/app/schedules.ts): "Scheduled run: …", a catch-up. */
export const scheduleNote = defineEntry<ScheduleNoteData>("app.schedule");

/** The data of a `test.tick` entry (one per ticker phase). */
export type TickData = { n: number; taskId: TaskId };
/** The ticker's entry kind: `tickEntry.is(entry)` narrows `entry.data` to `TickData`. */
export const tickEntry = defineEntry<TickData>("test.tick");
