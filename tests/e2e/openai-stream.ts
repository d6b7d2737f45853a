/**
 * A network model's provider (groq here), faked for e2e tests: `openAiStream` is the body of an
 * OpenAI-style streamed chat completion (server-sent events: one content chunk, a stop chunk with
 * optional usage, then `[DONE]`), and `routeProvider` routes the provider's URL in a browser context
 * to answer 503, fail as unreachable, or stream a canned completion, as the test switches it.
 * A route reaches a page's dedicated workers, not a SharedWorker: tests that route the provider open
 * the app with `engine: "dedicated"` (offline.test.ts says how that was found).
 */
import type { BrowserContext, Route } from "playwright-core";

export interface StreamedCompletion {
  /** The model id the chunks name. */
  readonly model: string;
  /** Token counts sent with the stop chunk; none when absent. */
  readonly usage?: { readonly prompt_tokens: number; readonly completion_tokens: number };
}

export function openAiStream(text: string, options: StreamedCompletion): string {
  const chunk = (delta: object, finish: string | null, extra: object = {}) =>
    `data: ${JSON.stringify({
      id: "chatcmpl-e2e",
      object: "chat.completion.chunk",
      created: 1,
      model: options.model,
      choices: [{ index: 0, delta, finish_reason: finish }],
      ...extra,
    })}\n\n`;
  const usage = options.usage
    ? {
        usage: {
          ...options.usage,
          total_tokens: options.usage.prompt_tokens + options.usage.completion_tokens,
        },
      }
    : {};
  return `${chunk({ role: "assistant", content: text }, null)}${chunk({}, "stop", usage)}data: [DONE]\n\n`;
}

/** How a routed provider answers: 503 (busy), not at all (down, as without a network), or `completion`. */
export type ProviderMode = "busy" | "down" | "up";

export interface RoutedProvider {
  /** How the next request is answered; the test switches it. */
  mode: ProviderMode;
  /** The requests answered in each mode so far. */
  readonly sent: Record<ProviderMode, number>;
}

/** Every URL of the groq provider. */
export const GROQ = "https://api.groq.com/**";

/**
 * Route `pattern` (the groq provider by default) in `context`: each request is counted under the
 * current mode and answered 503 while busy (the SDK's own retries within an attempt included),
 * aborted as "internet disconnected" while down, and with `completion()` streamed while up.
 * The provider starts in `mode` (busy by default).
 */
export async function routeProvider(
  context: BrowserContext,
  options: { completion: () => string; mode?: ProviderMode; pattern?: string },
): Promise<RoutedProvider> {
  const provider: RoutedProvider = { mode: options.mode ?? "busy", sent: { busy: 0, down: 0, up: 0 } };
  await context.route(options.pattern ?? GROQ, (route: Route) => {
    provider.sent[provider.mode]++;
    if (provider.mode === "down") return route.abort("internetdisconnected");
    if (provider.mode === "busy")
      return route.fulfill({
        status: 503,
        contentType: "application/json",
        body: JSON.stringify({ error: { message: "Service Unavailable", type: "server_error" } }),
      });
    return route.fulfill({ status: 200, contentType: "text/event-stream", body: options.completion() });
  });
  return provider;
}
