/**
 * The agent harness: the durable core plus conversations, submissions and the built-in agent tasks
 * (`pi.generation`, `pi.tool`). Every conversation gets its documents (pi.agent, pi.live, pi.inbox,
 * pi.usage, pi.provider) in the commit that creates it, whatever path creates it. Beside it:
 * its options (harness-options.ts), those documents (conversation/initial-docs.ts) and the inbox
 * policy that starts generations (generation/start.ts).
 */
import type { AnyTaskDefinition, Tx } from "../core/define.ts";
import { DocumentSemanticsError, UnknownConversation } from "../core/errors.ts";
import { Harness } from "../core/harness.ts";
import {
  type ConversationId,
  type ConversationOwnership,
  type DocScope,
  type Json,
  SESSION_DOCS,
  type SubmissionId,
  type SubmissionRecord,
  type TaskId,
} from "../core/types.ts";
import type { Store } from "../store/types.ts";
import { createCompactionTask } from "./compaction/task.ts";
import type { AgentChange } from "./conversation/agent-change.ts";
import { EntryCache } from "./conversation/entries.ts";
import { abortSubmission, Conversation, configure, Submission } from "./conversation/handles.ts";
import { admit, type InboxPolicy, type SubmissionDraft, withdraw } from "./conversation/inbox.ts";
import { createAgentDocs, FORK_INITIAL } from "./conversation/initial-docs.ts";
import { documentReader } from "./env.ts";
import { BUILTIN_TASKS, registrationsOf } from "./extensions/hooks.ts";
import { createRegistry, type ExtensionRegistry, RegistryInvalid } from "./extensions/registry.ts";
import { taskHookSource } from "./extensions/task-hooks.ts";
import type { Extension } from "./extensions/types.ts";
import { inboxPolicy } from "./generation/start.ts";
import { createGenerationTask } from "./generation/task.ts";
import { type AgentHarnessOptions, OPTIONS_EXTENSION } from "./harness-options.ts";
import { SETTINGS_CONVERSATION, storedApiKey, storedApiKeyValues } from "./models/keys.ts";
import { loadPiAi } from "./models/pi-ai.ts";
import { createModelResolver } from "./models/resolver.ts";
import { type ModelsAndKeys, modelsAndKeys } from "./models/settings.ts";
import { agentMoveHooks } from "./move-ids.ts";
import { ALWAYS_ONLINE } from "./network.ts";
import {
  agentDoc,
  DOC,
  type DocToken,
  inbox,
  type LiveState,
  refuseOtherSemantics,
  type SessionDocToken,
  type TaskDocToken,
  type UsageState,
} from "./records.ts";
import {
  type AgentServices,
  checkSettings,
  defaultStream,
  extensionNames,
  resolvers,
  resolveSettings,
} from "./services.ts";
import { type ApprovalAnswer, type ApprovalRequest, decideApproval } from "./tools/approval.ts";
import { createSubagentTask, SUBAGENT_TASK } from "./tools/builtin/subagent.ts";
import type { ToolDefinition } from "./tools/contract.ts";
import { createToolTask } from "./tools/task/definition.ts";
import { ownedBelow, sumUsage, type UsageRollup, usageRollup } from "./usage.ts";
import { MemoryFs } from "./workspace/memory-fs.ts";

export { type AgentHarnessOptions, OPTIONS_EXTENSION } from "./harness-options.ts";

/** `AgentHarness.open`'s options: `prepare` gets the agent harness. */
export interface AgentOpenOptions extends Omit<AgentHarnessOptions, "prepare"> {
  /**
   * Runs during the open, once the live records and the settings' documents are loaded, before any
   * recovered task is reserved or started (`HarnessOptions.prepare`): install what a recovered task
   * may need (stored tools), create the root. Scheduling begins after it unless `paused`.
   */
  prepare?: (harness: AgentHarness) => Promise<void> | void;
}

/** The built-in agent tasks, and the inbox policy that starts generations and compactions. */
export interface BuiltinTasks {
  readonly generation: AnyTaskDefinition;
  readonly tool: AnyTaskDefinition;
  readonly compaction: ReturnType<typeof createCompactionTask>;
  readonly subagent: AnyTaskDefinition;
  readonly inbox: InboxPolicy;
}

/**
 * A `Harness` (every core operation: transactions, tasks, documents, entries, waits, mounts, close)
 * plus the agent. Its own surface, by area: conversations and submissions (`root`,
 * `createConversation`, `forkConversation`, `conversation`, `requireConversation`, `submission`,
 * `abortSubmission`), usage (`usage`, `conversationUsage`), models and keys (`models`), extensions
 * and tools (`extensions`, `registerTools`), typed document reads (`snapshot`), and the wiring the
 * agent's own modules share (`services`, `builtin`).
 */
