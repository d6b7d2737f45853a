/**
 * Where MCP servers live (issue 31 part 2): one document, `app.mcpServers`, of the store's settings
 * conversation (conversation 0: never listed, never exported), holding each server's name, address,
 * optional bearer token and its cached tool list; and their installation as `mcp:<name>` extensions.
 * Invariants:
 * - the token is a secret like an API key: no view carries it (`hasToken` only), exports never see
 *   conversation 0, and `mcpSecrets` adds it to what the harness redacts from entries and logs;
 * - what enters is checked before anything is written (`McpServerInvalid`): a name of 1-24 lowercase
 *   letters, digits or `-` not taken, an http(s) address without credentials or fragment, a token of
 *   visible ASCII; a server is added only once it answered with its tool list;
 * - the cached list is what the agent offers: installed before the engine resumes its tasks (a call
 *   a crash interrupted finds its tool again) and shown by the settings offline; a refresh that fails
 *   keeps the list and stores the problem in words;
 * - a removal, in its commit, drops `mcp:<name>` from every conversation's pi.agent selection;
 * - on a server space (`secretToken` given: worker/app/space-agent.ts) the tokens are the server's
 *   own secrets (`MCP_<NAME>_TOKEN` in its environment), read at each use: a draft that carries a
 *   token is refused (a browser's token never reaches the server's store), none is ever stored, and
 *   a view's `hasToken` says whether the server holds one for that name.
 */
import type { ExtensionRegistry } from "../../agent/extensions/registry.ts";
import type { AgentHarness } from "../../agent/harness.ts";
import { SETTINGS_CONVERSATION } from "../../agent/models/keys.ts";
import { type AgentState, agentDoc, DOC } from "../../agent/records.ts";
import { HarnessError } from "../../core/errors.ts";
import type { ConversationId, Json } from "../../core/types.ts";
import type { McpApi, McpServerChange, McpServerDraft, McpServerView } from "../../protocol/index.ts";
import { loadedConversations, namesExtension, withoutExtension } from "../user-tools/store.ts";
import { connectMcp, type McpLimits, type McpSkippedTool, type McpToolRecord } from "./client.ts";
import { isMcpExtension, mcpExtension, mcpExtensionName, mcpToolName } from "./tool.ts";

export const MCP_SERVERS_DOC = "app.mcpServers";
const SERVER_NAME = /^[a-z0-9][a-z0-9-]{0,23}$/;
const TOKEN = /^[\x21-\x7e]{1,4096}$/;
const MAX_URL = 2000;
export const MAX_MCP_SERVERS = 16;

/** A server as stored. */
export interface McpServerRecord {
  readonly name: string;
  readonly url: string;
  readonly token?: string;
  readonly tools: McpToolRecord[];
  readonly skipped?: McpSkippedTool[];
  readonly listedAt: number;
  /** The last refresh failed: when, and what happened (the cached tools stay offered). */
  readonly problem?: { readonly at: number; readonly message: string };
}

interface Stored {
  servers: McpServerRecord[];
}

/** A server setting refused where it enters: what is wrong, in words (never with the token). */
export class McpServerInvalid extends HarnessError {
  override readonly name = "McpServerInvalid";
  constructor(message: string) {
    super("mcp_server_invalid", message);
  }
}

type DocReader = (conversationId: ConversationId, name: string) => Json | undefined;

const readStored = (read: (name: string) => unknown): McpServerRecord[] =>
  ((read(MCP_SERVERS_DOC) as Stored | undefined)?.servers ?? []).slice();

export function storedMcpServers(h: Pick<AgentHarness, "docNow">): McpServerRecord[] {
  return readStored((name) => h.docNow(SETTINGS_CONVERSATION, name));
}

/** The saved tokens, for redacting them from whatever leaves the engine. */
export function mcpSecrets(doc: DocReader): string[] {
  return readStored((name) => doc(SETTINGS_CONVERSATION, name)).flatMap((s) => (s.token ? [s.token] : []));
}

