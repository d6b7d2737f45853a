/**
 * One simulated run of the whole agent engine (`runSeed`): the `AgentHarness` on the memory store,
 * with the clock, the randomness, the model, the tools, the network, the interleaving and the store's
 * faults all drawn from one seed. The client acts of the workload (workload.ts) are issued in order,
 * each followed by a seed-drawn number of event-loop turns and virtual-time jumps, so acts land in
 * the middle of runs; `settle` and the end wait until nothing is live. A crash (or a failed COMMIT,
 * which the app answers by closing the store) reopens a new harness on exactly what was committed,
 * and the client sends again what it never saw acknowledged, under the same request ids.
 * Invariants (invariants.ts) are checked after every act, after every reopening and at the end; the
 * first one broken ends the run. Everything the run did is written to a trace, one line per event,
 * and the trace is a pure function of the seed (a test holds it byte for byte).
 * The simulator's own wrappers (`SimHooks`) are how tests inject deliberate bugs: production code
 * has no switch for them.
 */
import {
  type AssistantMessage,
  fauxAssistantMessage,
  fauxToolCall,
  type Message,
  type ToolCall,
} from "@mariozechner/pi-ai";
import { Type } from "typebox";
import { textResult } from "../../worker/agent/tools/contract.ts";
import {
  AgentHarness,
  type AgentHarnessOptions,
  type Conversation,
  createCodemodeTool,
  createRegistry,
  createSubagentTool,
  defineExtension,
  defineTask,
  defineTool,
  type ExtensionRegistry,
  type Json,
  type MemoryImage,
  type MemoryStore,
  type TaskDefinition,
  type ToolDefinition,
} from "../../worker/index.ts";
import { leaseInterpreter, releaseInterpreter } from "../../worker/sandbox/interpreter.ts";
import { DEFAULT_SANDBOX_LIMITS } from "../../worker/sandbox/types.ts";
import { StoreClosed } from "../../worker/store/types.ts";
import {
  type FauxAgentModel,
  fauxAgentModel,
  fauxError,
  memoryStore,
  networkSwitch,
} from "../../worker/testing.ts";
import { realSleep, realTurn, VirtualWorld } from "./clock.ts";
import { checkAll, checkQuiet, type Ledger, SimInvariantBroken } from "./invariants.ts";
import { Prng } from "./prng.ts";
import { describeOp, drawWorkload, type Op, type StoreFault, type Workload } from "./workload.ts";

/** Wrappers a test puts around the simulated engine to seed a bug (never a switch in production code). */
export interface SimHooks {
  /** The image a crash leaves, given the committed one and the one before the last COMMIT. */
  imageAtCrash?(committed: MemoryImage, beforeLastCommit: MemoryImage | undefined): MemoryImage;
  /** Called with each harness the run opens (after it opened): patch an instance here. */
  opened?(h: AgentHarness): void;
}

export interface SimOptions {
  readonly seed: number;
  /** The workload to run instead of the seed's own (the shrinker's smaller ones). */
  readonly workload?: Workload;
  readonly hooks?: SimHooks;
}

export interface SimStats {
  steps: number;
  faults: number;
  crashes: number;
  checks: number;
  modelFaults: number;
  toolFaults: number;
  requests: number;
  virtualMs: number;
  /** Times the run waited on real time (work the seed does not drive); 0 keeps the trace exact. */
  realWaits: number;
}

export interface SimResult {
  readonly seed: number;
  readonly workload: Workload;
  readonly ok: boolean;
  readonly failure?: { readonly invariant: string; readonly message: string };
  readonly trace: readonly string[];
  readonly stats: SimStats;
}

/**
 * A run that reaches none of its end in this many rounds of work (or this much virtual time) is
 * stuck. Idle polls (repeating timers that change nothing) are not rounds of work: see `settle`.
 */
const SETTLE_ROUNDS = 3_000;
const SETTLE_VIRTUAL_MS = 6 * 3_600_000;
/** A backstop on idle polls, for a poll far finer than the engine's 50 ms (6 virtual hours of those). */
const SETTLE_IDLE_TICKS = SETTLE_VIRTUAL_MS / 50;
/** A tool that hangs is stopped at its limit. */
export const TOOL_LIMIT_MS = 30_000;

