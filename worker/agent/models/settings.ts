/**
 * The agent harness's models-and-keys area (`harness.models`): the models a picker offers and the API
 * keys the user may set, check or forget. A key goes into the store's settings in one commit and is
 * never read back: callers learn only whether a provider has one, and a check's answer says what went
 * wrong without the key (keys.ts, key-check.ts).
 */
import type { Harness } from "../../core/harness.ts";
import type { AgentServices } from "../services.ts";
import { checkApiKey, type KeyCheck } from "./key-check.ts";
import { type ModelChoice, modelChoices, providersWithKeys, writeApiKey } from "./keys.ts";

export interface ModelsAndKeys {
  /** Every model a conversation may use, each marked with whether its provider needs a key. */
  list(): ModelChoice[];
  /** Keep `key` for `provider` in the store's settings (null forgets it); it is never read back. */
  setKey(provider: string, key: string | null, signal?: AbortSignal): Promise<void>;
  /** Whether requests to `provider` would carry a key. */
  hasKey(provider: string): boolean;
  /** The providers with a key in the store's settings (names only). */
  providersWithKeys(): string[];
  /** Send one tiny request with `provider`'s key; the answer says what went wrong, never the key. */
  testKey(provider: string, signal?: AbortSignal): Promise<KeyCheck>;
}

export function modelsAndKeys(
  core: Pick<Harness, "transaction" | "docNow" | "now">,
  services: () => AgentServices,
): ModelsAndKeys {
  return {
    list: () => modelChoices(services().models),
    setKey: async (provider, key, signal) => {
      await core.transaction((tx) => writeApiKey(tx, provider, key), signal);
    },
    hasKey: (provider) => Boolean(services().apiKey(provider)),
    providersWithKeys: () => providersWithKeys((c, name) => core.docNow(c, name)),
    testKey: (provider, signal) =>
      checkApiKey(services(), provider, { ...(signal ? { signal } : {}), now: () => core.now() }),
  };
}
