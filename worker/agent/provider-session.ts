/**
 * A conversation's provider session id (pi.provider, spec §2.2): every conversation gets one in its
 * creating commit. A legacy conversation without the document (created by a plain harness, or by an
 * older store) gets one on the commit line before its first provider request; the commit reads again
 * before it writes, so concurrent callers all get the one id that was stored first.
 */
import type { Harness } from "../core/harness.ts";
import type { ConversationId } from "../core/types.ts";
import { DOC } from "./records.ts";
import { uuidv7 } from "./uuidv7.ts";

type ProviderDoc = { sessionId?: string };

export async function providerSession(core: Harness, conversationId: ConversationId): Promise<string> {
  const committed = core.docNow(conversationId, DOC.provider) as ProviderDoc | undefined;
  if (committed?.sessionId) return committed.sessionId;
  return core.transaction((tx) => {
    const current = tx.readDoc(conversationId, DOC.provider) as ProviderDoc | undefined;
    if (current?.sessionId) return current.sessionId;
    const sessionId = uuidv7(tx.now());
    tx.writeDoc(conversationId, DOC.provider, { sessionId });
    return sessionId;
  });
}