/** The durable timer task of the workload, at version 1 (checkpoint `{ phase, until }`). */
type TimerStep = { phase: string; until?: number; deadline?: number };
type TimerDefinition = TaskDefinition<{ ms: number }, TimerStep, Json>;

function timerV1(): TimerDefinition {
  return defineTask<{ ms: number }, TimerStep, Json>({
    name: "sim.timer",
    version: 1,
    initial: () => ({ phase: "go" }),
    phases: {
      go: async (task, runtime) => {
        const until = runtime.now() + task.input.ms;
        await runtime.commit(() => ({ status: "running", checkpoint: { phase: "wait", until } }));
      },
      wait: async (task, runtime, signal) => {
        await sleepVirtual((task.state.checkpoint as { until: number }).until - runtime.now(), signal);
        await runtime.commit(() => ({
          status: "terminal",
          outcome: { status: "completed", result: { v: 1 } },
        }));
      },
    },
    abort: async (_t, runtime) =>
      void (await runtime.commit(() => ({ status: "terminal", outcome: { status: "aborted" } }))),
  });
}

/** Version 2 renames the checkpoint's `until` to `deadline`; its `migrate` carries v1 records over. */
function timerV2(): TimerDefinition {
  return defineTask<{ ms: number }, TimerStep, Json>({
    name: "sim.timer",
    version: 2,
    initial: () => ({ phase: "go" }),
    migrate: (input, checkpoint) => {
      const c = checkpoint as { phase: string; until?: number };
      return {
        input: input as { ms: number },
        checkpoint: c.phase === "wait" ? { phase: "wait", deadline: c.until ?? 0 } : { phase: "go" },
      };
    },
    phases: {
      go: async (task, runtime) => {
        const deadline = runtime.now() + task.input.ms;
        await runtime.commit(() => ({ status: "running", checkpoint: { phase: "wait", deadline } }));
      },
      wait: async (task, runtime, signal) => {
        const deadline = (task.state.checkpoint as { deadline?: number }).deadline;
        // A v1 checkpoint reaching v2 code unmigrated has no deadline: the migration was lost.
        if (typeof deadline !== "number") throw new Error("sim.timer v2 ran a checkpoint with no deadline");
        await sleepVirtual(deadline - runtime.now(), signal);
        await runtime.commit(() => ({
          status: "terminal",
          outcome: { status: "completed", result: { v: 2 } },
        }));
      },
    },
    abort: async (_t, runtime) =>
      void (await runtime.commit(() => ({ status: "terminal", outcome: { status: "aborted" } }))),
  });
}

function sleepVirtual(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason);
    const t = setTimeout(resolve, Math.max(0, ms));
    signal.addEventListener(
      "abort",
      () => {
        clearTimeout(t);
        reject(signal.reason);
      },
      { once: true },
    );
  });
}

const textOf = (m: Message): string =>
  typeof m.content === "string"
    ? m.content
    : m.content.map((b) => ("text" in b ? b.text : b.type === "toolCall" ? `call:${b.name}` : "")).join("");

let started: number | undefined;
/** The seed of the run started last (for a report when the process stops in the middle of one). */
export const lastSeed = (): number | undefined => started;

export async function runSeed(options: SimOptions): Promise<SimResult> {
  const { seed } = options;
  started = seed;
  const workload = options.workload ?? drawWorkload(seed);
  await warmInterpreters();
  const world = new VirtualWorld(seed);
  const trace: string[] = [];
  const stats: SimStats = {
    steps: 0,
    faults: 0,
    crashes: 0,
    checks: 0,
    modelFaults: 0,
    toolFaults: 0,
    requests: 0,
    virtualMs: 0,
    realWaits: 0,
  };
  const note = (line: string) => trace.push(`${String(world.now - 1_767_225_600_000).padStart(9)} ${line}`);
  world.install();
  try {
    const sim = new Sim(seed, workload, world, note, stats, options.hooks ?? {});
    try {
      await sim.run();
      note(`end ok ${sim.digest()}`);
      return { seed, workload, ok: true, trace, stats };
    } catch (error) {
      const broken =
        error instanceof SimInvariantBroken
          ? { invariant: error.invariant, message: error.message }
          : {
              invariant: "no-error",
              message: error instanceof Error ? (error.stack ?? error.message) : String(error),
            };
      note(`FAILED ${broken.invariant}: ${broken.message.split("\n")[0]}`);
      return { seed, workload, ok: false, failure: broken, trace, stats };
    } finally {
      stats.virtualMs = world.now - 1_767_225_600_000;
      await sim.dispose();
    }
  } finally {
    world.uninstall();
  }
}

