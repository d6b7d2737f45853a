/**
 * The saved secrets (every stored API key, the saved server token, the MCP servers' tokens) and their redaction from what
 * a person or a file sees besides the transcript itself: titles, the conversation list, export file
 * names, search. Invariants:
 * - `savedSecrets` reads committed (or in-commit) settings documents only, and never returns a value
 *   shorter than `MIN_SECRET` (a short value would redact ordinary words; keys and tokens are longer);
 * - `redactSecrets` replaces every whole occurrence with `[redacted]`, longest secret first, so a
 *   secret that contains another leaves no piece behind; redact before cutting text short, never
 *   after, or a cut secret would keep its prefix.
 */
import { storedApiKeyValues } from "../agent/models/keys.ts";
import type { ConversationId, Json } from "../core/types.ts";
import { mcpSecrets } from "./mcp/store.ts";
import { remoteSecrets } from "./remote.ts";

export const MIN_SECRET = 8;
export const REDACTED = "[redacted]";

type DocReader = (conversationId: ConversationId, name: string) => Json | undefined;

/** Every saved key, the saved server token and the MCP servers' tokens (long enough to redact), longest first. */
export function savedSecrets(doc: DocReader): string[] {
  const all = [...storedApiKeyValues(doc), ...remoteSecrets(doc), ...mcpSecrets(doc)].filter(
    (s) => typeof s === "string" && s.length >= MIN_SECRET,
  );
  return [...new Set(all)].sort((a, b) => b.length - a.length);
}

/** A harness's saved secrets, read anew at each call (the `secrets` option of the app's harnesses). */
export function harnessSecrets(
  harness: () => { docNow(c: ConversationId, name: string): Json | undefined } | undefined,
) {
  return (): string[] => {
    const h = harness();
    return h ? savedSecrets((c, name) => h.docNow(c, name)) : [];
  };
}

/** `text` with every occurrence of each secret replaced by `[redacted]`. */
export function redactSecrets(text: string, secrets: readonly string[]): string {
  let out = text;
  for (const secret of secrets)
    if (secret.length >= MIN_SECRET && out.includes(secret)) out = out.split(secret).join(REDACTED);
  return out;
}

/** The shortest end piece of a cut title that is taken for the start of a secret. */
const MIN_CUT_PIECE = 4;

/**
 * A title as shown: `redactSecrets`, and when the title was cut short (it ends in "…") and what
 * precedes the ellipsis ends with the first characters of a secret, those go too (a title taken
 * before the secret was saved may have cut it).
 */
export function redactTitle(title: string, secrets: readonly string[]): string {
  const whole = redactSecrets(title, secrets);
  if (!whole.endsWith("…")) return whole;
  const body = whole.slice(0, -1);
  let cut = 0;
  for (const secret of secrets)
    for (let n = Math.min(secret.length - 1, body.length); n >= MIN_CUT_PIECE && n > cut; n--)
      if (body.endsWith(secret.slice(0, n))) {
        cut = n;
        break;
      }
  return cut ? `${body.slice(0, body.length - cut)}${REDACTED}…` : whole;
}
