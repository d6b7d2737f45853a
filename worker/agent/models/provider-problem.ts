/**
 * What a provider failure means, in words: pure functions and types the tab imports too (through
 * worker/protocol/). Kept apart from the key check itself, which reaches the provider stream and so pi-ai:
 * nothing here may import a value that pulls a provider or the model catalogue into the tab's bundle.
 */

/** What kind of trouble a provider failure is, for the person who can fix it. */
export type ProviderProblem = "missing" | "rejected" | "network" | "other";

export type KeyCheck =
  | { readonly ok: true; readonly model: string }
  | { readonly ok: false; readonly problem: ProviderProblem; readonly message: string };

const REJECTED =
  /\b(401|403)\b|unauthori[sz]ed|forbidden|invalid[ _-]?(api[ _-]?)?key|incorrect api key|invalid x-api-key|authenticat|permission denied|api key not valid/i;
const MISSING = /no api key|api key is required/i;
const NETWORK =
  /failed to fetch|fetch failed|network|connection error|ECONNREFUSED|ECONNRESET|ENOTFOUND|EAI_AGAIN|timed? ?out|load failed|cors/i;

/**
 * How pi-ai's providers fail when a request carries no key in a browser: they fall back to
 * `process.env` (a ReferenceError here) or say a key is required.
 */
const KEYLESS_FAILURE = /process is not defined|api key is required|no api key/i;

/**
 * The error message of a request sent without a key: a failure that comes from the missing key is
 * said as one (`No API key is saved for <provider>.`); any other message is kept as it is.
 */
export function keylessFailure(message: string | undefined, provider: string): string | undefined {
  return message !== undefined && KEYLESS_FAILURE.test(message)
    ? `No API key is saved for ${provider}.`
    : message;
}

/** The kind of a provider's error message (pure: the tab uses it to word a failed run). */
export function providerProblem(message: string | undefined): ProviderProblem {
  if (!message) return "other";
  if (MISSING.test(message)) return "missing";
  if (REJECTED.test(message)) return "rejected";
  if (NETWORK.test(message)) return "network";
  return "other";
}

/** A provider failure in a person's words, with what to do about it. */
export function describeProviderProblem(problem: ProviderProblem, provider: string): string {
  switch (problem) {
    case "missing":
      return `No API key is saved for ${provider}. Add one in Settings, then try again.`;
    case "rejected":
      return `${provider} rejected the API key. Replace it in Settings, then try again.`;
    case "network":
      return `${provider} could not be reached (network). Check the connection, then try again.`;
    case "other":
      return `${provider} answered with an error.`;
  }
}