/**
 * Code mode's interpreter instances are made by compiling WebAssembly, which completes on real time.
 * Two idle ones are kept ready before each run (the pool keeps two), so a run's scripts take them
 * without waiting on anything the seed does not drive.
 */
async function warmInterpreters(): Promise<void> {
  const bytes = DEFAULT_SANDBOX_LIMITS.memoryBytes;
  const leases = [await leaseInterpreter(bytes), await leaseInterpreter(bytes)];
  for (const lease of leases) releaseInterpreter(lease, { reuse: true });
}

interface ConvSlot {
  id: number | undefined;
  deleted: boolean;
}

class Sim {
  readonly modelRng: Prng;
  readonly toolRng: Prng;
  readonly turnRng: Prng;
  readonly net = networkSwitch();
  readonly faux: FauxAgentModel;
  readonly registry: ExtensionRegistry = createRegistry();
  readonly ledger: Ledger = {
    acked: new Map(),
    sent: new Map(),
    unsafeRuns: new Map(),
    keyed: new Map(),
    seenEntries: new Map(),
    deletedConversations: new Set(),
    modelFaulted: new Set(),
    aborted: new Set(),
    abortedRequests: new Set(),
    upgraded: false,
    timers: new Map(),
  };
  store!: MemoryStore;
  h!: AgentHarness;
  version = 1;
  reloads = 0;
  convs: ConvSlot[] = [{ id: undefined, deleted: false }];
  requestCount = 0;
  callCount = 0;
  /** Transactions of the stores closed before this one (fault positions count across reopenings). */
  base = 0;
  faults: StoreFault[];
  broken: { kind: StoreFault["kind"]; at: number } | undefined;
  /** Only with an `imageAtCrash` hook: the image before the last COMMIT, and after it. */
  lastImage: MemoryImage | undefined;
  currentImage: MemoryImage | undefined;
  inflight = new Set<Promise<unknown>>();
  unsubscribe: (() => void) | undefined;

  constructor(
    readonly seed: number,
    readonly workload: Workload,
    readonly world: VirtualWorld,
    readonly note: (line: string) => void,
    readonly stats: SimStats,
    readonly hooks: SimHooks,
  ) {
    const root = new Prng(seed);
    this.modelRng = root.fork(1);
    this.toolRng = root.fork(2);
    this.turnRng = root.fork(3);
    this.faults = [...workload.faults];
    this.faux = fauxAgentModel((request) => this.respond(request), {
      id: `sim-${seed}`,
      contextWindow: 6_000,
      record: false,
    });
    this.installTools();
  }

  // ---- the model ---------------------------------------------------------------------------------

