/**
 * The tab's first script (index.html loads it ahead of main.ts): starts the engine's worker while the
 * app's own scripts are still on their way (lib/engine-start.ts). It imports nothing else.
 */
import { startEngineEarly } from "./lib/engine-start.ts";

startEngineEarly(new URLSearchParams(location.search));
