/**
 * Where user tools live (issue 14 item 6): one document, `app.userTools`, of the store's settings
 * conversation (conversation 0: never listed; its API keys never exported), and their installation
 * in the engine's extension registry. Invariants:
 * - a save checks the whole source first (shape, then the body compiled in the sandbox, then the name
 *   against every other installed extension's tools) and stores nothing when it is refused;
 * - each save of a name bumps its version by one; the registry then holds exactly the stored tools,
 *   each as `user:<name>` (a replacement keeps its install position: hot reload, spec §7.5);
 * - an import adds the tools it carries that the store lacks, marked `imported`; a stored tool of the
 *   same name is never overwritten by a file;
 * - an imported tool is opt-in: the default selection's base (`defaultExtensionBase`, the engine's
 *   settings.extensions) leaves it out, so only the conversations that name it in their pi.agent get
 *   it, until the user enables it everywhere (`enableUserToolEverywhere` clears the mark); a save of
 *   a new version keeps the mark;
 * - a removal, in its commit, drops `user:<name>` from every conversation's pi.agent selection, so
 *   no conversation's choice carries over to a later, different tool of that name.
 */

import type { ExtensionRegistry, RegistrySnapshot } from "../../agent/extensions/registry.ts";
import type { AgentHarness } from "../../agent/harness.ts";
import { SETTINGS_CONVERSATION } from "../../agent/models/keys.ts";
import { type AgentState, agentDoc, DOC } from "../../agent/records.ts";
import type { AgentSettings } from "../../agent/services.ts";
import type { Tx } from "../../core/define.ts";
import type { ConversationId, Json } from "../../core/types.ts";
import {
  checkUserToolBody,
  checkUserToolShape,
  isUserExtension,
  UserToolInvalid,
  type UserToolRecord,
  type UserToolSource,
  userExtensionName,
  userToolExtension,
  userToolOf,
} from "./tool.ts";

export const USER_TOOLS_DOC = "app.userTools";

interface Stored {
  tools: UserToolRecord[];
}

/** A stored tool with what the engine runs now. */
export interface UserToolStatus extends UserToolRecord {
  /** The version the registry holds (undefined when it holds none). */
  readonly activeVersion?: number;
}

const readStored = (read: (name: string) => unknown): UserToolRecord[] =>
  ((read(USER_TOOLS_DOC) as Stored | undefined)?.tools ?? []).slice();

/** The stored user tools, in save order (the settings conversation's documents must be loaded). */
export function storedUserTools(h: AgentHarness): UserToolRecord[] {
  return readStored((name) => h.docNow(SETTINGS_CONVERSATION, name));
}

/** Make the registry hold exactly the stored tools; returns the stored list. */
export function syncUserTools(h: AgentHarness, registry: ExtensionRegistry = h.extensions): UserToolRecord[] {
  const stored = storedUserTools(h);
  const wanted = new Map(stored.map((r) => [userExtensionName(r.name), r]));
  for (const e of registry.snapshot().installed())
    if (isUserExtension(e.name) && !wanted.has(e.name)) registry.uninstall(e.name);
  for (const [name, record] of wanted) {
    const installed = userToolOf(registry.snapshot().extension(name));
    if (installed?.version === record.version && installed.body === record.body) continue;
    try {
      registry.install(userToolExtension(record));
    } catch (error) {
      h.services.report(error);
    }
  }
  return stored;
}

/** Load the stored tools into the registry (before the engine resumes its tasks; `userToolSettings` reads them after). */
export async function installStoredUserTools(h: AgentHarness): Promise<void> {
  await h.doc(SETTINGS_CONVERSATION, USER_TOOLS_DOC);
  syncUserTools(h);
}

/** Every stored tool with the version the registry runs. */
export function userToolStatuses(h: AgentHarness): UserToolStatus[] {
  const snapshot = h.extensions.snapshot();
  return storedUserTools(h).map((r) => {
    const active = userToolOf(snapshot.extension(userExtensionName(r.name)));
    return active ? { ...r, activeVersion: active.version } : { ...r };
  });
}

/** Throws UserToolInvalid when another installed extension already offers a tool of that name. */
function checkNameFree(h: AgentHarness, name: string): void {
  const own = userExtensionName(name);
  for (const { extension, tool } of h.extensions.snapshot().tools())
    if (tool.name === name && extension !== own)
      throw new UserToolInvalid(
        "name_taken",
        `a tool named ${name} already exists (from ${extension}); choose another name`,
      );
}

