/**
 * The app's side of user tools and per-conversation extensions (issue 14 item 6), for the engine
 * host: drafts from the settings (parameters as JSON text) become checked sources; a conversation's
 * extensions are toggled through its pi.agent `extensions` selection (names only, never code); an
 * export carries the user tools its conversation selects and an import adds the ones the store
 * lacks, in the import's commit, after checking every carried body in the sandbox. A tool that
 * arrives by import is opt-in (importing someone's file must not add code to every conversation):
 * the import selects it in the imported conversation alone (pi.agent `extensions`, names only), and
 * the user enables it elsewhere per conversation or everywhere (which clears the mark). Selections
 * are read against the engine's default base (settings.extensions, which leaves opt-in tools out).
 */

import type { AgentHarness } from "../agent/harness.ts";
import { agentDoc } from "../agent/records.ts";
import type { Tx } from "../core/define.ts";
import type { ConversationId, Json } from "../core/types.ts";
import type { ExtensionChoice, UserToolDraft, UserToolView } from "../protocol/index.ts";
import { isMcpExtension, MCP_EXTENSION_PREFIX } from "./mcp/tool.ts";
import { ImportRefused, importConversation, parseExport } from "./transfer.ts";
import {
  addCarriedTools,
  checkCarriedTools,
  removeUserTool,
  saveUserTool,
  syncUserTools,
  type UserToolStatus,
  userToolSources,
  userToolStatuses,
} from "./user-tools/store.ts";
import {
  checkUserToolBody,
  isUserExtension,
  USER_EXTENSION_PREFIX,
  UserToolInvalid,
  type UserToolSource,
  userExtensionName,
} from "./user-tools/tool.ts";

function viewOf(status: UserToolStatus): UserToolView {
  return {
    name: status.name,
    description: status.description,
    parameters: JSON.stringify(status.parameters, null, 2),
    body: status.body,
    version: status.version,
    savedAt: status.savedAt,
    ...(status.imported ? { imported: true as const } : {}),
    ...(status.activeVersion !== undefined ? { activeVersion: status.activeVersion } : {}),
  };
}

export function userToolViews(h: AgentHarness): UserToolView[] {
  return userToolStatuses(h).map(viewOf);
}

/** A draft from the settings: its parameters parsed (invalid JSON is refused like a bad schema). */
export async function saveUserToolDraft(h: AgentHarness, draft: UserToolDraft): Promise<UserToolView> {
  if (typeof draft !== "object" || draft === null) throw new TypeError("saveUserTool needs a draft");
  let parameters: unknown;
  try {
    parameters = JSON.parse(typeof draft.parameters === "string" ? draft.parameters : "");
  } catch (error) {
    throw new UserToolInvalid("invalid_schema", `the parameters are not JSON: ${(error as Error).message}`);
  }
  return viewOf(
    await saveUserTool(h, {
      name: draft.name,
      description: draft.description,
      parameters,
      body: draft.body,
    }),
  );
}

export async function deleteUserTool(h: AgentHarness, name: string): Promise<void> {
  await removeUserTool(h, name);
}

/** The names of the default selection's base: settings.extensions, else every installed extension. */
function baseNames(h: AgentHarness): readonly string[] {
  return (
    h.services.settings().extensions ??
    h.extensions
      .snapshot()
      .installed()
      .map((e) => e.name)
  );
}

export async function conversationExtensions(
  h: AgentHarness,
  conversationId: ConversationId,
): Promise<ExtensionChoice[]> {
  // UIs re-resolve through Conversation.agent() (spec §7.1): its extensions are the selection now.
  const selected = new Set((await (await h.requireLoadedConversation(conversationId)).agent()).extensions);
  const snapshot = h.extensions.snapshot();
  const imported = new Set(
    userToolStatuses(h)
      .filter((t) => t.imported)
      .map((t) => userExtensionName(t.name)),
  );
  return snapshot.installed().map((e) => ({
    name: e.name,
    user: isUserExtension(e.name),
    ...(isMcpExtension(e.name) ? { mcp: e.name.slice(MCP_EXTENSION_PREFIX.length) } : {}),
    tools: (e.tools ?? []).map((t) => t.name),
    enabled: selected.has(e.name),
    ...(imported.has(e.name) ? { imported: true as const } : {}),
  }));
}

/**
 * Select or drop one extension: an exact list gains or loses the name; otherwise (the default base)
 * a name of the base leaves or joins `remove`, and one outside it (an imported tool) joins or
 * leaves `add`.
 */
