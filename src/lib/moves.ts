/**
 * The place for moving a conversation between its homes (issue 27, item 4): "Run on the server" for
 * a conversation in this browser, "Bring back to this browser" for one on the server. The
 * conversation's bar (HomeBar.svelte) shows the actions listed here for the conversation's home; the
 * list is empty until the move exists (the engine's durable handover), so nothing is offered yet.
 */

export interface MoveAction {
  /** The button's words, e.g. "Run on the server". */
  readonly label: string;
  /** A stable name for tests (`data-testid`). */
  readonly testid: string;
  /** Start the move of conversation `conversationId`; rejects in words when it cannot. */
  run(conversationId: number): Promise<void>;
}

/** The actions a conversation of each home offers. */
export function moveActions(_home: "browser" | "server"): readonly MoveAction[] {
  return [];
}
