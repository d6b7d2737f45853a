/**
 * The app's own settings kept in the store's settings conversation (conversation 0, never listed or
 * exported): the demo model's speed, by preset name. Applied when the engine opens and when changed,
 * so every tab's demo conversations stream at the chosen speed.
 */
import type { AgentHarness } from "../agent/harness.ts";
import { SETTINGS_CONVERSATION } from "../agent/models/keys.ts";
import {
  type AgentSettingsChange,
  type DemoSpeedName,
  MAX_INSTRUCTIONS,
  THINKING_LEVELS,
} from "../protocol/index.ts";
import { setDemoSpeed } from "./demo-model.ts";

export const DEMO_SPEED_DOC = "app.demoSpeed";

/** The presets the settings offer: characters per streamed delta and the pause before each. */
export const DEMO_SPEEDS: Readonly<Record<DemoSpeedName, { charsPerChunk: number; chunkDelayMs: number }>> = {
  slow: { charsPerChunk: 3, chunkDelayMs: 40 },
  normal: { charsPerChunk: 8, chunkDelayMs: 15 },
  fast: { charsPerChunk: 32, chunkDelayMs: 5 },
  instant: { charsPerChunk: 4096, chunkDelayMs: 0 },
};

export function isDemoSpeedName(value: unknown): value is DemoSpeedName {
  return typeof value === "string" && Object.hasOwn(DEMO_SPEEDS, value);
}

/** The stored preset ("normal" when none or an unknown one is stored). */
export function storedDemoSpeed(h: AgentHarness): DemoSpeedName {
  const value = (h.docNow(SETTINGS_CONVERSATION, DEMO_SPEED_DOC) as { speed?: unknown } | undefined)?.speed;
  return isDemoSpeedName(value) ? value : "normal";
}

/** Apply the stored preset to the demo provider (at open). */
export function applyStoredDemoSpeed(h: AgentHarness): void {
  setDemoSpeed(DEMO_SPEEDS[storedDemoSpeed(h)]);
}

/** Store and apply a preset; anything but a preset name is refused. */
export async function writeDemoSpeed(h: AgentHarness, speed: unknown): Promise<void> {
  if (!isDemoSpeedName(speed))
    throw new TypeError(`the demo speed must be one of ${Object.keys(DEMO_SPEEDS).join(", ")}`);
  await h.transaction((tx) => tx.writeDoc(SETTINGS_CONVERSATION, DEMO_SPEED_DOC, { speed }));
  setDemoSpeed(DEMO_SPEEDS[speed]);
}

/** A tab's agent-settings change, checked where it enters: unknown fields and bad values are refused. */
export function checkAgentChange(change: AgentSettingsChange): AgentSettingsChange {
  if (typeof change !== "object" || change === null)
    throw new TypeError("configureAgent needs a change object");
  for (const key of Object.keys(change))
    if (key !== "thinkingLevel" && key !== "instructions")
      throw new TypeError(`configureAgent: unknown setting ${JSON.stringify(key)}`);
  const { thinkingLevel, instructions } = change;
  if (thinkingLevel !== undefined && thinkingLevel !== null && !THINKING_LEVELS.includes(thinkingLevel))
    throw new TypeError(`the thinking level must be one of ${THINKING_LEVELS.join(", ")}`);
  if (instructions !== undefined && instructions !== null) {
    if (typeof instructions !== "string") throw new TypeError("instructions must be text");
    if (instructions.length > MAX_INSTRUCTIONS)
      throw new TypeError(`instructions are at most ${MAX_INSTRUCTIONS} characters`);
  }
  // Empty instructions mean the default.
  return {
    ...(thinkingLevel !== undefined ? { thinkingLevel } : {}),
    ...(instructions !== undefined ? { instructions: instructions?.trim() ? instructions : null } : {}),
  };
}
