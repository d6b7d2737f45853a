/**
 * A server connection's state and a connection test in a person's words (pure): the dot beside the
 * server's section (one of four states a person tells apart) and its label, and what "Test
 * connection" found, with what to do next. Never a token.
 */
import type { ServerCheck, ServerState } from "../../worker/protocol/socket.ts";

/** The dot beside the server's section: one of four states a person tells apart. */
export type ServerDot = "connected" | "reconnecting" | "unauthorized" | "offline";

/** A state in words, and its dot. */
export function serverWords(state: ServerState, online = true): { dot: ServerDot; label: string } {
  switch (state.state) {
    case "connected":
      return { dot: "connected", label: "Connected" };
    case "connecting":
      return { dot: "reconnecting", label: "Connecting…" };
    case "reconnecting":
      return !online || !state.reached
        ? { dot: "offline", label: "Offline: trying again" }
        : { dot: "reconnecting", label: "Reconnecting…" };
    case "unauthorized":
      return { dot: "unauthorized", label: "Token refused" };
    case "incompatible":
      return { dot: "unauthorized", label: "Another app version" };
    case "closed":
      return { dot: "offline", label: "Disconnected" };
  }
}

/** A check's result in a person's words (the settings' "Test connection"). */
export function checkWords(check: ServerCheck, space: string): string {
  if (check.ok) return `Connected: the space “${space}” answered.`;
  switch (check.problem) {
    case "unauthorized":
      return `The server refused the token for “${space}”. Make a new one with “npm run server -- token ${space}” and paste it here.`;
    case "refused":
      return "The server answered but would not open the space: its log says why.";
    case "unreachable":
      return "Nothing answered at that address. Is the server running, and is the address right?";
    case "incompatible":
      return "The server runs another version of the app: update one of them.";
  }
}
