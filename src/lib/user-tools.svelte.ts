/**
 * The state of the settings' "Your tools" and "Extensions" sections: the user tools the engine keeps
 * (with the version it runs), a draft being edited, and which extensions the open conversation
 * selects. The tab never evaluates a tool's code: it sends the text, and the engine checks it in its
 * sandbox and answers with the stored version or the reason it refused. A tool that came with an
 * imported conversation is opt-in (`imported`) until the user enables it everywhere.
 */
import {
  type EngineApi,
  type ExtensionChoice,
  errorMessage,
  type UserToolDraft,
  type UserToolView,
} from "../../worker/protocol/index.ts";

/** What the panel calls: the user tools, and a conversation's extensions (in `settings`). */
export type UserToolsApi = Pick<EngineApi, "userTools" | "settings">;

/** What a new tool's form starts with: a working example. */
export const EXAMPLE_DRAFT: UserToolDraft = {
  name: "greet",
  description: "Greets someone by name.",
  parameters: JSON.stringify(
    {
      type: "object",
      properties: { name: { type: "string", description: "who to greet" } },
      required: ["name"],
    },
    null,
    2,
  ),
  body: 'async (args, tools) => {\n  return "Hello, " + args.name + "!";\n}',
};

/** "version 3, active", or what is missing. */
export function reloadWords(tool: UserToolView): string {
  if (tool.activeVersion === tool.version) return `version ${tool.version}, active`;
  if (tool.activeVersion === undefined) return `version ${tool.version}, not active`;
  return `version ${tool.version} saved, version ${tool.activeVersion} active`;
}

/** An extension's name as the menu shows it. */
export function extensionLabel(choice: ExtensionChoice): string {
  if (choice.mcp !== undefined) return `${choice.mcp} (MCP server): ${choice.tools.join(", ") || "no tools"}`;
  if (!choice.user) return `${choice.name}: ${choice.tools.join(", ")}`;
  return `${choice.tools.join(", ")} (${choice.imported ? "imported tool" : "your tool"})`;
}

export class UserToolsState {
  tools = $state.raw<UserToolView[]>([]);
  extensions = $state.raw<ExtensionChoice[]>([]);
  draft = $state<UserToolDraft>({ ...EXAMPLE_DRAFT });
  /** The stored tool the draft edits (undefined: a new tool). */
  editing = $state<string | undefined>(undefined);
  note = $state("");
  error = $state("");
  saving = $state(false);

  constructor(
    readonly api: UserToolsApi,
    readonly conversationId: number,
  ) {}

  async load(): Promise<void> {
    await this.#run(async () => {
      const [tools, extensions] = await Promise.all([
        this.api.userTools.list(),
        this.api.settings.extensions(this.conversationId),
      ]);
      this.tools = tools;
      this.extensions = extensions;
      // The example's name is only offered while no stored tool has it.
      if (this.editing === undefined && tools.some((t) => t.name === this.draft.name))
        this.draft = { ...this.draft, name: "" };
    });
  }

  edit(tool: UserToolView): void {
    this.editing = tool.name;
    this.draft = {
      name: tool.name,
      description: tool.description,
      parameters: tool.parameters,
      body: tool.body,
    };
    this.note = "";
    this.error = "";
  }

  startNew(): void {
    this.editing = undefined;
    this.draft = {
      ...EXAMPLE_DRAFT,
      name: this.tools.some((t) => t.name === "greet") ? "" : EXAMPLE_DRAFT.name,
    };
    this.note = "";
    this.error = "";
  }

  async save(): Promise<boolean> {
    this.saving = true;
    try {
      return await this.#run(async () => {
        const saved = await this.api.userTools.save({ ...this.draft });
        this.editing = saved.name;
        this.tools = await this.api.userTools.list();
        this.extensions = await this.api.settings.extensions(this.conversationId);
        this.note = `Saved ${saved.name}: ${reloadWords(saved)}.`;
      });
    } finally {
      this.saving = false;
    }
  }

  async remove(name: string): Promise<void> {
    await this.#run(async () => {
      await this.api.userTools.remove(name);
      this.tools = await this.api.userTools.list();
      this.extensions = await this.api.settings.extensions(this.conversationId);
      if (this.editing === name) this.startNew();
      this.note = `Removed ${name}.`;
    });
  }

  /** Clear an imported tool's opt-in mark: every conversation that does not drop it uses it. */
  async enableEverywhere(name: string): Promise<void> {
    await this.#run(async () => {
      await this.api.userTools.enableEverywhere(name);
      this.tools = await this.api.userTools.list();
      this.extensions = await this.api.settings.extensions(this.conversationId);
      this.note = `Enabled ${name} in every conversation.`;
    });
  }

  async setEnabled(name: string, enabled: boolean): Promise<void> {
    await this.#run(async () => {
      await this.api.settings.setExtensionEnabled(this.conversationId, name, enabled);
      this.extensions = await this.api.settings.extensions(this.conversationId);
      this.note = `${enabled ? "Enabled" : "Disabled"} ${name} in this conversation.`;
    });
  }

  async #run(work: () => Promise<void>): Promise<boolean> {
    this.error = "";
    this.note = "";
    try {
      await work();
      return true;
    } catch (e) {
      this.error = errorMessage(e);
      return false;
    }
  }
}
