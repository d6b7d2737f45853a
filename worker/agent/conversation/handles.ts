/**
 * Conversation and submission handles. Handles are stateless (compare by id); every call reads or
 * commits through the harness. Cancelling a signal passed to a wait only stops that wait.
 */
import type { Tx } from "../../core/define.ts";
import { EntryNotVisible } from "../../core/errors.ts";
import type { ConversationView, Watch } from "../../core/observe.ts";
import type {
  ConversationId,
  ConversationOwnership,
  EntryId,
  EntryRecord,
  SubmissionId,
  SubmissionRecord,
  TaskId,
} from "../../core/types.ts";
import { startCompaction } from "../compaction/task.ts";
import { agentView } from "../extensions/resolve.ts";
import type { ResolvedAgentView } from "../extensions/types.ts";
import type { AgentHarness } from "../harness.ts";
import { type AgentState, agentDoc, DOC, inbox, type LiveState } from "../records.ts";
import { type AgentChange, applyAgentChange } from "./agent-change.ts";
import { type ContextView, contextView } from "./context.ts";
import { admitReset, type SubmissionDraft, withdraw } from "./inbox.ts";

export type { ResolvedAgentView } from "../extensions/types.ts";

export type { AgentChange } from "./agent-change.ts";

export type Settlement =
  | { status: "done"; answer?: number; entry?: number }
  | { status: "unanswered"; reason: string; detail?: string };

export class Submission {
  constructor(
    readonly harness: AgentHarness,
    readonly id: SubmissionId,
    readonly conversationId: ConversationId,
  ) {}

  async record(): Promise<SubmissionRecord> {
    return (await this.harness.submissionRecord(this.id))!;
  }

  /**
   * Resolves when the submission is settled: `done` (with the answer) or `unanswered` (with a
   * reason). One deleted with its conversation before it was settled is unanswered, `deleted`; one
   * whose conversation moved to another home before it was settled here is unanswered, `moved` (it
   * is answered there, under the same request id).
   */
  async wait(signal?: AbortSignal): Promise<Settlement> {
    this.harness.resume(); // a progress call (spec §2.2)
    let record: SubmissionRecord | undefined = await this.harness.submissionRecord(this.id);
    const settled = (r: SubmissionRecord | undefined) =>
      !r || r.status === "done" || r.status === "unanswered";
    const moved = () => this.harness.awayOf(this.conversationId)?.status === "done";
    if (!settled(record) && !moved()) {
      // An unsettled submission stays in memory until it settles or its conversation is deleted.
      await this.harness.waitUntil(() => {
        record = this.harness.submissionNow(this.id);
        return settled(record) || moved();
      }, signal);
    }
    if (!settled(record) && moved())
      return {
        status: "unanswered",
        reason: "moved",
        detail: `conversation ${this.conversationId} moved to another home (its conversation ${this.harness.awayOf(this.conversationId)?.remote}), where it is answered`,
      };
    if (!record) return { status: "unanswered", reason: "deleted" };
    if (record.status === "done") {
      return {
        status: "done",
        ...(record.answer !== undefined ? { answer: record.answer } : {}),
        ...(record.entry !== undefined ? { entry: record.entry } : {}),
      };
    }
    return {
      status: "unanswered",
      reason: record.reason ?? "unknown",
      ...(record.detail !== undefined ? { detail: record.detail } : {}),
    };
  }

  /**
   * Withdraw a still-queued submission (AgentHarness.abortSubmission, which also reads one settled
   * before a reopen). One deleted with its conversation has ended: `settled`, as `wait()` says.
   */
  async abort(signal?: AbortSignal): Promise<"aborted" | "already_placed" | "settled"> {
    const outcome = await this.harness.abortSubmission(this.id, signal);
    return outcome === "not_found" ? "settled" : outcome;
  }
}

/** Withdraw a submission if it is still queued; otherwise say why not. Runs inside a commit. */
export function abortSubmission(tx: Tx, record: SubmissionRecord): "aborted" | "already_placed" | "settled" {
  if (record.status === "placed") return "already_placed";
  if (record.status !== "queued") return "settled";
  withdraw(tx, record.conversationId, record.id);
  return "aborted";
}