/** A draft checked: name, address, token (undefined when none). */
export function checkMcpDraft(draft: unknown): { name: string; url: string; token?: string } {
  const d = (typeof draft === "object" && draft !== null ? draft : {}) as Record<string, unknown>;
  const name = typeof d["name"] === "string" ? d["name"].trim() : "";
  if (!SERVER_NAME.test(name))
    throw new McpServerInvalid(
      "the name is 1-24 lowercase letters, digits or - (the model sees it before each tool's name)",
    );
  const text = typeof d["url"] === "string" ? d["url"].trim() : "";
  if (!text) throw new McpServerInvalid("enter the server's address (https://…)");
  if (text.length > MAX_URL) throw new McpServerInvalid(`the address is longer than ${MAX_URL} characters`);
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new McpServerInvalid("the address is not a URL (it starts with https:// or http://)");
  }
  if (url.protocol !== "https:" && url.protocol !== "http:")
    throw new McpServerInvalid("the address starts with https:// or http://");
  if (url.username || url.password)
    throw new McpServerInvalid("the address carries no user name or password: a token goes in its own field");
  if (url.hash) throw new McpServerInvalid("the address has no # part");
  const raw = d["token"];
  if (raw !== undefined && raw !== null && typeof raw !== "string")
    throw new McpServerInvalid("the token is text");
  const token = typeof raw === "string" ? raw.trim() : "";
  if (token && !TOKEN.test(token))
    throw new McpServerInvalid("the token is at most 4,096 visible characters, without spaces");
  return { name, url: url.toString(), ...(token ? { token } : {}) };
}

/** What the settings show of a server: never its token. */
export function mcpServerView(record: McpServerRecord, options: McpStoreOptions = {}): McpServerView {
  return {
    name: record.name,
    url: record.url,
    hasToken: Boolean(options.secretToken ? options.secretToken(record.name) : record.token),
    tools: record.tools.map((t) => ({
      name: mcpToolName(record.name, t.name),
      tool: t.name,
      description: t.description,
      replaySafe: t.readOnlyHint === true || t.idempotentHint === true,
    })),
    skipped: (record.skipped ?? []).map((s) => ({ ...s })),
    listedAt: record.listedAt,
    ...(record.problem ? { problem: record.problem.message, problemAt: record.problem.at } : {}),
  };
}

export interface McpStoreOptions {
  readonly limits?: Partial<McpLimits>;
  readonly fetch?: typeof fetch;
  /**
   * A server space's: the token of server `name` from the server's own secrets. Given, no token is
   * taken from a draft or stored; each list and call reads it here.
   */
  readonly secretToken?: (name: string) => string | undefined;
}

/** The name of the environment variable holding server `name`'s token on a server space. */
export const mcpTokenVariable = (name: string): string =>
  `MCP_${name.toUpperCase().replace(/[^A-Z0-9]/g, "_")}_TOKEN`;

/** The address and token a list or a call uses for `server` (the token from the secrets on a space). */
function targetOf(
  server: { name: string; url: string; token?: string },
  options: McpStoreOptions,
): { name: string; url: string; token?: string } {
  const token = options.secretToken ? options.secretToken(server.name) : server.token;
  return { name: server.name, url: server.url, ...(token ? { token } : {}) };
}

/** What each installed server extension was built from (to reinstall only on a change). */
const built = new WeakMap<object, string>();

/** Make the registry hold exactly the stored servers, each with its cached tools. */
export function syncMcpServers(
  h: AgentHarness,
  options: McpStoreOptions = {},
  registry: ExtensionRegistry = h.extensions,
): McpServerRecord[] {
  const stored = storedMcpServers(h);
  const wanted = new Map(stored.map((s) => [mcpExtensionName(s.name), s]));
  for (const e of registry.snapshot().installed())
    if (isMcpExtension(e.name) && !wanted.has(e.name)) registry.uninstall(e.name);
  for (const [name, server] of wanted) {
    const key = JSON.stringify(server.tools);
    const installed = registry.snapshot().extension(name);
    if (installed && built.get(installed) === key) continue;
    const extension = mcpExtension(server.name, server.tools, {
      target: () => {
        const now = storedMcpServers(h).find((s) => s.name === server.name);
        return now ? targetOf(now, options) : undefined;
      },
      ...(options.limits ? { limits: options.limits } : {}),
      ...(options.fetch ? { fetch: options.fetch } : {}),
    });
    built.set(extension, key);
    try {
      registry.install(extension);
    } catch (error) {
      h.services.report(error);
    }
  }
  return stored;
}

/** Load the stored servers' cached tools into the registry (before the engine resumes its tasks). */
export async function installStoredMcpServers(h: AgentHarness, options: McpStoreOptions = {}): Promise<void> {
  await h.doc(SETTINGS_CONVERSATION, MCP_SERVERS_DOC);
  syncMcpServers(h, options);
}

async function listTools(target: { name: string; url: string; token?: string }, options: McpStoreOptions) {
  const connection = await connectMcp(target, options);
  try {
    return await connection.listTools();
  } finally {
    await connection.close();
  }
}