  async respond(request: {
    messages: Message[];
    tools: string[];
    systemPrompt: string | undefined;
  }): Promise<AssistantMessage> {
    this.stats.requests++;
    const n = ++this.requestCount;
    const r = this.modelRng;
    const last = request.messages[request.messages.length - 1];
    const lastText = last ? textOf(last).slice(0, 40) : "";
    // Faults first: a stall, then an error of some kind.
    if (r.chance(0.08)) {
      const ms = r.int(1, 90) * 1000;
      this.note(`model #${n} stalls ${ms} ms`);
      await new Promise((resolve) => setTimeout(resolve, ms));
    }
    const fault = r.next();
    if (fault < 0.1) {
      this.stats.modelFaults++;
      const kind = r.pick([
        "503 Service Unavailable",
        "429 Too Many Requests: rate limit",
        "fetch failed",
        "400 bad request: invalid",
      ]);
      if (kind === "fetch failed") {
        this.net.set(false);
        const back = r.int(1, 60) * 1000;
        setTimeout(() => this.net.set(true), back);
        this.note(`model #${n} network lost for ${back} ms`);
      } else this.note(`model #${n} error ${kind}`);
      for (const c of this.convs) if (c.id !== undefined) this.ledger.modelFaulted.add(c.id);
      return fauxError(kind);
    }
    const isChild = request.messages.some((m) => m.role === "user" && textOf(m).startsWith("SUBTASK"));
    const noTools = request.tools.length === 0;
    let sinceUser = 0;
    for (let i = request.messages.length - 1; i >= 0 && request.messages[i]!.role !== "user"; i--)
      if (request.messages[i]!.role === "assistant") sinceUser++;
    if (noTools || sinceUser >= 2 || r.chance(isChild ? 0.6 : 0.35)) {
      this.note(`model #${n} answers (${lastText})`);
      return fauxAssistantMessage(`answer ${n} to ${lastText}`);
    }
    const calls: ToolCall[] = [];
    const count = r.chance(0.3) ? 2 : 1;
    for (let i = 0; i < count; i++) {
      const id = `c${++this.callCount}`;
      const pick = r.pick(
        isChild
          ? ["note", "pay", "launch"]
          : ["note", "note", "pay", "pay", "launch", "launch", "nest", "flaky", "slow", "subagent", "script"],
      );
      if (!request.tools.includes(pick === "script" ? "codemode" : pick)) continue;
      if (pick === "subagent")
        calls.push(
          fauxToolCall("subagent", { task: `SUBTASK ${id}`, tools: ["note", "pay", "launch"] }, { id }),
        );
      else if (pick === "script")
        calls.push(
          fauxToolCall(
            "codemode",
            { script: `const a = await note({ item: "s-${id}" }); return a;` },
            { id },
          ),
        );
      else if (pick === "slow") calls.push(fauxToolCall("slow", { ms: r.int(1, 60) * 1000 }, { id }));
      else calls.push(fauxToolCall(pick, { item: `i-${id}` }, { id }));
    }
    if (calls.length === 0) return fauxAssistantMessage(`answer ${n} to ${lastText}`);
    this.note(`model #${n} calls ${calls.map((c) => `${c.name}:${c.id}`).join(",")}`);
    return fauxAssistantMessage(calls, { stopReason: "toolUse" });
  }

  // ---- tools -------------------------------------------------------------------------------------

  tools(): ToolDefinition[] {
    const l = this.ledger;
    const item = Type.Object({ item: Type.String() });
    const tag = `v${this.reloads}`;
    const note = defineTool({
      name: "note",
      description: `Note an item (${tag})`,
      parameters: item,
      replay: "safe",
      async execute(args) {
        return textResult(`noted ${args.item}`);
      },
    });
    const pay = defineTool({
      name: "pay",
      description: "Charge an item, keyed by the call",
      parameters: item,
      replay: "safe",
      async execute(args, api) {
        const key = `pay:${api.toolCallId}`;
        const seen = l.keyed.get(key);
        l.keyed.set(key, { applied: seen?.applied ?? 1, calls: (seen?.calls ?? 0) + 1 });
        return textResult(`paid ${args.item}`);
      },
    });
    const launch = defineTool({
      name: "launch",
      description: "Launch an item (not safe to repeat)",
      parameters: item,
      replay: "unsafe",
      async execute(args, api) {
        const key = api.toolCallId;
        l.unsafeRuns.set(key, (l.unsafeRuns.get(key) ?? 0) + 1);
        return textResult(`launched ${args.item}`);
      },
    });
    const nest = defineTool({
      name: "nest",
      description: "Note an item through a nested call",
      parameters: item,
      replay: "safe",
      async execute(args, api) {
        const r = await api.executeTool("note", { item: `nested-${args.item}` }, { key: "n1" });
        return textResult(`nested: ${JSON.stringify(r.content)}`);
      },
    });
    const sim = this;
    const flaky = defineTool({
      name: "flaky",
      description: "Fails",
      parameters: item,
      replay: "safe",
      async execute() {
        sim.stats.toolFaults++;
        throw new Error("the flaky tool failed");
      },
    });
    const slow = defineTool({
      name: "slow",
      description: "Takes a while; stopped at its limit",
      parameters: Type.Object({ ms: Type.Number() }),
      replay: "safe",
      async execute(args, api) {
        const over = args.ms > TOOL_LIMIT_MS;
        await sleepVirtual(Math.min(args.ms, TOOL_LIMIT_MS), api.signal);
        if (over) {
          sim.stats.toolFaults++;
          throw new Error(`slow ran past its limit of ${TOOL_LIMIT_MS} ms`);
        }
        return textResult(`slow done after ${args.ms} ms`);
      },
    });
    return [note, pay, launch, nest, flaky, slow, createSubagentTool(), createCodemodeTool()];
  }