export class Conversation {
  constructor(
    readonly harness: AgentHarness,
    readonly id: ConversationId,
  ) {}

  /** Admit an input or a write; resolves after durable admission (not settlement). */
  async submit(draft: SubmissionDraft, signal?: AbortSignal): Promise<Submission> {
    this.harness.resume(); // a progress call (spec §2.2)
    if (draft.requestId !== undefined) {
      const known = await this.harness.submissionByRequest(this.id, draft.requestId);
      if (known && known.type === draft.type) return new Submission(this.harness, known.id, this.id);
    }
    const record = await this.harness.transaction((tx) => this.harness.submitIn(tx, this.id, draft), signal);
    return new Submission(this.harness, record.id, this.id);
  }

  /**
   * Start the context over: admits a `pi.reset` write whose head is itself (earlier entries stay
   * stored but leave the model's context), with `handoff` as the first user message of the new
   * context. Resolves once admitted; placed at once when idle, else at the next boundary, where it
   * ends the current run (its inputs unanswered, reason `reset`).
   */
  async reset(handoff?: string, signal?: AbortSignal): Promise<Submission> {
    this.harness.resume();
    const record = await this.harness.transaction(
      (tx) => admitReset(tx, this.harness.builtin.inbox, this.id, handoff),
      signal,
    );
    return new Submission(this.harness, record.id, this.id);
  }

  /**
   * Compact now (spec §2.2, §8.7): admits a manual pi.compaction task and returns its id. It does
   * not make the conversation busy; its summary is placed as a head write (at once when idle, else
   * at the next boundary). `Conversation.abort()` aborts it; waiting for idle includes it.
   */
  async compact(instructions?: string, signal?: AbortSignal): Promise<TaskId> {
    this.harness.resume();
    const definition = this.harness.builtin.compaction;
    return this.harness.transaction((tx) => startCompaction(tx, definition, this.id, instructions), signal);
  }

  /**
   * A commit bound to this conversation (spec §2.2): a conversation-owned task the callback creates
   * without naming a conversation lands in this one. Everything else is the harness's transaction.
   */
  commit<T>(work: (tx: Tx) => T | Promise<T>, signal?: AbortSignal): Promise<T> {
    return this.harness.transaction((tx) => work(boundTo(tx, this.id)), signal);
  }

  /**
   * A new conversation forked from this one at entry `at` (spec §3.7): it sees this conversation's
   * entries through `at`, its agent as of `at`, and its own provider session. Ownership is required,
   * as for `createConversation`; `agent` and `init` as there, in the forking commit (a throw in `init`
   * creates nothing). Rejects with EntryNotVisible for an entry not in this history.
   */
  fork(
    at: number,
    options: {
      ownership: ConversationOwnership;
      agent?: AgentChange;
      init?: (tx: Tx, conversationId: ConversationId) => void | Promise<void>;
    },
    signal?: AbortSignal,
  ): Promise<Conversation> {
    return this.harness.forkConversation(this.id, at, options, signal);
  }

  /**
   * Edit pi.agent: a given field replaces, null clears, an absent one stays; extension and tool
   * objects stand for their names.
   */
  async configure(change: AgentChange, signal?: AbortSignal): Promise<void> {
    await this.harness.transaction((tx) => configure(tx, this.id, change), signal);
  }

  /**
   * The context a request would start from now (spec §2.2 ContextView); with `at`, as of that entry
   * of this conversation (what a fork at it would start with; EntryNotVisible, as the fork, for an
   * entry outside its visible history). Reads only; never writes.
   */
  async context(options: { at?: EntryId } = {}): Promise<ContextView> {
    this.harness.assertOpen();
    const entries = await this.harness.services.entries.get(this.id, options.at);
    if (options.at !== undefined && entries.at(-1)?.id !== options.at)
      throw new EntryNotVisible(this.id, options.at);
    return contextView(entries);
  }