export class AgentHarness extends Harness {
  readonly services: AgentServices;
  /** The built-in tasks and the inbox policy (for the agent's modules and tests). */
  readonly builtin: BuiltinTasks;
  /** The bound extension registry. */
  readonly extensions: ExtensionRegistry;
  /** The models a conversation may use and their API keys. */
  readonly models: ModelsAndKeys;
  #tools = new Map<string, ToolDefinition>();
  #hooks: AgentHarnessOptions["hooks"];
  /** Task names the core registry holds because an installed extension defines them. */
  #extensionTasks = new Set<string>();
  #unsubscribe: () => void;

  protected constructor(store: Store, options: AgentHarnessOptions) {
    const created = options.onConversationCreated;
    const initial = new Set(FORK_INITIAL);
    const asOf: string[] = [DOC.agent];
    const rewindable: string[] = [];
    for (const token of options.documents ?? []) {
      if (token.fork === "initial") initial.add(token.name);
      if (token.fork === "asOf") asOf.push(token.name);
      if (token.history === "rewindable") rewindable.push(token.name);
    }
    // The hooks' source reads the services, made after `super` returns.
    let services: (() => AgentServices) | undefined;
    const self: { harness?: AgentHarness } = {};
    super(store, {
      ...options,
      // The root is created by `root()`, in one commit with its agent and init (spec §2.2).
      root: "lazy",
      taskHooks: taskHookSource(() => services!()),
      forks: { asOf, rewindable, initial: (name) => initial.has(name) },
      moves: agentMoveHooks(options.moves),
      // A conversation the abort cascade reaches is treated like Conversation.abort(): its queued
      // inputs are withdrawn, its queued writes stay (spec §5.4). Also one with no live work, whose
      // documents may not be in memory (after a reopen): reading its inbox loads them.
      onCascade: (tx, conversations) => {
        let wrote = false;
        for (const c of conversations)
          for (const item of inbox(tx, c).items)
            if (item.mode !== "write") {
              withdraw(tx, c, item.id);
              wrote = true;
            }
        return options.onCascade?.(tx, conversations) === true || wrote;
      },
      onConversationCreated: (tx, record) => {
        createAgentDocs(tx, record);
        created?.(tx, record);
      },
    });
    services = () => this.services;
    self.harness = this;
    const extensions = options.extensions ?? createRegistry();
    this.extensions = extensions;
    this.#hooks = options.hooks;
    for (const tool of options.tools ?? []) this.#tools.set(tool.name, tool);
    if (options.tools || options.hooks) extensions.install(this.#optionsExtension());
    this.services = this.#makeServices(options, extensions);
    this.builtin = this.#makeBuiltin(this.services);
    this.models = modelsAndKeys(this, () => this.services);
    const { generation, tool, compaction, subagent } = this.builtin;
    this.registry.register(generation, tool, compaction as AnyTaskDefinition, subagent);
    this.#syncTasks();
    this.#unsubscribe = extensions.subscribe(() => this.#syncTasks());
  }

  /** The services every agent task reads: the options with their defaults, bound to this harness. */
  #makeServices(options: AgentHarnessOptions, extensions: ExtensionRegistry): AgentServices {
    const settings = options.settings;
    // The host's settings as read now: a getter's answer or the object (checked by resolveSettings).
    const readSettings = () => (typeof settings === "function" ? settings() : settings);
    // Settings given as an object are checked here, where they enter; a getter's at each reading.
    if (typeof settings !== "function") resolveSettings(settings);
    const report = options.onReport ?? (() => undefined);
    const readAgent = (c: ConversationId) => agentDoc.view(this.docVersionedNow(c, DOC.agent));
    const workspace = options.fs ?? new MemoryFs();
    return {
      core: this,
      entries: new EntryCache(this, {
        retentionMs: () => this.services.settings().contextRetentionMs,
        busy: (c) =>
          this.docsLoaded(c) && (this.docNow(c, DOC.live) as LiveState | undefined)?.run !== undefined,
        now: () => this.now(),
      }),
      models: options.models ?? createModelResolver(),
      defaultModel: options.defaultModel,
      fs: workspace,
      envBuilder: options.env !== undefined,
      // No builder, no environment (spec §2.2); an app that wants its workspace passes workspaceEnv(fs).
      env: async (c, signal) =>
        options.env
          ? await options.env({ conversationId: c, read: documentReader(this, c) }, { signal })
          : undefined,
      stream: options.stream ?? defaultStream,
      settings: () => resolveSettings(readSettings()),
      readAgent,
      ...resolvers(
        () => extensions.snapshot(),
        readAgent,
        report,
        () => extensionNames(checkSettings(readSettings())?.extensions),
      ),
      apiKey: options.apiKey ?? ((provider) => storedApiKey((c, name) => this.docNow(c, name), provider)),
      secrets: options.secrets ?? (() => storedApiKeyValues((c, name) => this.docNow(c, name))),
      network: options.network ?? ALWAYS_ONLINE,
      wakeAt: (at) => {
        try {
          options.wakeAt?.(at);
        } catch (error) {
          report(error);
        }
      },
      report,
      admit: (tx, conversationId, draft) => admit(tx, this.builtin.inbox, conversationId, draft),
      taskDefinition: (name) => this.registry.get(name),
    };
  }