export async function setExtensionEnabled(
  h: AgentHarness,
  conversationId: ConversationId,
  name: string,
  enabled: boolean,
): Promise<void> {
  if (typeof name !== "string" || name === "") throw new TypeError("name an extension");
  if (typeof enabled !== "boolean") throw new TypeError("enabled must be true or false");
  if (enabled && !h.extensions.snapshot().extension(name))
    throw new TypeError(`no extension named ${JSON.stringify(name)} is installed`);
  const conversation = await h.requireLoadedConversation(conversationId);
  const current = (await conversation.agentState()).extensions;
  let next: string[] | { add?: string[]; remove?: string[] } | null;
  if (Array.isArray(current)) {
    const kept = current.filter((n) => n !== name);
    next = enabled ? [...kept, name] : kept;
  } else {
    const add = (current?.add ?? []).filter((n) => n !== name);
    const remove = (current?.remove ?? []).filter((n) => n !== name);
    const inBase = baseNames(h).includes(name);
    if (enabled && !inBase) add.push(name);
    if (!enabled && inBase) remove.push(name);
    next =
      add.length === 0 && remove.length === 0
        ? null
        : { ...(add.length ? { add } : {}), ...(remove.length ? { remove } : {}) };
  }
  await conversation.configure({ extensions: next });
}

/** The user tools a conversation selects, as an export carries them. */
export async function exportedUserTools(h: AgentHarness, conversationId: ConversationId): Promise<Json[]> {
  const names = (await (await h.requireLoadedConversation(conversationId)).agent()).extensions
    .filter(isUserExtension)
    .map((name) => name.slice(USER_EXTENSION_PREFIX.length));
  return userToolSources(h, names) as unknown as Json[];
}

/**
 * Inside a commit: make a conversation's pi.agent select `names` (an exact list gains the missing
 * ones at its end; otherwise they join `add` and leave `remove`).
 */
function selectIn(tx: Tx, conversationId: ConversationId, names: readonly string[]): void {
  const agent = agentDoc.read(tx, conversationId);
  const current = agent.extensions;
  let next: string[] | { add?: string[]; remove?: string[] };
  if (Array.isArray(current)) next = [...current, ...names.filter((n) => !current.includes(n))];
  else {
    const add = [...(current?.add ?? [])];
    for (const n of names) if (!add.includes(n)) add.push(n);
    const remove = (current?.remove ?? []).filter((n) => !names.includes(n));
    next = { add, ...(remove.length ? { remove } : {}) };
  }
  if (JSON.stringify(next) === JSON.stringify(current)) return;
  agentDoc.write(tx, conversationId, { ...agent, extensions: next });
}

/**
 * Import a conversation file with the user tools it carries: each carried body compiles in the
 * sandbox and no carried name is a tool of another (non-user) extension, or nothing is written.
 * `also` runs last in the importing commit (the host's own writes).
 */
export async function importWithUserTools(
  h: AgentHarness,
  text: string,
  options: { documents: readonly string[]; also?: (tx: Tx, conversationId: ConversationId) => void },
): Promise<ConversationId> {
  let carried: UserToolSource[] = [];
  const file = parseExport(text, {
    documents: options.documents,
    userTools: (value) => {
      carried = checkCarriedTools(value);
    },
  });
  // No carried name may be a tool of another extension: checked before the bodies compile (an
  // await) and again in the importing commit, in case an extension took a name meanwhile.
  const checkNames = () => {
    for (const tool of carried) {
      const own = userExtensionName(tool.name);
      const other = h.extensions
        .snapshot()
        .tools()
        .find((t) => t.tool.name === tool.name && t.extension !== own);
      if (other)
        throw new ImportRefused(`its user tool ${tool.name} has the name of a tool of ${other.extension}`);
    }
  };
  checkNames();
  for (const tool of carried) {
    try {
      await checkUserToolBody(tool.body);
    } catch (error) {
      throw new ImportRefused(`its user tool ${tool.name} is invalid: ${(error as Error).message}`);
    }
  }
  const id = await importConversation(h, file, {
    also: (tx, conversationId) => {
      checkNames();
      const names = addCarriedTools(tx, carried).map(userExtensionName);
      if (names.length > 0) selectIn(tx, conversationId, names);
      options.also?.(tx, conversationId);
    },
  });
  syncUserTools(h);
  return id;
}
