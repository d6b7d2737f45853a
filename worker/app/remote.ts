/**
 * The server this browser attaches to (issue 27): its address and its space's token, kept in the
 * store's settings conversation (conversation 0, never listed or exported) like the API keys. The
 * engine only keeps them; the tab opens the WebSocket (worker/protocol/socket.ts). Invariants:
 * - the token is a secret: `get()` says only whether one is saved; `credentials()` hands it to the
 *   tab's own connection and to nothing else (no entry, export, log or error text carries it: exports
 *   redact it with the API keys, `remoteSecrets`);
 * - what enters is checked here with a typed `RemoteSettingsInvalid` error and nothing is written: an
 *   address is an absolute http(s) or ws(s) URL without credentials, query or fragment, of a space
 *   (`.../space/<name>`) or of a server when the token names the space (`<space>.<mac>`); a token is
 *   what a WebSocket subprotocol may carry (RFC 6455 token characters), at most 1,024 of them;
 * - `set(null, ...)` forgets both (the tab disconnects); `set(url, null)` keeps the saved token.
 */
import type { AgentHarness } from "../agent/harness.ts";
import { SETTINGS_CONVERSATION } from "../agent/models/keys.ts";
import type { ConversationId, Json } from "../core/types.ts";
import type { RemoteApi, RemoteCredentials, RemoteSettings } from "../protocol/index.ts";
import { spaceAddress } from "../protocol/socket.ts";

export const REMOTE_DOC = "app.remote";
const MAX_URL = 2000;
const TOKEN = /^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,1024}$/;

interface Stored {
  url?: string;
  token?: string;
}

/** A refused server setting: `message` says what is wrong, never with the token in it. */
export class RemoteSettingsInvalid extends Error {
  override readonly name = "RemoteSettingsInvalid";
  readonly code = "remote_settings_invalid";
}

/** The address as stored: trimmed, checked, without a trailing slash. */
export function checkServerUrl(url: string): string {
  const text = url.trim();
  if (!text) throw new RemoteSettingsInvalid("enter the server's address");
  if (text.length > MAX_URL)
    throw new RemoteSettingsInvalid(`the address is longer than ${MAX_URL} characters`);
  let parsed: URL;
  try {
    parsed = new URL(text);
  } catch {
    throw new RemoteSettingsInvalid("the address is not a URL (it starts with http:// or https://)");
  }
  if (!["http:", "https:", "ws:", "wss:"].includes(parsed.protocol))
    throw new RemoteSettingsInvalid("the address starts with http://, https://, ws:// or wss://");
  if (parsed.username || parsed.password)
    throw new RemoteSettingsInvalid(
      "the address carries no user name or password: the token goes in its own field",
    );
  if (parsed.search || parsed.hash) throw new RemoteSettingsInvalid("the address has no ? or # part");
  return parsed.toString().replace(/\/+$/, "");
}

export function checkToken(token: string): string {
  const text = token.trim();
  if (!TOKEN.test(text))
    throw new RemoteSettingsInvalid(
      text ? "that is not a token the server prints (letters, digits and - . _ ~ only)" : "paste the token",
    );
  return text;
}

type DocReader = (conversationId: ConversationId, name: string) => Json | undefined;

const stored = (doc: DocReader): Stored =>
  (doc(SETTINGS_CONVERSATION, REMOTE_DOC) as Stored | undefined) ?? {};

/** The saved token, for redacting it from what leaves the engine (exports). */
export function remoteSecrets(doc: DocReader): string[] {
  const token = stored(doc).token;
  return token ? [token] : [];
}

/** The `remote` group of the engine API over harness `h`. */
export function remoteApi(h: () => Promise<AgentHarness>): RemoteApi {
  const read = async () => {
    const harness = await h();
    return stored((c, name) => harness.docNow(c, name));
  };
  return {
    async get(): Promise<RemoteSettings> {
      const { url, token } = await read();
      return { url: url ?? null, hasToken: Boolean(token) };
    },
    async credentials(): Promise<RemoteCredentials | null> {
      const { url, token } = await read();
      return url && token ? { url, token } : null;
    },
    async set(url: string | null, token: string | null): Promise<void> {
      const harness = await h();
      if (url === null) {
        await harness.transaction((tx) => tx.writeDoc(SETTINGS_CONVERSATION, REMOTE_DOC, {}));
        return;
      }
      const address = checkServerUrl(url);
      const kept = token === null ? stored((c, name) => harness.docNow(c, name)).token : checkToken(token);
      // The space: named by the address, or else by the token (`<space>.<mac>`).
      try {
        spaceAddress(address, kept);
      } catch (e) {
        throw new RemoteSettingsInvalid(e instanceof Error ? e.message : String(e));
      }
      await harness.transaction((tx) =>
        tx.writeDoc(SETTINGS_CONVERSATION, REMOTE_DOC, { url: address, ...(kept ? { token: kept } : {}) }),
      );
    },
  };
}
