/**
 * The test kit: fakes with failure switches, in one place. Tests import these instead of writing
 * their own mocks.
 * - `crashingStore({ afterCommit: k })`: a memory store that dies right after its k-th COMMIT (it
 *   refuses every call from then on, as if the process died) and hands back a fresh store holding
 *   exactly what was committed.
 * - `FakePayments`, `FakeMailer`: external services that deduplicate by idempotency key, with
 *   switches for declines, transient failures and slow confirmations.
 */
import { type MemoryImage, type MemoryStore, openStore } from "./store/open.ts";
import { type Sql, type SqlValue, StoreClosed } from "./store/types.ts";

export function memoryStore(
  image?: MemoryImage,
  options: { groupCommit?: boolean } = {},
): Promise<MemoryStore> {
  return openStore({ kind: "memory", ...(image ? { image } : {}), ...options });
}

/** The statements one store job (a transaction, or a read) ran, in order. */
export interface StoreJob {
  kind: "commit" | "read";
  statements: Array<{ sql: string; params: readonly SqlValue[] | undefined; rows: boolean }>;
}

/**
 * Record every job `store` runs from now on, in the order they run, into `recorder.into` (swap the
 * array to split a run into parts). For benches replaying a run's SQL and tests measuring its writes.
 */
export function recordJobs(store: MemoryStore, recorder: { into: StoreJob[] }): void {
  for (const kind of ["commit", "read"] as const) {
    const original = store[kind].bind(store);
    store[kind] = <T>(work: (sql: Sql) => Promise<T> | T) =>
      original((sql) => {
        const job: StoreJob = { kind, statements: [] };
        recorder.into.push(job);
        const note = (q: string, params: readonly SqlValue[] | undefined, rows: boolean) =>
          job.statements.push({ sql: q, params, rows });
        return work({
          run: (q, params) => {
            note(q, params, false);
            return sql.run(q, params);
          },
          all: (q, params) => {
            note(q, params, true);
            return sql.all(q, params);
          },
          get: (q, params) => {
            note(q, params, true);
            return sql.get(q, params);
          },
        });
      });
  }
}

export interface CrashingStore {
  readonly store: MemoryStore;
  /** Resolves when the crash happened. */
  readonly crashed: Promise<void>;
  readonly hasCrashed: boolean;
  /** A fresh store holding exactly the committed state at the crash (or now, if it never crashed). */
  recover(): Promise<MemoryStore>;
}

export interface CrashOptions {
  /** Die at the k-th transaction (1-based). */
  at: number;
  /** `after-commit`: right after COMMIT returned (default); `before-commit`: with the transaction's
   * pages written but COMMIT not reached, so reopening rolls it back. */
  point?: "after-commit" | "before-commit";
  /** Group concurrent commits into one transaction (default true). */
  groupCommit?: boolean;
  image?: MemoryImage;
}

/** The crash sweeps' modes: where the world stops, and whether commits share transactions. */
export interface CrashMode {
  name: string;
  point: "after-commit" | "before-commit";
  groupCommit: boolean;
}

export const CRASH_MODES: readonly CrashMode[] = [
  { name: "grouped, crash after COMMIT", point: "after-commit", groupCommit: true },
  { name: "one commit per transaction, crash after COMMIT", point: "after-commit", groupCommit: false },
  { name: "grouped, crash before COMMIT", point: "before-commit", groupCommit: true },
];

export async function crashingStore(options: CrashOptions | { afterCommit: number }): Promise<CrashingStore> {
  const o: CrashOptions = "afterCommit" in options ? { at: options.afterCommit } : options;
  const point = o.point ?? "after-commit";
  const store = await memoryStore(o.image, o.groupCommit === false ? { groupCommit: false } : {});
  let image: MemoryImage | undefined;
  let signalCrash!: () => void;
  const crashed = new Promise<void>((r) => {
    signalCrash = r;
  });
  store.setFaultHook((p, { transaction }) => {
    if (p !== point || transaction !== o.at || image) return;
    image = store.image();
    store.kill(`crashed at ${point} of transaction ${transaction}`);
    signalCrash();
    throw new StoreClosed(`crashed at ${point} of transaction ${transaction}`);
  });
  return {
    store,
    crashed,
    get hasCrashed() {
      return image !== undefined;
    },
    recover: () => memoryStore(image ?? store.image()),
  };
}

export class CardDeclined extends Error {
  override readonly name = "CardDeclined";
}

export class TransientFailure extends Error {
  override readonly name = "TransientFailure";
}

export interface Charge {
  readonly key: string;
  readonly ref: string;
  readonly amount: number;
  refunded: boolean;
}