  /** The built-in tasks over `services`, and the inbox policy that starts generations and compactions. */
  #makeBuiltin(services: AgentServices): BuiltinTasks {
    const toolTask = createToolTask(services);
    const policy = inboxPolicy(services, {
      generation: () => this.builtin.generation,
      compaction: () => this.builtin.compaction,
    });
    const compactionTask = createCompactionTask(services, policy);
    return {
      generation: createGenerationTask(
        services,
        policy,
        () => toolTask as never,
        () => compactionTask,
      ) as AnyTaskDefinition,
      tool: toolTask as AnyTaskDefinition,
      compaction: compactionTask,
      subagent: createSubagentTask(services) as AnyTaskDefinition,
      inbox: policy,
    };
  }

  /** The tools and hooks given as options, as an extension (hooks read at each resolution). */
  #optionsExtension(): Extension {
    const tools = [...this.#tools.values()];
    const hooks = () => {
      const h = this.#hooks;
      return registrationsOf((typeof h === "function" ? h() : h) ?? {});
    };
    return {
      name: OPTIONS_EXTENSION,
      tools,
      get hooks() {
        return hooks();
      },
    };
  }

  /**
   * The core registry follows the extensions' task definitions: a new or replaced one is registered
   * (a running task hands over at its next phase boundary), a removed one unregistered (its pending
   * tasks stay blocked until it is installed again).
   */
  #syncTasks(): void {
    // A built-in task is never an extension's (spec §7.1): a registry of another make listing one
    // under a built-in name does not replace the harness's own.
    const { generation, tool, compaction, subagent } = this.builtin;
    const own = new Set([generation, tool, compaction, subagent].map((d) => d.name));
    const wanted = new Map(
      this.extensions
        .snapshot()
        .tasks()
        .filter((t) => !own.has(t.name))
        .map((t) => [t.name, t] as const),
    );
    for (const name of this.#extensionTasks) if (!wanted.has(name)) this.registry.unregister(name);
    for (const [name, definition] of wanted) {
      this.registry.manage(name);
      if (this.registry.get(name) !== definition) this.registry.register(definition);
    }
    this.#extensionTasks = new Set(wanted.keys());
  }

  /** Close the harness; the registry subscription and the entry cache's retention timer stop first. */
  override close(options: { graceMs?: number } = {}, signal?: AbortSignal): Promise<void> {
    this.#unsubscribe();
    this.services.entries.dispose();
    return super.close(options, signal);
  }

  static override async open(store: Store, options: AgentOpenOptions = {}): Promise<AgentHarness> {
    // Requests read API keys synchronously (docNow), so the settings' documents are loaded before any
    // recovered task can start: in the open's own read (`preloadDocs`), then `prepare`, then
    // scheduling, unless the caller paused.
    // The registry must answer for every built-in task (spec §2.2): a reader of another make may not.
    const snapshot = options.extensions?.snapshot();
    const missing = snapshot && BUILTIN_TASKS.filter((name) => !snapshot.hasTask(name));
    if (missing?.length)
      throw new RegistryInvalid(`the registry lacks the built-in tasks ${missing.join(", ")}`);
    // Nor may it define one (spec §7.1: task names are unique across the built-ins and extensions).
    const builtins = new Set<string>([...BUILTIN_TASKS, SUBAGENT_TASK]);
    const claimed = snapshot?.tasks().filter((t) => builtins.has(t.name)) ?? [];
    if (claimed.length)
      throw new RegistryInvalid(
        `the registry defines the built-in tasks ${claimed.map((t) => t.name).join(", ")}`,
      );
    // pi-ai (models, providers, tool validation) is loaded on demand; every agent task relies on it.
    // It is awaited before `prepare` (so before any task can start), not before the open's read: the
    // store's migration check and load run while pi-ai's chunk is fetched and evaluated.
    const piAi = loadPiAi();
    piAi.catch(() => undefined); // awaited below; a failure surfaces there
    const { prepare, ...rest } = options;
    const harness: AgentHarness = new AgentHarness(store, {
      ...rest,
      preloadDocs: [SETTINGS_CONVERSATION, ...(options.preloadDocs ?? [])],
      // Conversation records load on demand (docs/ARCHITECTURE.md, "Flat as the store grows"): the
      // open reads live work's; a caller naming another awaits `loadConversation` first.
      prepare: async (): Promise<void> => {
        await piAi;
        await prepare?.(harness);
      },
    });
    await harness.start();
    return harness;
  }

  /**
   * Add tools to the `harness-options` extension (a later registration of a name replaces it for
   * phases that start later).
   */
  registerTools(...tools: ToolDefinition[]): void {
    for (const tool of tools) this.#tools.set(tool.name, tool);
    this.extensions.install(this.#optionsExtension());
  }

  /**
   * The root conversation (id 1), created lazily (spec §2.2): when it is absent, one commit creates
   * it ownerless with its documents (the creation hook), applies `agent` over the hook's copy, and
   * runs `init`; a throw creates nothing. When it exists, `agent` and `init` are ignored and nothing
   * is written. A reopen finds the same root.
   */
  async root(
    options: {
      agent?: AgentChange;
      init?: (tx: Tx, conversationId: ConversationId) => void | Promise<void>;
    } = {},
    signal?: AbortSignal,
  ): Promise<Conversation> {
    const record = await this.ensureRoot(async (tx, id) => {
      if (options.agent) configure(tx, id, options.agent);
      await options.init?.(tx, id);
    }, signal);
    return new Conversation(this, record.id);
  }

  /**
   * A new conversation; its ownership is required (ownerless, or a live task), never inferred. One
   * commit (spec §2.2): the conversation with its documents (creation hook), then `agent` over the
   * hook's copy, then `init` (the host's own writes); a throw anywhere creates nothing.
   */
  async createConversation(
    options: {
      ownership: ConversationOwnership;
      agent?: AgentChange;
      init?: (tx: Tx, conversationId: ConversationId) => void | Promise<void>;
    },
    signal?: AbortSignal,
  ): Promise<Conversation> {
    const record = await this.transaction(async (tx) => {
      const created = tx.createConversation(options.ownership);
      if (options.agent) configure(tx, created.id, options.agent);
      await options.init?.(tx, created.id);
      return created;
    }, signal);
    return new Conversation(this, record.id);
  }

  /**
   * A fork of `parentId` at entry `at` (spec §3.7), in one commit like `createConversation`: the
   * child sees the parent's entries through `at`, the parent's agent as of `at` (then `agent` over
   * it), a fresh provider session, inbox and usage; then `init`. Rejects with UnknownConversation or
   * EntryNotVisible (an entry not in the parent's history).
   */
  async forkConversation(
    parentId: ConversationId,
    at: number,
    options: {
      ownership: ConversationOwnership;
      agent?: AgentChange;
      init?: (tx: Tx, conversationId: ConversationId) => void | Promise<void>;
    },
    signal?: AbortSignal,
  ): Promise<Conversation> {
    const record = await this.forkRecord(
      parentId,
      at,
      {
        ownership: options.ownership,
        init: async (tx, created) => {
          if (options.agent) configure(tx, created, options.agent);
          await options.init?.(tx, created);
        },
      },
      signal,
    );
    return new Conversation(this, record.id);
  }

  /**
   * Submit inside the caller's commit, for an intent that writes more in that same commit (the
   * conversation it creates or forks, a title): the rules of `Conversation.submit` (spec §2.2) and
   * nothing else. A known `requestId` returns the submission admitted under it and writes nothing;
   * otherwise an input is placed at once (and its run started) when the conversation is idle with an
   * empty inbox, else queued by `whenBusy`; `reject` on a busy conversation throws ConversationBusy,
   * so the caller's whole commit rolls back. The conversation may be one this commit created. Like
   * any commit, not a progress call: on a paused harness the run it starts waits for `resume()`.
   */
  submitIn(tx: Tx, conversationId: ConversationId, draft: SubmissionDraft): SubmissionRecord {
    return admit(tx, this.builtin.inbox, conversationId, draft);
  }

  /**
   * A handle to a conversation whose record is in memory (created or loaded in this process: live
   * work's, and those named since the open), or undefined. An id from outside (a tab, a message, a
   * stored value) may name one not loaded yet: `loadedConversation` reads it first.
   */
  conversation(id: ConversationId): Conversation | undefined {
    return this.conversationRecord(id) ? new Conversation(this, id) : undefined;
  }

  /** `conversation(id)`, or UnknownConversation. */
  requireConversation(id: ConversationId): Conversation {
    const c = this.conversation(id);
    if (!c) throw new UnknownConversation(id);
    return c;
  }

  /** A handle to an existing conversation, its record read from the store if not in memory yet. */
  async loadedConversation(id: ConversationId): Promise<Conversation | undefined> {
    return (await this.loadConversation(id)) ? new Conversation(this, id) : undefined;
  }

  /** `loadedConversation(id)`, or UnknownConversation. */
  async requireLoadedConversation(id: ConversationId): Promise<Conversation> {
    const c = await this.loadedConversation(id);
    if (!c) throw new UnknownConversation(id);
    return c;
  }

  async submission(id: SubmissionId): Promise<Submission | undefined> {
    const record = await this.submissionRecord(id);
    return record ? new Submission(this, record.id, record.conversationId) : undefined;
  }

  /**
   * Withdraw a still-queued submission (spec §2.2). With `conversationId`, a submission of another
   * conversation counts as not found.
   */
  async abortSubmission(
    id: SubmissionId,
    signal?: AbortSignal,
    conversationId?: ConversationId,
  ): Promise<"aborted" | "already_placed" | "settled" | "not_found"> {
    // Only unsettled submissions are in memory after a reopen: a settled one is read first, so it
    // answers `settled`, not `not_found` (records never change once settled).
    await this.submissionRecord(id);
    return this.transaction((tx) => {
      const record = tx.submission(id);
      if (!record || (conversationId !== undefined && record.conversationId !== conversationId))
        return "not_found";
      return abortSubmission(tx, record);
    }, signal);
  }

  /**
   * A person's decision on a tool call waiting for approval (tools/approval.ts `decideApproval`), in
   * one commit: the first decision wins; the same request again gets the same answer.
   */
  async decideApproval(
    conversationId: ConversationId,
    request: ApprovalRequest,
    signal?: AbortSignal,
  ): Promise<ApprovalAnswer> {
    // In memory (the usual case: a call waits in a live conversation), the commit is asked at once.
    if (!this.conversationRecord(conversationId)) await this.requireLoadedConversation(conversationId);
    return this.transaction((tx) => decideApproval(tx, conversationId, request), signal);
  }

  /** Every conversation's pi.usage added up, each once (read from the store for conversations not loaded). */
  async usage(): Promise<UsageState> {
    return sumUsage((await this.docsNamed<UsageState & Record<string, never>>(DOC.usage)).values());
  }

  /**
   * One conversation's usage roll-up: its own pi.usage, and the children's share (the conversations
   * its tasks own, transitively: subagents), each counted once, under the child.
   */
  async conversationUsage(id: ConversationId): Promise<UsageRollup> {
    this.assertOpen();
    // Two reads: under way at close, so one asked before its seal completes (spec §2.2).
    return this.underWay(async () => {
      // Only the records and documents of the conversation and those below it: O(its subagents), not O(store).
      const records = (await this.loadBelow(id)) ?? [];
      const docs = await this.storedDocsIn<UsageState & Record<string, never>>(
        [DOC.usage],
        [id, ...ownedBelow(records, id)],
      );
      return usageRollup(records, (c) => docs.get(c)?.get(DOC.usage), id);
    });
  }

  /**
   * A typed document's committed value outside a commit (spec §3.3 `snapshot()`): migrated in memory
   * when stored at an older version (nothing is written; the next transaction that reads it stores
   * the migration); undefined when the document is absent: only a typed transaction read creates it.
   */
  async snapshot<T extends Json>(token: DocToken<T>, conversationId: ConversationId): Promise<T | undefined>;
  async snapshot<T extends Json>(token: SessionDocToken<T>): Promise<T | undefined>;
  async snapshot<T extends Json>(token: TaskDocToken<T>, taskId: TaskId): Promise<T | undefined>;
  async snapshot<T extends Json>(
    token: DocToken<T> | SessionDocToken<T> | TaskDocToken<T>,
    id?: number,
  ): Promise<T | undefined> {
    const scope: DocScope =
      token.scope === "session" ? SESSION_DOCS : token.scope === "task" ? { kind: "task", taskId: id! } : id!;
    const stored = await this.docVersioned(scope, token.name);
    if (stored.value === undefined) return undefined;
    if (token.scope === "conversation") {
      // The same refusal as typed access in a transaction (spec §3.1).
      refuseOtherSemantics(token.name, token, await this.docRecord(scope, token.name));
    }
    return token.view(stored);
  }
}
