/**
 * What a tool call reaches beyond its own output (spec §7.3): commits of its task, and
 * invocation-bound conversation handles. Everything here is bound to one invocation: once it ended
 * (`ended()`, or its signal aborted) every operation rejects with `invocation_ended`, while what an
 * operation already admitted stays durable. Submissions go through the call task's own commit, so
 * the task's admission gate applies (an abort-marked call cannot submit); `requestId` makes a rerun
 * find the submission it admitted before instead of admitting it twice.
 */
import type { TaskRuntime, Tx } from "../../core/define.ts";
import { CommitRefused, InvalidTransition } from "../../core/errors.ts";
import type { ConversationId, EntryRecord, SubmissionId, SubmissionRecord } from "../../core/types.ts";
import { withdraw } from "../conversation/inbox.ts";
import { inbox } from "../records.ts";
import type { AgentServices } from "../services.ts";
import type { ToolConversation, ToolInput, ToolSettlement, ToolSubmission } from "./contract.ts";

/** The invocation a handle is bound to. */
export interface Binding {
  readonly services: AgentServices;
  // biome-ignore lint/suspicious/noExplicitAny: any tool task's runtime.
  readonly runtime: TaskRuntime<any, any, any>;
  /** True once the tool's execute settled (before the invocation's signal ends it). */
  ended(): boolean;
}

export function check(binding: Binding): void {
  if (binding.ended() || binding.runtime.aborted)
    throw new CommitRefused("invocation_ended", `the invocation of task ${binding.runtime.taskId} has ended`);
}

/** A commit of the call's task; its callback's value is returned. */
export async function toolCommit<T>(binding: Binding, change: (tx: Tx) => T): Promise<T> {
  check(binding);
  let out: { value: T } | undefined;
  await binding.runtime.commit((tx) => {
    out = { value: change(tx) };
    return undefined;
  });
  return out!.value;
}

const settled = (r: SubmissionRecord | undefined) => r?.status === "done" || r?.status === "unanswered";

function settlementOf(record: SubmissionRecord): ToolSettlement {
  if (record.status === "done" && record.answer !== undefined)
    return { status: "done", answer: record.answer };
  return {
    status: "unanswered",
    reason: record.reason ?? "unknown",
    ...(record.detail !== undefined ? { detail: record.detail } : {}),
  };
}

/** Wait for a submission's settlement (rejects when `signal` aborts). */
export async function waitForSettlement(
  services: AgentServices,
  id: SubmissionId,
  signal: AbortSignal,
): Promise<ToolSettlement> {
  const core = services.core;
  let record = await core.submissionRecord(id);
  if (!settled(record)) {
    await core.waitUntil(() => {
      record = core.submissionNow(id) ?? record;
      return settled(record);
    }, signal);
  }
  if (!record) throw new InvalidTransition(`no submission ${id}`);
  return settlementOf(record);
}

/**
 * Admit `input` to a conversation through `commit`, unless a submission under its request id exists:
 * looked up first in the store (a settled one may not be in memory after a restart), so a rerun never
 * submits twice.
 */
export async function admitOnce(
  services: AgentServices,
  conversationId: ConversationId,
  input: ToolInput,
  commit: (admitIn: (tx: Tx) => SubmissionRecord) => Promise<SubmissionRecord>,
): Promise<SubmissionRecord> {
  if (input.requestId !== undefined) {
    const known = await services.core.submissionByRequest(conversationId, input.requestId);
    if (known) return known;
  }
  return commit((tx) =>
    services.admit(tx, conversationId, {
      type: "input",
      content: input.content,
      ...(input.requestId !== undefined ? { requestId: input.requestId } : {}),
      ...(input.whenBusy !== undefined ? { whenBusy: input.whenBusy } : {}),
    }),
  );
}

function checkInput(input: ToolInput): void {
  if (!input || typeof input !== "object" || (input as { type?: unknown }).type === "write")
    throw new InvalidTransition("a tool's conversation handle accepts input submissions only");
}

/** An invocation-bound handle to conversation `id`, or undefined when there is none. */
export function toolConversation(binding: Binding, id: ConversationId): ToolConversation | undefined {
  const { services, runtime } = binding;
  const signal = runtime.signal;
  const core = services.core;
  if (!core.conversationRecord(id)) return undefined;
  const submission = (sid: SubmissionId): ToolSubmission => ({
    id: sid,
    wait: async () => {
      check(binding);
      return waitForSettlement(services, sid, signal);
    },
  });
  return {
    id,
    submit: async (input) => {
      check(binding);
      checkInput(input);
      const record = await admitOnce(services, id, input, (admitIn) => toolCommit(binding, admitIn));
      return submission(record.id);
    },
    abort: async (options = {}) => {
      check(binding);
      await core.abortConversation(
        id,
        {
          ...(options.background ? { background: true } : {}),
          inCommit: (tx, reached) => {
            for (const c of reached)
              for (const item of inbox(tx, c).items) if (item.mode !== "write") withdraw(tx, c, item.id);
          },
        },
        signal,
      );
    },
    waitForIdle: async () => {
      check(binding);
      await core.waitForConversationIdle(id, signal);
    },
    onEntries: (listener) => {
      check(binding);
      const stop = core.subscribe((change) => {
        const entries: EntryRecord[] = change.entries.filter((e) => e.conversationId === id);
        if (entries.length === 0 || binding.ended()) return;
        try {
          listener(entries);
        } catch (error) {
          services.report(error);
        }
      });
      const end = () => stop();
      signal.addEventListener("abort", end, { once: true });
      return () => {
        signal.removeEventListener("abort", end);
        stop();
      };
    },
  };
}
