/**
 * The tab's connection to a server space (issue 27), next to its browser engine: reads the saved
 * address and token from the browser engine (`remote.credentials`, never shown), keeps one
 * reconnecting socket (worker/protocol/socket.ts) and the space's conversation list live over it,
 * and words its state for the list's dot and the settings. Invariants:
 * - with no server saved nothing is opened: no socket, no state (`state` undefined);
 * - the token stays inside the socket's subprotocol: this class keeps no copy once connected, and
 *   nothing it shows or reports carries it;
 * - a change of the setting in one tab reaches the app's other tabs (BroadcastChannel
 *   `remote:<store>`), and each opens its own socket again with the new setting;
 * - the list watch is held by the connection, so it is re-opened (whole) after every reconnect.
 */
import {
  type ConversationSummary,
  type EngineApi,
  errorMessage,
  type RemoteSettings,
} from "../../worker/protocol/index.ts";
import {
  checkServer,
  connectServer,
  probeServer,
  type ServerCheck,
  type ServerConnection,
  type ServerState,
  spaceAddress,
} from "../../worker/protocol/socket.ts";

export { checkWords, type ServerDot, serverWords } from "./server-words.ts";

/** What a view needs of a home of conversations: its API (absent while there is none) and its list. */
export interface ConversationHome {
  readonly api: EngineApi | undefined;
  /** The conversations the list shows (the browser's: a page of the newest). */
  readonly conversations: readonly ConversationSummary[];
  /** Whether there are more than it shows, and `showMore` adds some (the browser's paged list). */
  readonly canShowMore?: boolean;
  showMore?(): void;
  /** How many there are in all, when the list is a page. */
  readonly conversationTotal?: number;
}

type LocalRemote = Pick<EngineApi, "remote">;

export class ServerClient implements ConversationHome {
  /** The saved setting as the settings show it (never the token). */
  settings = $state.raw<RemoteSettings>({ url: null, hasToken: false });
  /** The connection's state; undefined when no server is set (browser only). */
  state = $state.raw<ServerState | undefined>(undefined);
  conversations = $state.raw<ConversationSummary[]>([]);
  /** The space's name, from the saved address. */
  space = $state.raw<string | undefined>(undefined);
  api = $state.raw<EngineApi | undefined>(undefined);
  #connection: ServerConnection | undefined;
  #local: LocalRemote | undefined;
  #channel: BroadcastChannel | undefined;

  constructor(
    readonly tabId: string,
    readonly storeName: string,
  ) {}

  /** Read the setting from the browser engine and connect when one is saved (once per engine). */
  async start(local: LocalRemote): Promise<void> {
    if (this.#local === local) return;
    this.#local = local;
    if (typeof BroadcastChannel === "function" && !this.#channel) {
      this.#channel = new BroadcastChannel(`remote:${this.storeName}`);
      this.#channel.onmessage = () => void this.reload().catch(() => undefined);
    }
    // An engine that cannot answer now (handing over) leaves the app browser-only until the next.
    await this.reload().catch(() => undefined);
  }

  /** Read the setting again and (re)connect with it, or disconnect when there is none. */
  async reload(): Promise<void> {
    const local = this.#local;
    if (!local) return;
    const [settings, credentials] = await Promise.all([local.remote.get(), local.remote.credentials()]);
    this.settings = settings;
    this.#close();
    if (!credentials) return;
    let address: ReturnType<typeof spaceAddress>;
    try {
      address = spaceAddress(credentials.url, credentials.token);
    } catch (e) {
      this.state = { state: "incompatible", message: errorMessage(e) };
      return;
    }
    this.space = address.space;
    const connection = connectServer({
      url: address.socketUrl,
      token: credentials.token,
      tabId: this.tabId,
      probe: () => probeServer(address.checkUrl, credentials.token),
      onState: (state) => {
        if (this.#connection === connection) this.state = state;
      },
    });
    this.#connection = connection;
    this.state = connection.state;
    this.api = connection.api;
    void connection.api.conversations
      .watch((list: ConversationSummary[]) => {
        if (this.#connection === connection) this.conversations = list;
      })
      .catch(() => undefined);
  }

  /** Save a new address (and token: null keeps the saved one), then connect with it in every tab. */
  async save(url: string, token: string | null): Promise<void> {
    await this.#local?.remote.set(url, token);
    this.#changed();
    await this.reload();
  }

  /** Forget the server: the socket closes and its section leaves the list, in every tab. */
  async disconnect(): Promise<void> {
    await this.#local?.remote.set(null, null);
    this.#changed();
    await this.reload();
  }

  /** One attempt with `url` and `token` (or the saved ones where not given), without saving anything. */
  async test(
    url: string | undefined,
    token: string | undefined,
  ): Promise<{ check: ServerCheck; space: string }> {
    const saved = await this.#local?.remote.credentials();
    const address = spaceAddress(url?.trim() || saved?.url || "");
    const using = token?.trim() || saved?.token;
    if (!using)
      return { check: { ok: false, problem: "unauthorized", message: "no token" }, space: address.space };
    const check = await checkServer({
      url: address.socketUrl,
      token: using,
      tabId: `${this.tabId}:check`,
      probe: () => probeServer(address.checkUrl, using),
    });
    return { check, space: address.space };
  }

  #changed(): void {
    this.#channel?.postMessage("changed");
  }

  #close(): void {
    this.#connection?.close();
    this.#connection = undefined;
    this.state = undefined;
    this.api = undefined;
    this.space = undefined;
    this.conversations = [];
  }
}