/** Check a draft, ask the server for its tools, then store and install it. */
export async function addMcpServer(
  h: AgentHarness,
  draft: McpServerDraft,
  options: McpStoreOptions = {},
): Promise<McpServerView> {
  const checked = checkMcpDraft(draft);
  if (options.secretToken && checked.token !== undefined)
    throw new McpServerInvalid(
      `a server space takes no token from a browser: its tokens are the server's own secrets (set ${mcpTokenVariable(checked.name)} where the server runs)`,
    );
  const servers = storedMcpServers(h);
  if (servers.some((s) => s.name === checked.name))
    throw new McpServerInvalid(`a server named "${checked.name}" is already added`);
  if (servers.length >= MAX_MCP_SERVERS)
    throw new McpServerInvalid(`at most ${MAX_MCP_SERVERS} MCP servers can be added`);
  const taken = new Set(
    h.extensions
      .snapshot()
      .tools()
      .map((t) => t.tool.name),
  );
  const listed = await listTools(targetOf(checked, options), options);
  const clash = listed.tools.find((t) => taken.has(mcpToolName(checked.name, t.name)));
  if (clash)
    throw new McpServerInvalid(
      `another extension already offers a tool named ${mcpToolName(checked.name, clash.name)}: choose another name`,
    );
  const record = await h.transaction((tx) => {
    const now = readStored((name) => tx.readDoc(SETTINGS_CONVERSATION, name));
    if (now.some((s) => s.name === checked.name))
      throw new McpServerInvalid(`a server named "${checked.name}" is already added`);
    const added: McpServerRecord = {
      ...checked,
      tools: listed.tools,
      ...(listed.skipped.length ? { skipped: listed.skipped } : {}),
      listedAt: tx.now(),
    };
    tx.writeDoc(SETTINGS_CONVERSATION, MCP_SERVERS_DOC, { servers: [...now, added] } as unknown as Json);
    return added;
  });
  syncMcpServers(h, options);
  return mcpServerView(record, options);
}

/** A selection naming `after` wherever it named `before` (an exact list or an edit's add and remove). */
function renameExtension(
  selection: AgentState["extensions"],
  before: string,
  after: string,
): AgentState["extensions"] {
  const swap = (names: readonly string[]) => [...new Set(names.map((n) => (n === before ? after : n)))];
  if (selection === undefined) return undefined;
  if (Array.isArray(selection)) return swap(selection);
  return {
    ...(selection.add ? { add: swap(selection.add) } : {}),
    ...(selection.remove ? { remove: swap(selection.remove) } : {}),
  };
}

/**
 * Change a stored server's name, address or token (absent: kept; a token `null`: removed). The
 * changed setting is checked as a new one is, the server must answer with its tools at its (new)
 * address with its (new) token, and then one commit stores it, with the list it gave, and renames
 * `mcp:<old>` to `mcp:<new>` in every conversation's selection. Nothing is written when it is
 * refused or does not answer. On a server space a change that carries a token is refused.
 */
export async function updateMcpServer(
  h: AgentHarness,
  name: string,
  change: McpServerChange,
  options: McpStoreOptions = {},
): Promise<McpServerView> {
  if (typeof name !== "string") throw new TypeError("changing an MCP server needs its name");
  if (typeof change !== "object" || change === null)
    throw new TypeError("changing an MCP server needs a change");
  const old = storedMcpServers(h).find((s) => s.name === name);
  if (!old) throw new McpServerInvalid(`no MCP server named "${name}" is added`);
  if (options.secretToken && change.token !== undefined && change.token !== null)
    throw new McpServerInvalid(
      `a server space takes no token from a browser: its tokens are the server's own secrets (set ${mcpTokenVariable(change.name ?? name)} where the server runs)`,
    );
  const token = change.token === undefined ? (old.token ?? null) : change.token;
  const checked = checkMcpDraft({ name: change.name ?? old.name, url: change.url ?? old.url, token });
  const renamed = checked.name !== name;
  if (renamed && storedMcpServers(h).some((s) => s.name === checked.name))
    throw new McpServerInvalid(`a server named "${checked.name}" is already added`);
  const listed = await listTools(targetOf(checked, options), options);
  const before = mcpExtensionName(name);
  const after = mcpExtensionName(checked.name);
  const taken = new Set(
    h.extensions
      .snapshot()
      .tools()
      .filter((t) => t.extension !== before)
      .map((t) => t.tool.name),
  );
  const clash = listed.tools.find((t) => taken.has(mcpToolName(checked.name, t.name)));
  if (clash)
    throw new McpServerInvalid(
      `another extension already offers a tool named ${mcpToolName(checked.name, clash.name)}: choose another name`,
    );
  // A rename moves the server's extension in every conversation that names it.
  const naming = renamed
    ? [...(await h.docsNamed(DOC.agent))].filter(([, a]) => namesExtension(a, before))
    : [];
  await Promise.all(naming.map(([c]) => h.doc(c, DOC.agent)));
  const record = await h.transaction((tx) => {
    const now = readStored((doc) => tx.readDoc(SETTINGS_CONVERSATION, doc));
    const at = now.findIndex((s) => s.name === name);
    if (at < 0) throw new McpServerInvalid(`no MCP server named "${name}" is added`);
    if (renamed && now.some((s) => s.name === checked.name))
      throw new McpServerInvalid(`a server named "${checked.name}" is already added`);
    const next: McpServerRecord = {
      ...checked,
      tools: listed.tools,
      ...(listed.skipped.length ? { skipped: listed.skipped } : {}),
      listedAt: tx.now(),
    };
    now[at] = next;
    tx.writeDoc(SETTINGS_CONVERSATION, MCP_SERVERS_DOC, { servers: now } as unknown as Json);
    if (renamed)
      for (const c of loadedConversations(h, tx)) {
        if (!namesExtension(tx.readDoc(c, DOC.agent), before)) continue;
        const agent = agentDoc.read(tx, c);
        const extensions = renameExtension(agent.extensions, before, after);
        agentDoc.write(tx, c, extensions === undefined ? agent : { ...agent, extensions });
      }
    return next;
  });
  syncMcpServers(h, options);
  return mcpServerView(record, options);
}

