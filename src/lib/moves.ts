/**
 * Moving a conversation between its homes (issue 27, item 4), as the tab offers it: "Run on the
 * server" for a conversation in this browser, "Bring back to this browser" for one on the server,
 * both asked of this browser's engine (`homes.toServer`, `homes.bringBack`), which drives the move
 * over its own connection to the server and finishes it by itself if the server is lost midway. And
 * the words of a conversation that left its home: its copy is read-only, marked with where it lives.
 * The conversation's bar (HomeBar.svelte) shows both.
 */
import type { ConversationAway, EngineApi, MoveView } from "../../worker/protocol/index.ts";

export interface MoveAction {
  /** The button's words, e.g. "Run on the server". */
  readonly label: string;
  /** A stable name for tests (`data-testid`). */
  readonly testid: string;
  /**
   * Move conversation `conversationId`; resolves when it finished (the tab then opens it in its new
   * home), or with words to show when it is left pending; rejects in words when it cannot.
   */
  run(conversationId: number): Promise<string | undefined>;
}

/** A conversation that left this home, in words, and where its live copy opens. */
export interface AwayMark {
  readonly words: string;
  readonly link?: { readonly href: string; readonly label: string };
}

export interface MoveDeps {
  /** This browser's engine (which drives every move). */
  readonly local: Pick<EngineApi, "homes"> | undefined;
  /** Open a conversation (`#/c/<id>` or `#/s/<id>`). */
  readonly open: (hash: string) => void;
}

const PENDING =
  "The server stopped answering midway: the move finishes by itself when it is back. Until then the conversation runs nowhere.";

function ended(view: MoveView, deps: MoveDeps): string | undefined {
  if (view.status === "cancelled") throw new Error(`The move was cancelled: ${view.reason ?? "refused"}`);
  if (view.status === "pending") return PENDING;
  if (view.direction === "toServer" && view.remote !== undefined) deps.open(`#/s/${view.remote}`);
  if (view.direction === "back" && view.local !== undefined) deps.open(`#/c/${view.local}`);
  return undefined;
}

/** The actions a conversation of each home offers (none once it went away). */
export function moveActions(home: "browser" | "server", deps: MoveDeps): readonly MoveAction[] {
  const homes = deps.local?.homes;
  if (!homes) return [];
  return home === "browser"
    ? [
        {
          label: "Run on the server",
          testid: "move-to-server",
          run: async (id) => ended(await homes.toServer(id), deps),
        },
      ]
    : [
        {
          label: "Bring back to this browser",
          testid: "bring-back",
          run: async (id) => ended(await homes.bringBack(id), deps),
        },
      ];
}

/** The mark of a conversation of `home` that went away (`connected`: the server answers now). */
export function awayMark(
  home: "browser" | "server",
  away: ConversationAway | undefined,
  connected: boolean,
): AwayMark | undefined {
  if (!away) return undefined;
  if (away.status === "moving")
    return {
      words:
        home === "browser"
          ? "Moving to the server: it runs nowhere until the move finishes."
          : "Moving to a browser: it runs nowhere until the move finishes.",
    };
  if (home === "server") return { words: "Lives in a browser now: this copy on the server is read-only." };
  return {
    words: "Lives on the server: this copy in the browser is read-only.",
    ...(connected && away.remote !== undefined
      ? { link: { href: `#/s/${away.remote}`, label: "Open it on the server" } }
      : {}),
  };
}