/** Check and store a tool (a new one, or the next version of one), then install it. */
export async function saveUserTool(h: AgentHarness, source: unknown): Promise<UserToolStatus> {
  const checked: UserToolSource = checkUserToolShape(source);
  checkNameFree(h, checked.name);
  await checkUserToolBody(checked.body);
  const saved = await h.transaction((tx) => {
    // Again in the commit: another extension may have taken the name while the body compiled.
    checkNameFree(h, checked.name);
    const tools = readStored((name) => tx.readDoc(SETTINGS_CONVERSATION, name));
    const at = tools.findIndex((t) => t.name === checked.name);
    const record: UserToolRecord = {
      name: checked.name,
      description: checked.description,
      parameters: checked.parameters,
      body: checked.body,
      version: (tools[at]?.version ?? 0) + 1,
      savedAt: tx.now(),
      ...(tools[at]?.imported ? { imported: true as const } : {}),
    };
    if (at >= 0) tools[at] = record;
    else tools.push(record);
    tx.writeDoc(SETTINGS_CONVERSATION, USER_TOOLS_DOC, { tools } as unknown as Json);
    return record;
  });
  syncUserTools(h);
  return userToolStatuses(h).find((t) => t.name === saved.name) ?? saved;
}

/**
 * The default selection's base (settings.extensions, spec §7.1) of an engine with user tools: every
 * installed extension in install order but the imported tools not enabled everywhere.
 */
export function defaultExtensionBase(h: AgentHarness): string[] {
  const optIn = new Set(
    storedUserTools(h)
      .filter((r) => r.imported)
      .map((r) => userExtensionName(r.name)),
  );
  return h.extensions
    .snapshot()
    .installed()
    .map((e) => e.name)
    .filter((n) => !optIn.has(n));
}

/**
 * The settings of an engine with user tools, read at each resolution (every phase): the default
 * selection's base is `defaultExtensionBase` once `harness()` gives the harness with its stored tools
 * installed (before, nothing resolves: the harness is opened paused). The base is kept and handed out
 * again until what it is built from changes: the registry's snapshot (a new one at each install or
 * uninstall) or the stored user tools' document (a new value at each commit that writes it: a save,
 * an import, enabling one everywhere, a removal).
 */
export function userToolSettings(harness: () => AgentHarness | undefined): () => AgentSettings {
  let kept:
    | { h: AgentHarness; snapshot: RegistrySnapshot; stored: unknown; settings: AgentSettings }
    | undefined;
  return () => {
    const h = harness();
    if (!h) return {};
    const snapshot = h.extensions.snapshot();
    const stored = h.docNow(SETTINGS_CONVERSATION, USER_TOOLS_DOC);
    if (kept?.h !== h || kept.snapshot !== snapshot || kept.stored !== stored)
      kept = { h, snapshot, stored, settings: { extensions: defaultExtensionBase(h) } };
    return kept.settings;
  };
}

/** Clear an imported tool's mark: every conversation that does not drop it gets it from now on. */
export async function enableUserToolEverywhere(h: AgentHarness, name: string): Promise<void> {
  if (typeof name !== "string") throw new TypeError("enableUserToolEverywhere needs a tool name");
  await h.transaction((tx) => {
    const tools = readStored((doc) => tx.readDoc(SETTINGS_CONVERSATION, doc));
    const at = tools.findIndex((t) => t.name === name);
    if (at < 0) throw new TypeError(`no user tool named ${JSON.stringify(name)} is stored`);
    const { imported: _, ...trusted } = tools[at]!;
    if (!tools[at]!.imported) return;
    tools[at] = trusted;
    tx.writeDoc(SETTINGS_CONVERSATION, USER_TOOLS_DOC, { tools } as unknown as Json);
  });
}

/**
 * Remove a stored tool and uninstall it; in the same commit every conversation's pi.agent stops
 * naming `user:<name>` (in an exact list, `add` or `remove`), so a later, different tool of that name
 * is never taken for the one a conversation chose or dropped.
 */
