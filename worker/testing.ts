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
import { StoreClosed } from "./store/types.ts";

export function memoryStore(image?: MemoryImage, options: { groupCommit?: boolean } = {}): Promise<MemoryStore> {
  return openStore({ kind: "memory", ...(image ? { image } : {}), ...options });
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
