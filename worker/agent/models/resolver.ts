/**
 * The model seam. pi-ai 0.73.1 has a static catalogue (`getProviders`, `getModels`, `getModel`)
 * and no registry for custom models, so the engine resolves model references here: extra models
 * (the offline demo model, user-configured endpoints) first, then pi-ai's catalogue. No API keys.
 * The catalogue is pi-ai's, loaded on demand (pi-ai.ts): an extra model resolves without it; the
 * catalogue is read only once pi-ai is loaded, which an open harness guarantees.
 */
import type { Api, AssistantMessage, KnownProvider, Model } from "@mariozechner/pi-ai";
import { piAi } from "./pi-ai.ts";

/** Which model to resolve: a provider and its model id (the shape pi.agent stores). */
export interface ModelRef {
  readonly provider: string;
  readonly modelId: string;
}

export interface ModelInfo {
  readonly provider: string;
  readonly id: string;
  readonly name: string;
  /** Its provider answers without an API key (the app's offline demo model). */
  readonly keyless?: true;
}

/**
 * A response a provider will give later (batch APIs): pi-ai 0.73.1 has no deferred API, so this seam
 * defines one. A stream whose final message carries `deferred` is not an answer; the generation keeps
 * the handle durably and polls `fetchDeferred` for it.
 */
export interface DeferredHandle {
  readonly id: string;
  /** When to ask again (default 5,000 ms). */
  readonly pollAfterMs?: number;
}

export type DeferredAnswer = AssistantMessage & { readonly deferred: DeferredHandle };

export function isDeferred(message: AssistantMessage | DeferredAnswer): message is DeferredAnswer {
  const handle = (message as { deferred?: unknown }).deferred;
  return typeof handle === "object" && handle !== null && typeof (handle as DeferredHandle).id === "string";
}

export interface ModelResolver {
  /** The model for `ref`, or undefined when neither the extras nor pi-ai know it. */
  resolve(ref: ModelRef): Model<Api> | undefined;
  /** Every known model: the extras first (in the order given), then pi-ai's, by provider. */
  list(): ModelInfo[];
  /** The answer for a deferred response, or the same or a new handle while it is not ready. */
  fetchDeferred?(
    model: Model<Api>,
    handle: DeferredHandle,
    signal: AbortSignal,
  ): Promise<AssistantMessage | DeferredAnswer>;
  /** Give up a deferred response (the generation was aborted while polling). */
  cancelDeferred?(model: Model<Api>, handle: DeferredHandle, signal: AbortSignal): Promise<void>;
}

export interface ModelResolverOptions {
  /** Models known besides pi-ai's catalogue; they win over a catalogue model of the same ref. */
  readonly extra?: readonly Model<Api>[];
  /** Deferred responses, for resolvers whose providers answer later. */
  readonly deferred?: Pick<ModelResolver, "fetchDeferred" | "cancelDeferred">;
  /** Providers that need no API key (their models are listed `keyless`). */
  readonly keyless?: readonly string[];
}

const keyOf = (provider: string, modelId: string) => `${provider}\u0000${modelId}`;

function catalogueModel(ref: ModelRef): Model<Api> | undefined {
  const { getModel, getProviders } = piAi();
  if (!(getProviders() as string[]).includes(ref.provider)) return undefined;
  // getModel is typed for literal provider/id pairs; at run time it is a plain lookup.
  const lookup = getModel as unknown as (provider: string, id: string) => Model<Api> | undefined;
  return lookup(ref.provider, ref.modelId);
}

export function createModelResolver(options: ModelResolverOptions = {}): ModelResolver {
  const extras = new Map<string, Model<Api>>();
  for (const model of options.extra ?? []) extras.set(keyOf(model.provider, model.id), model);
  const keyless = new Set(options.keyless ?? []);
  const info = (m: Model<Api>): ModelInfo => ({
    provider: m.provider,
    id: m.id,
    name: m.name,
    ...(keyless.has(m.provider) ? { keyless: true as const } : {}),
  });
  return {
    ...options.deferred,
    resolve(ref) {
      return extras.get(keyOf(ref.provider, ref.modelId)) ?? catalogueModel(ref);
    },
    list() {
      const out: ModelInfo[] = [...extras.values()].map(info);
      const { getModels, getProviders } = piAi();
      for (const provider of getProviders()) {
        for (const m of getModels(provider as KnownProvider) as Model<Api>[]) {
          if (extras.has(keyOf(m.provider, m.id))) continue;
          out.push(info(m));
        }
      }
      return out;
    },
  };
}
