/**
 * The body of an OpenAI-style streamed chat completion (server-sent events), for e2e tests that route
 * a network model's provider (groq here) to a canned answer: one content chunk, a stop chunk with
 * optional usage, then `[DONE]`.
 */

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
