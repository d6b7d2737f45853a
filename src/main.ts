/**
 * The app's entry: connects this tab to its engine at once, and mounts the app once the engine has
 * left "starting" (ready, failed, waiting for another tab, ...) or after `MOUNT_CAP_MS`. Until then
 * index.html's static shell shows the app's bar and "Starting…".
 * Why wait: after a reload the engine opens its store and resumes the runs it found on the same two
 * cores the tab has; the app's mount is the tab's largest piece of work, and before the open it has
 * no data to show. Mounted after the open, the data shows no later, and recovery / floor in the
 * recovery bench (tests/bench/recovery.ts) went from a median 1.83x to 1.70x (docs/ARCHITECTURE.md).
 * Invariants: the engine is connected once, here (App.svelte takes the client as a prop); every
 * status other than "starting" mounts the app at once, so a status screen (a damaged store, another
 * tab, a protocol mismatch) is never held back; the shell is replaced, not hydrated.
 */
import { mount } from "svelte";
import App from "./App.svelte";
import { EngineClient } from "./lib/engine.svelte.ts";
import "./lib/theme.svelte.ts";
import "./styles/theme.css";

/** The longest the app waits for the engine before it mounts and shows the engine's own progress. */
export const MOUNT_CAP_MS = 1_000;

const target = document.getElementById("app");
if (!target) throw new Error("index.html has no #app element");

/** The performance mark set as the app mounts; its detail says the engine's phase then (the bench and e2e read it). */
export const APP_MOUNTED_MARK = "durable-agent:app-mounted";

const engine = new EngineClient(new URLSearchParams(location.search));
void engine.connect();
await engine.pastStarting(MOUNT_CAP_MS);
performance.mark(APP_MOUNTED_MARK, { detail: { phase: engine.status.phase } });
target.replaceChildren();

export default mount(App, { target, props: { engine } });
