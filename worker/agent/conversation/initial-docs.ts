/**
 * The built-in documents every conversation gets in the commit that creates it, whatever path creates
 * it (the harness's creation hook calls `createAgentDocs`), and which of them a fork starts afresh.
 */
import type { Tx } from "../../core/define.ts";
import type { ConversationRecord } from "../../core/types.ts";
import { type AgentState, agentDoc, DOC, type UsageState, writeDoc } from "../records.ts";
import { uuidv7 } from "../uuidv7.ts";

/** The built-in documents a fork does not copy (its creation hook makes them fresh). */
export const FORK_INITIAL: ReadonlySet<string> = new Set([DOC.live, DOC.inbox, DOC.usage, DOC.provider]);

/**
 * A new conversation's documents: a fork keeps its copy of its parent's agent as of its entry (the
 * core copied it: pi.agent's fork rule is "asOf"), a conversation created by a task starts with its
 * owner conversation's agent; the other built-in documents start fresh, a fork's included (their
 * fork rule is "initial": empty inbox, zero usage, its own provider session).
 */
export function createAgentDocs(tx: Tx, record: ConversationRecord): void {
  let agent: AgentState = {};
  if (record.parent) agent = agentDoc.read(tx, record.id);
  else if (record.owner) {
    // The owner's stored agent, read without creating one there (absent reads as `{}`).
    const owner = record.owner.conversationId;
    agent = agentDoc.view({ value: tx.readDoc(owner, DOC.agent), version: tx.docVersion(owner, DOC.agent) });
  }
  agentDoc.write(tx, record.id, agent);
  writeDoc(tx, record.id, DOC.live, {});
  writeDoc(tx, record.id, DOC.inbox, { items: [] });
  writeDoc<UsageState>(tx, record.id, DOC.usage, { models: {}, tools: {} });
  writeDoc(tx, record.id, DOC.provider, { sessionId: uuidv7(tx.now()) });
}