/** A payment provider that deduplicates by idempotency key. */
export class FakePayments {
  readonly charges = new Map<string, Charge>();
  /** Every call that applied a charge (a repeated key is deduplicated and not listed twice). */
  readonly applied: Charge[] = [];
  readonly log: string[] = [];
  #declined = new Set<string>();
  #failNext = 0;
  #holdConfirmations: boolean;
  #releases = new Set<() => void>();

  constructor(options: { declined?: string[]; holdConfirmations?: boolean } = {}) {
    for (const card of options.declined ?? []) this.#declined.add(card);
    this.#holdConfirmations = options.holdConfirmations ?? false;
  }

  /** The next n calls fail with a transient error before doing anything. */
  failNext(n: number): void {
    this.#failNext = n;
  }

  async charge(key: string, ref: string, amount: number, card: string): Promise<Charge> {
    await Promise.resolve();
    if (this.#failNext > 0) {
      this.#failNext--;
      throw new TransientFailure("payment service unavailable");
    }
    const existing = this.charges.get(key);
    if (existing) return existing;
    if (this.#declined.has(card)) {
      this.log.push(`declined:${ref}`);
      throw new CardDeclined(`card ${card} declined`);
    }
    const charge: Charge = { key, ref, amount, refunded: false };
    this.charges.set(key, charge);
    this.applied.push(charge);
    this.log.push(`charge:${ref}`);
    return charge;
  }

