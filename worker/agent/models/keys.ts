/**
 * API keys are agent settings, kept in the store's settings: one document of conversation 0, which
 * no conversation view, entry, export or log includes. A request reads its provider's key at the
 * moment it is sent (never into task state or the transcript); a tab may set a key or ask whether
 * one is set, never read it back. The offline demo provider needs no key.
 */
import type { Tx } from "../../core/define.ts";
import type { ConversationId, Json } from "../../core/types.ts";
import { demoModel } from "./demo-provider.ts";
import type { ModelInfo, ModelResolver } from "./resolver.ts";

/** The conversation whose documents hold settings (never a real conversation: ids start at 1). */
export const SETTINGS_CONVERSATION: ConversationId = 0;
/** The keys' document (its name predates this module: stores already hold keys under it). */
export const API_KEYS_DOC = "engine.apiKeys";

type Keys = Record<string, string>;

/** A model as a picker lists it: whether a key must be set before it can answer. */
export interface ModelChoice extends ModelInfo {
  readonly needsKey: boolean;
}

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

/** Every model the resolver knows, each marked with whether its provider needs a key. */
export function modelChoices(models: ModelResolver): ModelChoice[] {
  return models.list().map((m) => ({ ...m, needsKey: m.provider !== demoModel.provider }));
}
