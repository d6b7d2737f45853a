/**
 * API keys are agent settings, kept in the store's settings: one document of conversation 0, which
 * no conversation view, entry, export or log includes. A request reads its provider's key at the
 * moment it is sent (never into task state or the transcript); a tab may set a key or ask whether
 * one is set, never read it back. A provider the resolver lists as keyless (the app's offline demo
 * model) needs none.
 */
import type { Tx } from "../../core/define.ts";
import type { ConversationId, Json } from "../../core/types.ts";
import type { ModelInfo, ModelResolver } from "./resolver.ts";

/** The conversation whose documents hold settings (never a real conversation: ids start at 1). */
export const SETTINGS_CONVERSATION: ConversationId = 0;
/** The keys' document (its name predates this module: stores already hold keys under it). */
export const API_KEYS_DOC = "engine.apiKeys";

type Keys = Record<string, string>;

/** A model as a picker lists it: whether a key must be set before it can answer, whether it reasons. */
export interface ModelChoice extends ModelInfo {
  readonly needsKey: boolean;
  readonly reasoning: boolean;
}

/**
 * Providers a browser cannot use with an API key alone, so the app does not offer them: they sign
 * requests with cloud credentials, log in with OAuth, or need a per-account endpoint this engine has
 * no setting for.
 */
export const NOT_FROM_A_BROWSER: Readonly<Record<string, string>> = {
  "amazon-bedrock": "AWS request signing",
  "azure-openai-responses": "a per-resource endpoint",
  "cloudflare-ai-gateway": "a per-account endpoint",
  "cloudflare-workers-ai": "a per-account endpoint",
  "github-copilot": "OAuth login",
  "google-vertex": "Google Cloud credentials",
  "openai-codex": "OAuth login",
};

/** The stored key of `provider`, given a reader of committed documents. */
export function storedApiKey(
  doc: (conversationId: ConversationId, name: string) => Json | undefined,
  provider: string,
): string | undefined {
  return (doc(SETTINGS_CONVERSATION, API_KEYS_DOC) as Keys | undefined)?.[provider];
}

/** Store `key` for `provider` in this commit, or forget it (null). */
export function writeApiKey(tx: Tx, provider: string, key: string | null): void {
  const keys: Keys = { ...((tx.readDoc(SETTINGS_CONVERSATION, API_KEYS_DOC) as Keys | undefined) ?? {}) };
  if (key) keys[provider] = key;
  else delete keys[provider];
  tx.writeDoc(SETTINGS_CONVERSATION, API_KEYS_DOC, keys);
}

/** Every stored key's value: only for redacting them from what leaves the engine (exports). */
export function storedApiKeyValues(
  doc: (conversationId: ConversationId, name: string) => Json | undefined,
): string[] {
  return Object.values((doc(SETTINGS_CONVERSATION, API_KEYS_DOC) as Keys | undefined) ?? {}).filter(Boolean);
}

/** The providers with a stored key (names only: a key is never read back). */
export function providersWithKeys(
  doc: (conversationId: ConversationId, name: string) => Json | undefined,
): string[] {
  const keys = doc(SETTINGS_CONVERSATION, API_KEYS_DOC) as Keys | undefined;
  return Object.keys(keys ?? {})
    .filter((p) => Boolean(keys?.[p]))
    .sort();
}

/**
 * Every model the resolver knows that a browser can use, each marked with whether its provider
 * needs a key and whether it reasons (so a picker offers a thinking level only where it means something).
 */
export function modelChoices(models: ModelResolver): ModelChoice[] {
  return models
    .list()
    .filter((m) => !(m.provider in NOT_FROM_A_BROWSER))
    .map((m) => ({
      provider: m.provider,
      id: m.id,
      name: m.name,
      needsKey: m.keyless !== true,
      reasoning: models.resolve({ provider: m.provider, modelId: m.id })?.reasoning === true,
    }));
}