export async function removeUserTool(h: AgentHarness, name: string): Promise<void> {
  if (typeof name !== "string") throw new TypeError("removeUserTool needs a tool name");
  const own = userExtensionName(name);
  // Load the documents of the conversations whose committed pi.agent names it: the commit then finds
  // them, and every other one that may name it by then, among the conversations loaded.
  const naming = [...(await h.docsNamed(DOC.agent))].filter(([, agent]) => namesExtension(agent, own));
  await Promise.all(naming.map(([c]) => h.doc(c, DOC.agent)));
  await h.transaction((tx) => {
    const tools = readStored((doc) => tx.readDoc(SETTINGS_CONVERSATION, doc));
    const kept = tools.filter((t) => t.name !== name);
    if (kept.length !== tools.length)
      tx.writeDoc(SETTINGS_CONVERSATION, USER_TOOLS_DOC, { tools: kept } as unknown as Json);
    for (const c of loadedConversations(h, tx)) {
      if (!namesExtension(tx.readDoc(c, DOC.agent), own)) continue;
      const { extensions, ...agent } = agentDoc.read(tx, c);
      const next = withoutExtension(extensions, own);
      agentDoc.write(tx, c, next === undefined ? agent : { ...agent, extensions: next });
    }
  });
  syncUserTools(h);
}

/** Whether a stored pi.agent value's extension selection names `extension`. */
export function namesExtension(agent: Json | undefined, extension: string): boolean {
  const selection = (agent as AgentState | undefined)?.extensions;
  if (selection === undefined) return false;
  const names = Array.isArray(selection)
    ? selection
    : [...(selection.add ?? []), ...(selection.remove ?? [])];
  return names.includes(extension);
}

/** A selection without `extension`: an exact list keeps its other names; an emptied edit is undefined. */
export function withoutExtension(
  selection: AgentState["extensions"],
  extension: string,
): AgentState["extensions"] {
  if (selection === undefined) return undefined;
  if (Array.isArray(selection)) return selection.filter((n) => n !== extension);
  const add = (selection.add ?? []).filter((n) => n !== extension);
  const remove = (selection.remove ?? []).filter((n) => n !== extension);
  if (add.length === 0 && remove.length === 0) return undefined;
  return { ...(add.length ? { add } : {}), ...(remove.length ? { remove } : {}) };
}

/**
 * Inside a commit: the conversations whose documents are in memory, those created earlier in the
 * commit's group included (numbered past the published ones). A pi.agent is written only once its
 * conversation's documents are loaded, and loaded documents stay: any other conversation's pi.agent is
 * still as the store held it before.
 */
export function loadedConversations(h: AgentHarness, tx: Tx): ConversationId[] {
  const published = h.conversationRecords().map((r) => r.id);
  const loaded = published.filter((c) => h.docsLoaded(c) && tx.conversation(c));
  const newest = published.reduce((max, c) => Math.max(max, c), 0);
  for (let c = newest + 1; tx.conversation(c); c++) loaded.push(c);
  return loaded;
}

/** The sources of the stored tools among `names` (what an export carries: no version, no time). */
export function userToolSources(h: AgentHarness, names: readonly string[]): UserToolSource[] {
  const wanted = new Set(names);
  return storedUserTools(h)
    .filter((r) => wanted.has(r.name))
    .map(({ name, description, parameters, body }) => ({ name, description, parameters, body }));
}

/** Check the tools an export file carries (shape only; bodies compile when they are first saved). */
export function checkCarriedTools(value: unknown): UserToolSource[] {
  if (!Array.isArray(value)) throw new UserToolInvalid("invalid_name", "its user tools are not a list");
  const names = new Set<string>();
  return value.map((t) => {
    const checked = checkUserToolShape(t);
    if (names.has(checked.name))
      throw new UserToolInvalid("name_taken", `it carries two user tools named ${checked.name}`);
    names.add(checked.name);
    return checked;
  });
}

/**
 * Inside an import's commit: store the carried tools the store lacks (version 1, marked `imported`:
 * opt-in); a stored tool of the same name is kept. Returns the names whose stored code is now the
 * carried code (added, or stored already with the same body): the ones the imported conversation
 * may select. Call `syncUserTools` after the commit.
 */
export function addCarriedTools(tx: Tx, carried: readonly UserToolSource[]): string[] {
  const tools = readStored((doc) => tx.readDoc(SETTINGS_CONVERSATION, doc));
  const same: string[] = [];
  let added = false;
  for (const source of carried) {
    const stored = tools.find((t) => t.name === source.name);
    if (stored) {
      if (stored.body === source.body) same.push(source.name);
      continue;
    }
    tools.push({ ...source, version: 1, savedAt: tx.now(), imported: true });
    same.push(source.name);
    added = true;
  }
  if (added) tx.writeDoc(SETTINGS_CONVERSATION, USER_TOOLS_DOC, { tools } as unknown as Json);
  return same;
}
