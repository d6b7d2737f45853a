/**
 * Checking an API key with a small request (what a failure means, in words: provider-problem.ts). The
 * key is read at request time (never stored by the check) and scrubbed from every message: a provider
 * that echoes the key back in an error cannot leak it to the tab, a log or the transcript.
 */
import type { Api, Message, Model } from "@mariozechner/pi-ai";
import { errorMessage } from "../../core/errors.ts";
import { type AgentServices, withoutSecret } from "../services.ts";
import { describeProviderProblem, type KeyCheck, providerProblem } from "./provider-problem.ts";

export {
  describeProviderProblem,
  type KeyCheck,
  type ProviderProblem,
  providerProblem,
} from "./provider-problem.ts";

/** How long a key check waits for its answer. */
export const KEY_CHECK_TIMEOUT_MS = 20_000;

/** `text` without the key, cut to `max` characters. */
function scrub(text: string, key: string, max = 300): string {
  const out = withoutSecret(text, key);
  return out.length > max ? `${out.slice(0, max - 1)}…` : out;
}

/**
 * Send one tiny request ("reply OK") to `provider`'s first listed model with its stored key. Never
 * throws for a provider failure: the answer says what went wrong, without the key.
 */
export async function checkApiKey(
  services: Pick<AgentServices, "models" | "stream" | "apiKey">,
  provider: string,
  options: { signal?: AbortSignal; now?: () => number } = {},
): Promise<KeyCheck> {
  const key = services.apiKey(provider);
  if (!key) return { ok: false, problem: "missing", message: describeProviderProblem("missing", provider) };
  const info = services.models.list().find((m) => m.provider === provider);
  const model: Model<Api> | undefined = info
    ? services.models.resolve({ provider: info.provider, modelId: info.id })
    : undefined;
  if (!model)
    return { ok: false, problem: "other", message: `No model of ${provider} is known to this engine.` };
  const timeout = AbortSignal.timeout(KEY_CHECK_TIMEOUT_MS);
  const signal = options.signal ? AbortSignal.any([options.signal, timeout]) : timeout;
  const question: Message = {
    role: "user",
    content: "Reply with the word OK.",
    timestamp: (options.now ?? Date.now)(),
  };
  let failure: string | undefined;
  try {
    const answer = await services
      .stream(model, { messages: [question] }, { apiKey: key, maxTokens: 16, signal })
      .result();
    if (answer.stopReason === "error" || answer.stopReason === "aborted")
      failure = answer.errorMessage ?? (answer.stopReason === "aborted" ? "timed out" : "error");
  } catch (error) {
    failure = errorMessage(error);
  }
  if (failure === undefined) return { ok: true, model: model.name };
  if (timeout.aborted && !options.signal?.aborted)
    failure = `timed out after ${KEY_CHECK_TIMEOUT_MS / 1000} s`;
  const problem = providerProblem(failure);
  const detail = scrub(failure, key);
  return { ok: false, problem, message: `${describeProviderProblem(problem, provider)} (${detail})` };
}