  installTools(): void {
    this.registry.install(defineExtension({ name: "sim-tools", tools: this.tools() }));
  }

  // ---- the engine --------------------------------------------------------------------------------

  options(): AgentHarnessOptions {
    return {
      models: this.faux.models,
      defaultModel: this.faux.ref,
      extensions: this.registry,
      network: this.net,
      now: () => this.world.now,
      tasks: [this.version === 1 ? timerV1() : timerV2()],
      settings: {
        compaction: { keepRecentTokens: 400, reserveTokens: 1_000 },
      },
    };
  }

  async open(image?: MemoryImage): Promise<void> {
    this.store = await memoryStore(image);
    this.broken = undefined;
    this.lastImage = undefined;
    this.currentImage = image;
    this.store.setFaultHook((point, { transaction }) => this.onStorePoint(point, transaction));
    try {
      this.h = await AgentHarness.open(this.store, this.options());
    } catch (error) {
      // The store died under the opening itself: open again on what that left.
      if (!this.broken) throw error;
      return this.reopenAfterFault();
    }
    this.hooks.opened?.(this.h);
    this.unsubscribe = this.h.subscribe((change) => {
      for (const e of change.entries)
        this.ledger.seenEntries.set(e.id, { conversationId: e.conversationId, body: stable(e) });
      for (const c of change.deletedConversations ?? []) this.ledger.deletedConversations.add(c);
    });
    try {
      const root = await this.h.root();
      this.convs[0]!.id = root.id;
    } catch (error) {
      if (!this.broken) throw error;
      return this.reopenAfterFault();
    }
  }

  async reopenAfterFault(): Promise<void> {
    const what = this.broken!;
    this.stats.crashes++;
    let image = this.store.image();
    if (this.hooks.imageAtCrash) image = this.hooks.imageAtCrash(image, this.lastImage);
    this.unsubscribe?.();
    await this.closeHarness();
    await this.store.close().catch(() => undefined);
    this.base += this.store.stats.transactions + 1;
    this.note(`the store failed while opening (${what.kind} at ${what.at})`);
    await this.open(image);
  }

  onStorePoint(point: string, transaction: number): void {
    if (this.broken) throw new StoreClosed("the store is gone");
    const at = this.base + transaction;
    if (point === "after-commit" && this.hooks.imageAtCrash) {
      this.lastImage = this.currentImage;
      this.currentImage = this.store.image();
    }
    const fault = this.faults[0];
    if (!fault || fault.at !== at) return;
    const wanted =
      fault.kind === "crash-after-commit"
        ? "after-commit"
        : fault.kind === "crash-in-group"
          ? "after-callback"
          : "before-commit";
    if (point !== wanted) return;
    this.faults.shift();
    this.stats.faults++;
    this.broken = { kind: fault.kind, at };
    this.note(`store fault ${fault.kind} at transaction ${at}`);
    if (fault.kind === "io-error") throw Object.assign(new Error("disk I/O error"), { code: "SQLITE_IOERR" });
    if (fault.kind === "quota")
      throw Object.assign(new Error("database or disk is full"), { code: "SQLITE_FULL" });
    this.store.kill(`crashed at ${point} of transaction ${transaction}`);
    throw new StoreClosed(`crashed at ${point} of transaction ${transaction}`);
  }

  /** After a crash or a failed COMMIT: a new engine on exactly what was committed, and the client's resends. */
  async recover(): Promise<void> {
    const what = this.broken!;
    this.stats.crashes++;
    this.unsubscribe?.();
    await this.closeHarness();
    await this.store.close().catch(() => undefined);
    this.base += this.store.stats.transactions + 1;
    let image = this.store.image();
    if (this.hooks.imageAtCrash) image = this.hooks.imageAtCrash(image, this.lastImage);
    await this.drainInflight();
    await this.open(image);
    this.note(`reopened after ${what.kind} (transaction ${what.at})`);
    await this.check("after reopening");
    // The client sends again every input it never saw acknowledged, under the same request id.
    for (const [requestId, sent] of this.ledger.sent) {
      if (this.ledger.acked.has(requestId)) continue;
      const slot = this.convs[sent.conv]!;
      if (slot.id === undefined || slot.deleted) continue;
      this.submit(sent.conv, requestId, sent.whenBusy, "resend");
    }
  }