  /** Wait until the charge is confirmed; held confirmations wait for `release()` or the signal. */
  confirm(key: string, signal: AbortSignal): Promise<void> {
    if (!this.#holdConfirmations) return Promise.resolve();
    return new Promise<void>((resolve, reject) => {
      if (signal.aborted) return reject(signal.reason);
      const done = () => {
        this.#releases.delete(done);
        signal.removeEventListener("abort", onAbort);
        resolve();
      };
      const onAbort = () => {
        this.#releases.delete(done);
        reject(signal.reason);
      };
      signal.addEventListener("abort", onAbort, { once: true });
      this.#releases.add(done);
      void key;
    });
  }

  /** Release every held confirmation, now and from now on. */
  release(): void {
    this.#holdConfirmations = false;
    for (const r of [...this.#releases]) r();
  }

  get waitingConfirmations(): number {
    return this.#releases.size;
  }

  async refund(key: string, ref: string): Promise<void> {
    await Promise.resolve();
    const charge = this.charges.get(key);
    if (charge && !charge.refunded) {
      charge.refunded = true;
      this.log.push(`refund:${ref}`);
    }
  }

  /** Keys charged per reference; more than one would mean a payment was charged twice. */
  keysPerRef(): Map<string, number> {
    const out = new Map<string, number>();
    for (const c of this.applied) out.set(c.ref, (out.get(c.ref) ?? 0) + 1);
    return out;
  }
}

/** A mail service that sends each idempotency key once. */
export class FakeMailer {
  readonly sent = new Map<string, { to: string; subject: string }>();
  sends = 0;
  #failNext = 0;

  failNext(n: number): void {
    this.#failNext = n;
  }

  async send(key: string, to: string, subject: string): Promise<string> {
    await Promise.resolve();
    if (this.#failNext > 0) {
      this.#failNext--;
      throw new TransientFailure("mail service unavailable");
    }
    this.sends++;
    if (!this.sent.has(key)) this.sent.set(key, { to, subject });
    return `msg-${key}`;
  }
}

// ---------------------------------------------------------------------------------------------
// Agent test kit: pi-ai's faux provider answering from the request context, and a keyed-effect tool.

import {
  type Api,
  type AssistantMessage,
  type Context,
  type FauxResponseFactory,
  fauxAssistantMessage,
  type Message,
  type Model,
  registerFauxProvider,
} from "@mariozechner/pi-ai";
import { Type } from "typebox";
import { createModelResolver, type ModelResolver } from "./agent/models/resolver.ts";
import { defineTool, type ReplayPolicy, type ToolDefinition, textResult } from "./agent/tools/contract.ts";

/** A request as the faux model received it: the system prompt, a copy of the messages, tool names. */
export interface FauxRequest {
  readonly systemPrompt: string | undefined;
  readonly messages: Message[];
  readonly tools: string[];
}

/** Derives the answer from the request (`call` counts requests from 1, for scripts that need it). */
export type FauxResponder = (
  request: FauxRequest,
  call: number,
) => AssistantMessage | Promise<AssistantMessage>;

export interface FauxAgentModel {
  readonly model: Model<Api>;
  readonly ref: { provider: string; id: string };
  /** A resolver that knows this model (pass as `models`). */
  readonly models: ModelResolver;
  /** Every request, in order. */
  readonly requests: FauxRequest[];
  /** The responder used for the next requests (replaceable). */
  respond: FauxResponder;
  unregister(): void;
}

/**
 * Register pi-ai's faux provider with one responder for every request (the queue never runs dry), so
 * that a request sent again after a crash gets the same answer. Give tool calls fixed ids
 * (`fauxToolCall(name, args, { id })`) to keep transcripts comparable across runs.
 */
export function fauxAgentModel(
  respond: FauxResponder,
  options: { id?: string; tokensPerSecond?: number; record?: boolean; contextWindow?: number } = {},
): FauxAgentModel {
  const faux = registerFauxProvider({
    provider: "faux",
    models: [
      {
        id: options.id ?? "faux-1",
        ...(options.contextWindow ? { contextWindow: options.contextWindow } : {}),
      },
    ],
    ...(options.tokensPerSecond !== undefined ? { tokensPerSecond: options.tokensPerSecond } : {}),
  });
  const model = faux.getModel() as Model<Api>;
  const handle: FauxAgentModel = {
    model,
    ref: { provider: model.provider, id: model.id },
    models: createModelResolver({ extra: [model] }),
    requests: [],
    respond,
    unregister: () => faux.unregister(),
  };
  const step: FauxResponseFactory = (context: Context) => {
    faux.appendResponses([step]);
    const request: FauxRequest = {
      systemPrompt: context.systemPrompt,
      // Recording copies every request (tests read them later); benchmarks turn it off.
      messages: options.record === false ? context.messages : structuredClone(context.messages),
      tools: (context.tools ?? []).map((t) => t.name),
    };
    if (options.record !== false) handle.requests.push(request);
    return handle.respond(request, handle.requests.length);
  };
  faux.setResponses([step, step, step, step]);
  return handle;
}

/** The faux model's error answer (a provider error such as "503 Service Unavailable"). */
export function fauxError(errorMessage: string): AssistantMessage {
  return fauxAssistantMessage([], { stopReason: "error", errorMessage });
}

/** A deferred you resolve later (gates for tools and responders). */
export function gate<T = void>(): { promise: Promise<T>; open(value: T): void } {
  let open!: (value: T) => void;
  const promise = new Promise<T>((r) => {
    open = r;
  });
  return { promise, open };
}

/** An external service applying effects keyed by idempotency key (a repeated key is deduplicated). */
export class KeyedEffects {
  /** Keys in the order they were first applied, with what they were about. */
  readonly applied: Array<{ key: string; ref: string }> = [];
  /** Every call, deduplicated or not. */
  calls = 0;
  #failNext = 0;

  /** The next n calls fail with a transient error before doing anything. */
  failNext(n: number): void {
    this.#failNext = n;
  }

  async apply(key: string, ref: string): Promise<"applied" | "duplicate"> {
    await Promise.resolve();
    this.calls++;
    if (this.#failNext > 0) {
      this.#failNext--;
      throw new TransientFailure("effect service unavailable");
    }
    if (this.applied.some((a) => a.key === key)) return "duplicate";
    this.applied.push({ key, ref });
    return "applied";
  }

  /** How many distinct keys each ref was applied under (more than one: the key was not stable). */
  keysPerRef(): Map<string, number> {
    const out = new Map<string, number>();
    for (const a of this.applied) out.set(a.ref, (out.get(a.ref) ?? 0) + 1);
    return out;
  }
}

/**
 * A tool `{ item: string }` that applies one effect in `effects`, keyed by its tool-call id, and
 * answers `<name> applied <item>`. `seen` records the arguments of every execution.
 */
export function keyedEffectTool(
  effects: KeyedEffects,
  options: { name: string; replay?: ReplayPolicy; seen?: Array<{ item: string }> },
): ToolDefinition {
  return defineTool({
    name: options.name,
    description: `Apply ${options.name} to an item`,
    parameters: Type.Object({ item: Type.String() }),
    ...(options.replay ? { replay: options.replay } : {}),
    async execute(args, api) {
      options.seen?.push({ ...args });
      await effects.apply(`${options.name}:${api.toolCallId}`, args.item);
      return textResult(`${options.name} applied ${args.item}`);
    },
  });
}

/** Poll until `condition` holds (tests that watch a fake's state); fails after `timeoutMs`. */
export async function until(condition: () => boolean, timeoutMs = 5000): Promise<void> {
  const start = Date.now();
  while (!condition()) {
    if (Date.now() - start > timeoutMs) throw new Error("condition not met in time");
    await new Promise((r) => setTimeout(r, 1));
  }
}
