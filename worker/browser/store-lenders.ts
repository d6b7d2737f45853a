/**
 * Tabs lending the SharedWorker engine a dedicated worker to hold its store: the `opfs-lent` kind
 * (worker/store/lent/client.ts). A SharedWorker cannot open OPFS sync access handles, so the opfs store
 * lives in a worker a tab starts (worker/entry/lent-store.ts) and hands over by port on the tab's
 * side channel (script-worker-channel.ts, `op: "store"`), as script workers are lent.
 * - Each tab that offers its side channel is a possible lender; the oldest live one lends (so the
 *   store stays where it is while newer tabs come and go). A tab that fails to start one, or does not
 *   answer within LEND_TIMEOUT_MS, is passed over from then on.
 * - When the lending tab goes away (its lock is granted to the engine: `drop`; or its port closes),
 *   the store is handed to the next lender (`LentStore.lenderGone`): the engine keeps its harness,
 *   the scheduler and the store's lock; its store calls pause until the new lender serves them.
 * - `lend` waits for a tab when none offers yet (the engine starts before its first tab's offer).
 * Invariant: a store's lender is never the tab that just lost it.
 */
import { type LentStore, openLentStore, type Relent } from "../store/lent/client.ts";
import { LENT_PARTS, type OpenStamp } from "./platform.ts";

/** What a tab's side channel offers for the store (script-worker-channel.ts). */
export interface StoreLenderOffer {
  /** A store worker's port; `spare`: the one the tab's hello lent (no request crossed the tab). */
  startStore(): Promise<{ id: number; port: MessagePort; spare?: boolean }>;
  terminate(id: number): Promise<void>;
}

/** How long a tab has to hand over a store worker before another tab is asked. */
export const LEND_TIMEOUT_MS = 5000;

interface Lender {
  readonly tabId: string;
  readonly offer: StoreLenderOffer;
  readonly order: number;
}

export interface StoreLenderStats {
  /** Tabs that could lend now. */
  readonly lenders: number;
  /** The tab lending each open store; `spare`: its worker is the one that tab's hello lent. */
  readonly lending: ReadonlyArray<{ store: string; tabId: string; spare: boolean }>;
  /** Every handover of a store to a new lender, in order. */
  readonly handovers: ReadonlyArray<Relent & { store: string }>;
}

export class StoreLenders {
  readonly #tabs = new Map<string, Lender>();
  #order = 0;
  #waiting: Array<() => void> = [];
  readonly #stores = new Set<{ tabId: string; store: LentStore; spare: boolean }>();
  /** Handovers of stores closed since. */
  readonly #ended: Array<Relent & { store: string }> = [];

  /** `tabId` can lend (its side channel is open). */
  offer(tabId: string, offer: StoreLenderOffer): void {
    this.#tabs.set(tabId, { tabId, offer, order: ++this.#order });
    for (const wake of this.#waiting.splice(0)) wake();
  }

  /** Resolves once some tab can lend (at once when one can), or after `ms`. */
  async lenderAtHand(ms: number): Promise<void> {
    if (this.#tabs.size > 0) return;
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, ms);
      this.#waiting.push(() => {
        clearTimeout(timer);
        resolve();
      });
    });
  }

  /** `tabId` went away: it lends no more, and a store it held moves to another tab. */
  drop(tabId: string): void {
    this.#tabs.delete(tabId);
    for (const held of this.#stores)
      if (held.tabId === tabId) held.store.lenderGone(`the tab lending the store (${tabId}) closed`);
  }

  /** A port to a new lent store worker, from the oldest tab that can lend (waits for one). */
  async lend(
    exclude?: string,
    stamp?: OpenStamp,
  ): Promise<{ tabId: string; port: MessagePort; spare: boolean }> {
    for (;;) {
      const lender = [...this.#tabs.values()]
        .filter((t) => t.tabId !== exclude)
        .sort((a, b) => a.order - b.order)[0];
      if (!lender) {
        await new Promise<void>((resolve) => this.#waiting.push(resolve));
        continue;
      }
      stamp?.("lenderAt");
      try {
        const started = await Promise.race([
          lender.offer.startStore(),
          new Promise<never>((_, reject) =>
            setTimeout(() => reject(new Error("the tab did not answer")), LEND_TIMEOUT_MS),
          ),
        ]);
        return { tabId: lender.tabId, port: started.port, spare: started.spare === true };
      } catch {
        // This tab cannot lend: ask the next one.
        if (this.#tabs.get(lender.tabId) === lender) this.#tabs.delete(lender.tabId);
      }
    }
  }

  /** Open store `name` in a lent worker; it follows its lender's tab to the next one. */
  async open(name: string, stamp?: OpenStamp): Promise<LentStore> {
    const first = await this.lend(undefined, stamp);
    stamp?.("lentPortAt");
    const held = { tabId: first.tabId, store: undefined as unknown as LentStore, spare: first.spare };
    const store = await openLentStore({
      port: first.port,
      name,
      ...(stamp
        ? {
            opened: (parts) => {
              stamp("lentOpenAt");
              for (const [step, part] of Object.entries(LENT_PARTS)) {
                const at = parts?.[step as keyof typeof LENT_PARTS];
                if (at !== undefined) stamp(part, at);
              }
            },
          }
        : {}),
      relend: async () => {
        const next = await this.lend(held.tabId);
        held.tabId = next.tabId;
        held.spare = next.spare;
        return next.port;
      },
    });
    held.store = store;
    this.#stores.add(held);
    store.onEnd(() => {
      this.#stores.delete(held);
      this.#ended.push(...store.relent.map((r) => ({ ...r, store: name })));
    });
    return store;
  }

  /** The wasm memory the lent stores hold in their lent workers, in bytes (the benches' `debug.memory`). */
  async wasmMemoryBytes(): Promise<number> {
    const bytes = await Promise.all(
      [...this.#stores].map((held) => held.store.wasmMemoryBytes().catch(() => 0)),
    );
    return bytes.reduce((a, b) => a + b, 0);
  }

  stats(): StoreLenderStats {
    const stores = [...this.#stores];
    return {
      lenders: this.#tabs.size,
      lending: stores.map((s) => ({ store: s.store.name, tabId: s.tabId, spare: s.spare })),
      handovers: [
        ...this.#ended,
        ...stores.flatMap((s) => s.store.relent.map((r) => ({ ...r, store: s.store.name }))),
      ],
    };
  }
}

/** The engine's one registry: app/engine-host.ts takes the offers and drops, the entry opens stores. */
export const storeLenders = new StoreLenders();