  /** Close the harness, letting virtual time run: its close gives running phases a grace period. */
  async closeHarness(): Promise<void> {
    if (!this.h) return;
    let done = false;
    const closing = this.h.close().then(
      () => (done = true),
      () => (done = true),
    );
    for (let i = 0; i < 1000 && !done; i++) {
      await realTurn();
      if (!done && i % 4 === 3) this.world.advance();
    }
    if (!done) throw new SimInvariantBroken("run-ends", "the harness did not close");
    await closing;
  }

  async drainInflight(): Promise<void> {
    for (let i = 0; i < 50 && this.inflight.size > 0; i++) await realTurn();
  }

  track(p: Promise<unknown>): void {
    const tracked = p.catch(() => undefined).finally(() => this.inflight.delete(tracked));
    this.inflight.add(tracked);
  }

  conversation(ref: number): Conversation | undefined {
    const slot = this.convs[ref];
    if (!slot || slot.id === undefined || slot.deleted) return undefined;
    return this.h.conversation(slot.id);
  }

  submit(ref: number, requestId: string, whenBusy: "followUp" | "steer", why: string): void {
    const c = this.conversation(ref);
    if (!c) return;
    this.ledger.sent.set(requestId, { conv: ref, conversationId: c.id, whenBusy });
    this.note(`${why} ${requestId} to conversation ${c.id} (${whenBusy})`);
    const h = this.h;
    this.track(
      c.submit({ type: "input", content: `msg ${requestId}`, whenBusy, requestId }).then((s) => {
        if (h !== this.h) return;
        this.ledger.acked.set(requestId, { conversationId: c.id, submissionId: s.id });
        this.note(`acknowledged ${requestId} as submission ${s.id}`);
      }),
    );
  }

  async act(op: Op, index: number): Promise<void> {
    const l = this.ledger;
    switch (op.op) {
      case "input":
        return this.submit(op.conv, `r${index}`, op.whenBusy, "input");
      case "write": {
        const c = this.conversation(op.conv);
        if (c)
          this.track(
            c.submit({
              type: "write",
              entry: { kind: "sim.note", display: true, data: { text: `note ${index}` } } as never,
              requestId: `w${index}`,
            }),
          );
        return;
      }
      case "create": {
        const h = this.h;
        const slot: ConvSlot = { id: undefined, deleted: false };
        this.convs.push(slot);
        this.track(
          h.createConversation({ ownership: { kind: "ownerless" } }).then((c) => {
            if (h === this.h) slot.id = c.id;
          }),
        );
        return;
      }
      case "fork": {
        const c = this.conversation(op.conv);
        const slot: ConvSlot = { id: undefined, deleted: false };
        this.convs.push(slot);
        if (!c) return;
        const h = this.h;
        this.track(
          (async () => {
            const entries = await c.entries();
            const at = entries[entries.length - 1]?.id;
            if (at === undefined) return;
            const child = await c.fork(at, { ownership: { kind: "ownerless" } });
            if (h === this.h) slot.id = child.id;
          })(),
        );
        return;
      }
      case "compact": {
        const c = this.conversation(op.conv);
        if (c) this.track(c.compact());
        return;
      }
      case "abort": {
        const c = this.conversation(op.conv);
        if (c) {
          l.aborted.add(c.id);
          this.track(c.abort());
        }
        return;
      }
      case "withdraw": {
        const c = this.conversation(op.conv);
        if (!c) return;
        const last = [...l.acked.values()].reverse().find((a) => a.conversationId === c.id);
        if (last) {
          l.aborted.add(c.id);
          this.track(this.h.abortSubmission(last.submissionId));
        }
        return;
      }
      case "delete": {
        const slot = this.convs[op.conv];
        const c = this.conversation(op.conv);
        if (!c || !slot) return;
        const h = this.h;
        // A deletion is refused while work is live, so the client aborts the conversation first.
        // That abort is the client's and it stands when a crash loses the deleting commit (the
        // conversation stays): the inputs sent there so far may end aborted; later ones may not.
        for (const [requestId, sent] of l.sent)
          if (sent.conversationId === c.id) l.abortedRequests.add(requestId);
        this.track(
          (async () => {
            await c.abort({ background: true });
            await c.waitForIdle();
            await h.deleteConversation(c.id);
            slot.deleted = true;
          })(),
        );
        return;
      }
      case "reload":
        this.reloads++;
        this.installTools();
        return;
      case "timer": {
        const c = this.conversation(op.conv);
        if (!c) return;
        const definition = this.version === 1 ? timerV1() : timerV2();
        const h = this.h;
        this.track(
          c
            .commit((tx) => tx.createTask(definition, { ms: op.ms }, { ownership: { kind: "conversation" } }))
            .then((id) => {
              if (h === this.h) l.timers.set(id, { conversationId: c.id, version: this.version });
            }),
        );
        return;
      }
      case "upgrade": {
        if (this.version === 2) return;
        // The old build has a timer of its own waiting when the newer build arrives mid-run: the
        // engine closes and the next opens with version 2 of the task, which must migrate it.
        const c = this.conversation(0);
        if (c) {
          const id = await c
            .commit((tx) =>
              tx.createTask(timerV1(), { ms: 3_600_000 }, { ownership: { kind: "conversation" } }),
            )
            .catch(() => undefined);
          if (id !== undefined) l.timers.set(id, { conversationId: c.id, version: 1 });
          for (let i = 0; i < 6 && !this.broken; i++) await realTurn();
        }
        if (this.broken) await this.recover();
        this.version = 2;
        l.upgraded = true;
        this.unsubscribe?.();
        await this.closeHarness();
        await this.store.close().catch(() => undefined);
        this.base += this.store.stats.transactions + 1;
        const image = this.store.image();
        await this.drainInflight();
        await this.open(image);
        this.note("reopened with version 2 of sim.timer");
        for (const [requestId, sent] of l.sent)
          if (!l.acked.has(requestId)) this.submit(sent.conv, requestId, sent.whenBusy, "resend");
        return;
      }
      case "offline":
        this.net.set(false);
        setTimeout(() => this.net.set(true), op.ms);
        return;
      case "pass":
        this.world.elapse(op.ms);
        return;
      case "settle":
        return this.settle();
    }
  }