  /** The stored pi.agent (names only, absent as `{}`): what `configure` edits. Never writes. */
  async agentState(): Promise<AgentState> {
    return agentDoc.view(await this.harness.docVersioned(this.id, DOC.agent));
  }

  /**
   * The conversation's agent resolved now (spec §2.2 `Conversation.agent()`, §7.1): the stored
   * pi.agent (absent as `{}`) resolved against the current registry snapshot and settings (the
   * selected extensions, tools, sections and hooks, as the next phase would take them), with the
   * model and thinking level a request would use, and `instructions` (no `cwd`: NOT-APPLICABLE §2.2). UIs re-resolve through
   * it: a registry or settings change shows at the next call. Never writes.
   */
  async agent(): Promise<ResolvedAgentView> {
    const state = await this.agentState();
    const services = this.harness.services;
    return agentView(services.agent(this.id, state), state, services.defaultModel);
  }

  /** Stored entries in id order (a fork's inherited ones first, through its entry). */
  entries(options: { afterId?: number; limit?: number } = {}): Promise<EntryRecord[]> {
    return this.harness.entries(this.id, options);
  }

  /** The committed view: the active range's entries and the conversation's documents. */
  async viewState(): Promise<ConversationView> {
    const mount = this.harness.mount(this.id);
    const watch = await mount.watch();
    const value = watch.value;
    await watch.stop();
    return value;
  }

  /** The view now, then each commit's operations (bounded backlog, see Watch). */
  async watch(): Promise<Watch<ConversationView>> {
    return this.harness.mount(this.id).watch();
  }

  /**
   * A run is under way. A conversation whose documents are not loaded is idle: open loads those of
   * every conversation with live work or queued submissions.
   */
  get busy(): boolean {
    if (!this.harness.docsLoaded(this.id)) return false;
    return this.harness.docNow<LiveState & Record<string, never>>(this.id, DOC.live)?.run !== undefined;
  }

  /**
   * Withdraw queued inputs and abort the live work ordinary traversal reaches from this
   * conversation (through owned conversations, also of owners that finished); resolves once it is
   * idle. With `background: true`, background boundaries are crossed too and the queued inputs of
   * every reached conversation are withdrawn. The signal cancels only the wait.
   */
  async abort(options: { background?: boolean } = {}, signal?: AbortSignal): Promise<void> {
    await this.harness.abortConversation(
      this.id,
      {
        ...options,
        inCommit: (tx, reached) => {
          for (const c of reached)
            for (const item of inbox(tx, c).items) if (item.mode !== "write") withdraw(tx, c, item.id);
        },
      },
      signal,
    );
  }

  /**
   * Resolves when ordinary traversal from this conversation (owned conversations included, also
   * those of finished owners; background work excluded) reaches no live task.
   */
  waitForIdle(signal?: AbortSignal): Promise<void> {
    return this.harness.waitForConversationIdle(this.id, signal);
  }
}

/** `tx` with createTask defaulting a conversation-owned task's conversation to `conversationId`. */
function boundTo(tx: Tx, conversationId: ConversationId): Tx {
  const createTask: Tx["createTask"] = (definition, input, options) =>
    tx.createTask(
      definition,
      input,
      // A missing ownership goes on unchanged, for tx.createTask to refuse (never inferred, spec §2.2).
      options?.ownership?.kind === "conversation" && options.conversationId === undefined
        ? { ...options, conversationId }
        : options,
    );
  return new Proxy(tx, {
    get(target, key) {
      if (key === "createTask") return createTask;
      const value: unknown = Reflect.get(target, key, target);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
}

/**
 * Edit a conversation's pi.agent inside any commit (spec §2.2), the creating one included (it then
 * overrides the creation hook's copy): a given field replaces, null clears, an absent one stays;
 * extension and tool objects stand for their names (`applyAgentChange`).
 */
export function configure(tx: Tx, conversationId: ConversationId, change: AgentChange): void {
  agentDoc.write(tx, conversationId, applyAgentChange(agentDoc.read(tx, conversationId), change));
}