/**
 * Ask a stored server for its tools again: the new list replaces the cached one; a server that does
 * not answer keeps its cached tools and the problem is stored and shown in words.
 */
export async function refreshMcpServer(
  h: AgentHarness,
  name: string,
  options: McpStoreOptions = {},
): Promise<McpServerView> {
  const server = storedMcpServers(h).find((s) => s.name === name);
  if (!server) throw new McpServerInvalid(`no MCP server named "${name}" is added`);
  let outcome: { tools: McpToolRecord[]; skipped: McpSkippedTool[] } | { problem: string };
  try {
    outcome = await listTools(targetOf(server, options), options);
  } catch (error) {
    if (!(error instanceof HarnessError)) throw error;
    outcome = { problem: error.message };
  }
  const record = await h.transaction((tx) => {
    const now = readStored((doc) => tx.readDoc(SETTINGS_CONVERSATION, doc));
    const at = now.findIndex((s) => s.name === name);
    if (at < 0) throw new McpServerInvalid(`no MCP server named "${name}" is added`);
    const { problem: _, skipped: _s, ...kept } = now[at]!;
    const next: McpServerRecord =
      "problem" in outcome
        ? { ...now[at]!, problem: { at: tx.now(), message: outcome.problem } }
        : {
            ...kept,
            tools: outcome.tools,
            ...(outcome.skipped.length ? { skipped: outcome.skipped } : {}),
            listedAt: tx.now(),
          };
    now[at] = next;
    tx.writeDoc(SETTINGS_CONVERSATION, MCP_SERVERS_DOC, { servers: now } as unknown as Json);
    return next;
  });
  syncMcpServers(h, options);
  return mcpServerView(record, options);
}

/** Remove a server and uninstall its tools; no conversation's selection keeps naming it. */
export async function removeMcpServer(
  h: AgentHarness,
  name: string,
  options: McpStoreOptions = {},
): Promise<void> {
  if (typeof name !== "string") throw new TypeError("removing an MCP server needs its name");
  const own = mcpExtensionName(name);
  const naming = [...(await h.docsNamed(DOC.agent))].filter(([, agent]) => namesExtension(agent, own));
  await Promise.all(naming.map(([c]) => h.doc(c, DOC.agent)));
  await h.transaction((tx) => {
    const servers = readStored((doc) => tx.readDoc(SETTINGS_CONVERSATION, doc));
    const kept = servers.filter((s) => s.name !== name);
    if (kept.length !== servers.length)
      tx.writeDoc(SETTINGS_CONVERSATION, MCP_SERVERS_DOC, { servers: kept } as unknown as Json);
    for (const c of loadedConversations(h, tx)) {
      if (!namesExtension(tx.readDoc(c, DOC.agent), own)) continue;
      const { extensions, ...agent } = agentDoc.read(tx, c);
      const next = withoutExtension(extensions, own);
      agentDoc.write(tx, c, next === undefined ? agent : { ...agent, extensions: next });
    }
  });
  syncMcpServers(h, options);
}

/** The `mcp` group of the engine API over harness `h`. */
export function mcpApi(h: () => Promise<AgentHarness>, options: McpStoreOptions = {}): McpApi {
  return {
    async list() {
      const harness = await h();
      await harness.doc(SETTINGS_CONVERSATION, MCP_SERVERS_DOC);
      return storedMcpServers(harness).map((record) => mcpServerView(record, options));
    },
    async add(draft) {
      return addMcpServer(await h(), draft, options);
    },
    async update(name, change) {
      return updateMcpServer(await h(), name, change, options);
    },
    async refresh(name) {
      return refreshMcpServer(await h(), name, options);
    },
    async remove(name) {
      await removeMcpServer(await h(), name, options);
    },
  };
}