  async check(when: string): Promise<void> {
    try {
      await this.checkNow(when);
    } catch (error) {
      if (!this.broken || error instanceof SimInvariantBroken) throw error;
    }
  }

  async checkNow(when: string): Promise<void> {
    this.stats.checks += await checkAll(this.h, this.ledger, this.store, when);
  }

  /** Turn the loop until nothing changes: the engine waits only on timers, or on nothing. */
  async quiesce(): Promise<void> {
    let last = "";
    let same = 0;
    for (let i = 0; i < 400 && same < 3; i++) {
      await realTurn();
      const now = `${this.store.stats.transactions}/${this.stats.requests}/${this.inflight.size}/${this.world.pending}`;
      same = now === last ? same + 1 : 0;
      last = now;
      if (this.broken) return;
    }
  }

  /** Nothing is due on the virtual clock: give real work (a compile) a moment; true if anything moved. */
  async realWait(): Promise<boolean> {
    const before = `${this.store.stats.transactions}/${this.stats.requests}/${this.inflight.size}/${this.world.pending}`;
    for (let i = 0; i < 40; i++) {
      await realSleep(5);
      await this.quiesce();
      const now = `${this.store.stats.transactions}/${this.stats.requests}/${this.inflight.size}/${this.world.pending}`;
      if (now !== before || this.broken || !this.live()) {
        this.stats.realWaits++;
        return true;
      }
    }
    return false;
  }

  live(): boolean {
    return this.h.inspect().tasks.some((t) => t.record.state.status !== "terminal") || this.inflight.size > 0;
  }

  /** What the run has visibly done so far: commits, model requests, client calls, queued timers. */
  progress(): string {
    return `${this.store.stats.transactions}/${this.stats.requests}/${this.inflight.size}/${this.world.pending}`;
  }

