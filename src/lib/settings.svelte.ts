/**
 * The settings panel's state: the model list (searched and grouped by provider), which providers have
 * a saved key, the open conversation's agent settings, and the demo model's speed. Keys go to the
 * engine and are never read back: the panel only knows a provider's name and whether a key is saved.
 */
import {
  type AgentSettingsView,
  type DemoSpeedName,
  type EngineApi,
  errorMessage,
  type KeyCheck,
  type ModelChoice,
  type ModelRef,
  type ThinkingLevel,
} from "../../worker/protocol/index.ts";
import { keyPhrase } from "./providers.ts";
import type { UserToolsApi } from "./user-tools.svelte.ts";

type Api = Pick<EngineApi, "settings" | "keys" | "approvals" | "mcp" | "usage"> & UserToolsApi;

/** At most this many models are listed for a search; the rest are counted. */
export const MAX_LISTED = 150;

export interface ModelGroup {
  readonly provider: string;
  readonly models: readonly ModelChoice[];
}

/** The models matching `query` (every word in provider, name or id), grouped by provider in list order. */
export function groupModels(
  models: readonly ModelChoice[],
  query: string,
  max = MAX_LISTED,
): { groups: ModelGroup[]; hidden: number } {
  const words = query.toLowerCase().split(/\s+/).filter(Boolean);
  const groups = new Map<string, ModelChoice[]>();
  let listed = 0;
  let hidden = 0;
  for (const m of models) {
    const text = `${m.provider} ${m.name} ${m.id}`.toLowerCase();
    if (!words.every((w) => text.includes(w))) continue;
    if (listed >= max) {
      hidden++;
      continue;
    }
    listed++;
    let group = groups.get(m.provider);
    if (!group) groups.set(m.provider, (group = []));
    group.push(m);
  }
  return { groups: [...groups].map(([provider, list]) => ({ provider, models: list })), hidden };
}

/** A listed model's key, "provider/id". */
export const modelKey = (m: { provider: string; id: string }) => `${m.provider}/${m.id}`;
/** The same key for a stored model reference. */
const refKey = (ref: ModelRef) => `${ref.provider}/${ref.modelId}`;

export class SettingsState {
  models = $state.raw<ModelChoice[]>([]);
  keys = $state.raw<string[]>([]);
  agent = $state.raw<AgentSettingsView>({});
  demoSpeed = $state<DemoSpeedName>("normal");
  /** The latest key check per provider, in words. */
  checks = $state.raw<Record<string, KeyCheck | "checking">>({});
  /** A short confirmation or error for the person, shown in a live region. */
  note = $state("");
  error = $state("");

  /** The model of conversations whose settings name none. */
  readonly defaultModel: string;
  /**
   * Where the open conversation runs: its settings are its home's (`api`). A server's conversation
   * calls models with the server's own keys, so the panel neither lists nor takes keys for it.
   */
  readonly home: "browser" | "server";

  constructor(
    readonly api: Api,
    readonly conversationId: number,
    options: { defaultModel?: string; home?: "browser" | "server" } = {},
  ) {
    this.defaultModel = options.defaultModel ?? "demo/demo-1";
    this.home = options.home ?? "browser";
  }

  get currentModel(): string {
    return this.agent.model ? refKey(this.agent.model) : this.defaultModel;
  }

  get current(): ModelChoice | undefined {
    const key = this.currentModel;
    return this.models.find((m) => modelKey(m) === key);
  }

  async load(): Promise<void> {
    await this.#run(async () => {
      const [models, keys, agent, speed] = await Promise.all([
        this.api.settings.models(),
        this.home === "browser" ? this.api.keys.list() : Promise.resolve([]),
        this.api.settings.agent(this.conversationId),
        this.api.settings.demoSpeed(),
      ]);
      this.models = models;
      this.keys = keys;
      this.agent = agent;
      this.demoSpeed = speed;
    });
  }

  async chooseModel(choice: ModelChoice): Promise<void> {
    await this.#run(async () => {
      await this.api.settings.setModel(this.conversationId, {
        provider: choice.provider,
        modelId: choice.id,
      });
      this.agent = await this.api.settings.agent(this.conversationId);
      this.note =
        choice.needsKey && !this.keys.includes(choice.provider)
          ? `Using ${choice.name}. It needs ${keyPhrase(choice.provider)}: add one below.`
          : `Using ${choice.name}.`;
    });
  }

  async saveKey(provider: string, key: string): Promise<boolean> {
    const trimmed = key.trim();
    if (!trimmed) {
      this.error = "Paste a key first.";
      return false;
    }
    return this.#run(async () => {
      await this.api.keys.set(provider, trimmed);
      this.keys = await this.api.keys.list();
      this.#forgetCheck(provider);
      this.note = `Saved the ${provider} key.`;
    });
  }

  async removeKey(provider: string): Promise<void> {
    await this.#run(async () => {
      await this.api.keys.set(provider, null);
      this.keys = await this.api.keys.list();
      this.#forgetCheck(provider);
      this.note = `Removed the ${provider} key.`;
    });
  }

  async testKey(provider: string): Promise<void> {
    this.checks = { ...this.checks, [provider]: "checking" };
    try {
      const check = await this.api.keys.test(provider);
      this.checks = { ...this.checks, [provider]: check };
    } catch (e) {
      this.checks = { ...this.checks, [provider]: { ok: false, problem: "other", message: errorMessage(e) } };
    }
  }

  async setThinking(level: ThinkingLevel | null): Promise<void> {
    await this.#run(async () => {
      await this.api.settings.configure(this.conversationId, { thinkingLevel: level });
      this.agent = await this.api.settings.agent(this.conversationId);
      this.note = level ? `Thinking level: ${level}.` : "Thinking level: the model's default.";
    });
  }

  async setInstructions(text: string): Promise<void> {
    await this.#run(async () => {
      await this.api.settings.configure(this.conversationId, { instructions: text });
      this.agent = await this.api.settings.agent(this.conversationId);
      this.note = this.agent.instructions ? "Saved the instructions." : "Instructions cleared.";
    });
  }

  async setDemoSpeed(speed: DemoSpeedName): Promise<void> {
    await this.#run(async () => {
      await this.api.settings.setDemoSpeed(speed);
      this.demoSpeed = speed;
      this.note = `The demo model now streams at "${speed}" speed.`;
    });
  }

  #forgetCheck(provider: string): void {
    const { [provider]: _, ...rest } = this.checks;
    this.checks = rest;
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
