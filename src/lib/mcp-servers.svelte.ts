/**
 * The settings' "MCP servers" section state: the servers the engine keeps (each with its cached tool
 * list, the tools it skipped and why, and the last problem in words), a draft being added, one
 * server being edited (mcp-edit.ts: name, address, a new token or none), and add, edit, refresh and
 * remove through the engine's `mcp` group. A token draft is cleared once sent; nothing here keeps or
 * shows a saved token (the engine answers `hasToken` only).
 */
import { type EngineApi, errorMessage, type McpServerView } from "../../worker/protocol/index.ts";
import { editFormOf, type McpEditForm, mcpChange } from "./mcp-edit.ts";

export type McpServersApi = Pick<EngineApi, "mcp">;

/** "3 tools, listed 14:02" or what went wrong with the last refresh. */
export function serverWords(server: McpServerView, now = Date.now()): string {
  const count = `${server.tools.length} tool${server.tools.length === 1 ? "" : "s"}`;
  if (server.problem) return `Not answering: ${server.problem}. Its ${count} listed before stay offered.`;
  const minutes = Math.round((now - server.listedAt) / 60_000);
  const when =
    minutes < 1
      ? "just now"
      : minutes < 60
        ? `${minutes} min ago`
        : new Date(server.listedAt).toLocaleString();
  return `${count}, listed ${when}`;
}

export class McpServersState {
  servers = $state.raw<McpServerView[]>([]);
  name = $state("");
  url = $state("");
  token = $state("");
  note = $state("");
  error = $state("");
  busy = $state(false);
  /** The server being edited (its name as listed), and the edit form. */
  editing = $state<string | null>(null);
  edit = $state<McpEditForm>({ name: "", url: "", token: "", dropToken: false });

  /** `changed`: called after a server was added, refreshed or removed (the tools offered changed). */
  constructor(
    readonly api: McpServersApi,
    private readonly changed: () => void = () => undefined,
  ) {}

  async load(): Promise<void> {
    await this.#run(async () => {
      this.servers = await this.api.mcp.list();
    });
  }

  async add(): Promise<void> {
    if (!this.name.trim() || !this.url.trim()) {
      this.error = "Give the server a name and its address first.";
      return;
    }
    await this.#run(async () => {
      this.note = `Asking ${this.url.trim()} for its tools…`;
      const added = await this.api.mcp.add({
        name: this.name,
        url: this.url,
        token: this.token.trim() || null,
      });
      this.token = "";
      this.name = "";
      this.url = "";
      this.servers = await this.api.mcp.list();
      this.changed();
      this.note = `Added “${added.name}” with ${added.tools.length} tool${added.tools.length === 1 ? "" : "s"}.`;
    });
  }

  startEdit(server: McpServerView): void {
    this.editing = server.name;
    this.edit = editFormOf(server);
    this.error = "";
    this.note = "";
  }

  cancelEdit(): void {
    this.editing = null;
    this.edit = { name: "", url: "", token: "", dropToken: false };
  }

  /** Send the edit: only what changed (the token only when a new one is typed, or removed). */
  async saveEdit(): Promise<void> {
    const server = this.servers.find((s) => s.name === this.editing);
    if (!server) return this.cancelEdit();
    const change = mcpChange(server, this.edit);
    if (Object.keys(change).length === 0) return this.cancelEdit();
    await this.#run(async () => {
      this.note = `Asking ${change.url ?? server.url} for its tools…`;
      const view = await this.api.mcp.update(server.name, change);
      this.cancelEdit();
      this.servers = await this.api.mcp.list();
      this.changed();
      this.note = `Saved “${view.name}”: ${view.tools.length} tool${view.tools.length === 1 ? "" : "s"}.`;
    });
    // A refused change keeps the form as typed, but never the token.
    this.edit = { ...this.edit, token: "" };
  }

  async refresh(name: string): Promise<void> {
    await this.#run(async () => {
      const view = await this.api.mcp.refresh(name);
      this.servers = this.servers.map((s) => (s.name === name ? view : s));
      this.changed();
      this.note = view.problem ? "" : `“${name}” answered: ${view.tools.length} tools.`;
    });
  }

  async remove(name: string): Promise<void> {
    await this.#run(async () => {
      await this.api.mcp.remove(name);
      this.servers = await this.api.mcp.list();
      this.changed();
      this.note = `Removed “${name}” and its token.`;
    });
  }

  async #run(work: () => Promise<void>): Promise<void> {
    this.busy = true;
    this.error = "";
    try {
      await work();
    } catch (e) {
      this.note = "";
      const words = errorMessage(e);
      this.error = `${words.charAt(0).toUpperCase()}${words.slice(1)}.`;
    } finally {
      this.busy = false;
    }
  }
}
