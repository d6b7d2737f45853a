/**
 * The model seam. pi-ai 0.73.1 has a static catalogue (`getProviders`, `getModels`, `getModel`)
 * and no registry for custom models, so the engine resolves model references here: extra models
 * (the offline demo model, user-configured endpoints) first, then pi-ai's catalogue. No API keys.
 */
import {
  type Api,
  getModel,
  getModels,
  getProviders,
  type KnownProvider,
  type Model,
} from "@mariozechner/pi-ai";

export interface ModelRef {
  readonly provider: string;
  readonly id: string;
}

export interface ModelInfo {
  readonly provider: string;
  readonly id: string;
  readonly name: string;
}

export interface ModelResolver {
  /** The model for `ref`, or undefined when neither the extras nor pi-ai know it. */
  resolve(ref: ModelRef): Model<Api> | undefined;
  /** Every known model: the extras first (in the order given), then pi-ai's, by provider. */
  list(): ModelInfo[];
}

export interface ModelResolverOptions {
  /** Models known besides pi-ai's catalogue; they win over a catalogue model of the same ref. */
  readonly extra?: readonly Model<Api>[];
}

const keyOf = (ref: ModelRef) => `${ref.provider}\u0000${ref.id}`;

function catalogueModel(ref: ModelRef): Model<Api> | undefined {
  if (!(getProviders() as string[]).includes(ref.provider)) return undefined;
  // getModel is typed for literal provider/id pairs; at run time it is a plain lookup.
  const lookup = getModel as unknown as (provider: string, id: string) => Model<Api> | undefined;
  return lookup(ref.provider, ref.id);
}

export function createModelResolver(options: ModelResolverOptions = {}): ModelResolver {
  const extras = new Map<string, Model<Api>>();
  for (const model of options.extra ?? []) extras.set(keyOf(model), model);
  return {
    resolve(ref) {
      return extras.get(keyOf(ref)) ?? catalogueModel(ref);
    },
    list() {
      const out: ModelInfo[] = [...extras.values()].map((m) => ({
        provider: m.provider,
        id: m.id,
        name: m.name,
      }));
      for (const provider of getProviders()) {
        for (const m of getModels(provider as KnownProvider) as Model<Api>[]) {
          if (extras.has(keyOf(m))) continue;
          out.push({ provider: m.provider, id: m.id, name: m.name });
        }
      }
      return out;
    },
  };
}
