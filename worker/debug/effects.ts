/**
 * Test tools whose effect lands outside the browser (issue 28, the kill storm in
 * tests/e2e/kill-storm.test.ts): each call POSTs `{ key, mode, callId, taskId }` to an endpoint on
 * the page's own origin, where the test's HTTP server counts every request it receives. The test then
 * knows how often each call's effect ran, whatever happened to the browser, and checks it against the
 * tool's replay policy:
 * - `effect_once` is `unsafe`: every POST is an application, so after a crash between its intent and
 *   its result recovery must record `interrupted`, never run it again (at most one POST per key);
 * - `effect_keyed` is `safe` because it is idempotency-keyed: the server applies a key once and
 *   answers a repeated POST with the first answer, so recovery may run it again (exactly one
 *   application per key, any number of attempts).
 * Invariants: only an engine whose page asked for the test endpoints (`?debug=1`) and named an
 * endpoint (`&effects=/path`) installs them (boot.ts); the endpoint is a path on the worker's own
 * origin (anything else is refused where the engine starts, so a page cannot point them elsewhere);
 * a failed request is an error result the model can read, never a throw.
 */
import { Type } from "typebox";
import { defineExtension } from "../agent/extensions/define.ts";
import type { Extension } from "../agent/extensions/types.ts";
import { defineTool, errorResult, type ToolApi, textResult } from "../agent/tools/contract.ts";
import { errorMessage } from "../core/errors.ts";

/** The extension's name, as a conversation's extension menu lists it. */
export const EFFECT_TOOLS_EXTENSION = "test-effects";

const parameters = Type.Object({
  key: Type.String({ minLength: 1, maxLength: 200, description: "The effect's key" }),
});

/** The endpoint `path` on `origin`; a path that would leave the origin is a TypeError. */
export function effectEndpoint(path: string, origin: string): URL {
  if (!path.startsWith("/") || path.startsWith("//"))
    throw new TypeError(`the effect endpoint must be a path on this origin, not ${JSON.stringify(path)}`);
  const url = new URL(path, origin);
  if (url.origin !== new URL(origin).origin) throw new TypeError(`the effect endpoint left ${origin}`);
  return url;
}

async function post(endpoint: URL, mode: "once" | "keyed", key: string, api: ToolApi) {
  try {
    const response = await fetch(endpoint, {
      method: "POST",
      // text/plain: a simple request, nothing but the POST itself reaches the server.
      headers: { "Content-Type": "text/plain;charset=UTF-8" },
      body: JSON.stringify({ key, mode, callId: api.toolCallId, taskId: api.taskId }),
      signal: api.signal,
    });
    const text = await response.text();
    return response.ok
      ? textResult(text)
      : errorResult(`the effect server answered ${response.status}: ${text}`);
  } catch (error) {
    return errorResult(`the effect could not be sent: ${errorMessage(error)}`);
  }
}

/** The two effect tools, posting to `endpoint`. */
export function effectTools(endpoint: URL): Extension {
  return defineExtension({
    name: EFFECT_TOOLS_EXTENSION,
    tools: [
      defineTool({
        name: "effect_once",
        description: "Apply a test effect once (not idempotent: never repeated after a crash)",
        parameters,
        replay: "unsafe",
        execute: (args, api) => post(endpoint, "once", args.key, api),
      }),
      defineTool({
        name: "effect_keyed",
        description: "Apply a test effect under an idempotency key (safe to repeat)",
        parameters,
        replay: "safe",
        execute: (args, api) => post(endpoint, "keyed", args.key, api),
      }),
    ],
  });
}

/** The effect tools posting to `path` on `origin` (a path that leaves it is a TypeError). */
export function effectToolsAt(path: string, origin: string): Extension {
  return effectTools(effectEndpoint(path, origin));
}