  /**
   * Turn the run until it is idle. Two bounds, both on progress, not on bare loop turns:
   * - a round counts toward SETTLE_ROUNDS unless it was an idle tick: the clock ran only repeating
   *   timers (an engine poll such as `waitUntil`'s closed check every 50 ms) and nothing visible
   *   changed. Idle ticks are the engine legitimately waiting (on a drawn model stall, a timer tool),
   *   bounded by SETTLE_VIRTUAL_MS instead, so a wait of any drawn length is never taken for a
   *   livelock; rounds that commit, call, or fire a one-shot timer still count, which is what a
   *   livelock does (found by seeds 6109 and 6988, docs/simulator.md);
   * - an idle tick with no one-shot timer queued means only polls remain: nothing can move but real
   *   work, so after a real wait the run is stuck ("nothing moves"), not left to tick for hours.
   */
  async settle(): Promise<void> {
    const start = this.world.now;
    let rounds = 0;
    let ticks = 0;
    let before = "";
    let polled = false;
    while (rounds < SETTLE_ROUNDS && ticks < SETTLE_IDLE_TICKS) {
      await this.quiesce();
      if (this.broken) {
        await this.recover();
        rounds++;
        before = "";
        polled = false;
        continue;
      }
      if (!this.live()) {
        this.stats.checks += await checkQuiet(this.h, this.ledger, this.store, "when idle");
        return;
      }
      const now = this.progress();
      const idle = polled && now === before;
      if (idle) ticks++;
      else rounds++;
      const moved =
        this.world.now - start <= SETTLE_VIRTUAL_MS &&
        (idle && !this.world.hasOnce()
          ? await this.realWait()
          : this.world.advance() || (await this.realWait()));
      if (!moved) {
        const live = this.h
          .inspect()
          .tasks.filter((t) => t.record.state.status !== "terminal")
          .map((t) => `${t.record.kind}#${t.record.id}:${t.state.kind}`);
        throw new SimInvariantBroken(
          "run-ends",
          `nothing moves after ${this.world.now - start} virtual ms: live ${live.join(", ") || "none"}, ${this.inflight.size} client calls in flight`,
        );
      }
      before = this.progress();
      polled = this.world.lastOnceFired === 0 && before === now;
    }
    throw new SimInvariantBroken(
      "run-ends",
      rounds >= SETTLE_ROUNDS
        ? `still live after ${SETTLE_ROUNDS} rounds of work`
        : `still live after ${SETTLE_IDLE_TICKS} idle polls`,
    );
  }

  async run(): Promise<void> {
    this.note(
      `seed ${this.seed}: ${this.workload.ops.length} acts, faults ${this.workload.faults.map((f) => `${f.kind}@${f.at}`).join(" ") || "none"}`,
    );
    await this.open();
    for (const [i, op] of this.workload.ops.entries()) {
      this.stats.steps++;
      this.note(`act ${i}: ${describeOp(op)}`);
      await this.act(op, i);
      // The interleaving: a seed-drawn number of loop turns and timer jumps before the next act.
      const turns = this.turnRng.int(0, 6);
      for (let t = 0; t < turns; t++) {
        await realTurn();
        if (this.turnRng.chance(0.3)) this.world.advance();
        if (this.broken) await this.recover();
      }
      if (this.broken) await this.recover();
      if (!this.broken) await this.check(`after act ${i}`);
      if (this.broken) await this.recover();
    }
    await this.settle();
    this.stats.checks += await checkQuiet(this.h, this.ledger, this.store, "at the end");
    for (const [requestId, acked] of this.ledger.acked) {
      // The record, not `wait()`: an input a failed run left queued stays queued (the inbox's rule).
      const record = await this.h.submissionRecord(acked.submissionId);
      this.note(`settled ${requestId}: ${record ? record.status : "gone"}`);
    }
  }

  digest(): string {
    const parts = this.h.conversationRecords().map((c) => `${c.id}:${this.h.inspect().tasks.length}`);
    return `${parts.join(",")} entries=${this.ledger.seenEntries.size}`;
  }

  async dispose(): Promise<void> {
    this.unsubscribe?.();
    await this.closeHarness();
    await this.store?.close().catch(() => undefined);
    this.faux.unregister();
  }
}

/** An entry as the ledger keeps it: its content, without what a reopening may renumber. */
export function stable(e: { kind: string; model?: unknown; data?: unknown; display?: unknown }): string {
  return JSON.stringify([e.kind, e.model ?? null, e.data ?? null]);
}
