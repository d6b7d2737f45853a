/**
 * Providers in a person's words: the name a provider goes by ("OpenAI" for pi-ai's `openai`) and the
 * phrase for its key with the right article ("an OpenAI API key", "a Groq API key"). Invariant: an id
 * this table does not know is shown as it is, never dropped; the article follows how the name is
 * said (the sound, not the letter: "an xAI", "a Hugging Face").
 */

/** Display names of pi-ai's known providers (and the app's own demo provider). */
const NAMES: Record<string, string> = {
  "amazon-bedrock": "Amazon Bedrock",
  anthropic: "Anthropic",
  google: "Google",
  "google-vertex": "Google Vertex AI",
  openai: "OpenAI",
  "azure-openai-responses": "Azure OpenAI",
  "openai-codex": "OpenAI Codex",
  deepseek: "DeepSeek",
  "github-copilot": "GitHub Copilot",
  xai: "xAI",
  groq: "Groq",
  cerebras: "Cerebras",
  openrouter: "OpenRouter",
  "vercel-ai-gateway": "Vercel AI Gateway",
  zai: "Z.ai",
  mistral: "Mistral",
  minimax: "MiniMax",
  "minimax-cn": "MiniMax (China)",
  moonshotai: "Moonshot AI",
  "moonshotai-cn": "Moonshot AI (China)",
  huggingface: "Hugging Face",
  fireworks: "Fireworks",
  opencode: "OpenCode",
  "opencode-go": "OpenCode Go",
  "kimi-coding": "Kimi Coding",
  "cloudflare-workers-ai": "Cloudflare Workers AI",
  "cloudflare-ai-gateway": "Cloudflare AI Gateway",
  xiaomi: "Xiaomi",
  "xiaomi-token-plan-cn": "Xiaomi (China)",
  "xiaomi-token-plan-ams": "Xiaomi (Amsterdam)",
  "xiaomi-token-plan-sgp": "Xiaomi (Singapore)",
};

/** Names said with "an" though they start with a consonant letter (a vowel sound: "ex-AI"). */
const AN = new Set(["xAI"]);
/** Names said with "a" though they start with a vowel letter ("you-"). */
const A = /^(uni|use|eu)/i;

/** The name `provider` goes by; an unknown id as it is. */
export function providerName(provider: string): string {
  return NAMES[provider] ?? provider;
}

/** "an OpenAI API key", "a Groq API key". */
export function keyPhrase(provider: string): string {
  const name = providerName(provider);
  const an = AN.has(name) || (/^[aeiou]/i.test(name) && !A.test(name));
  return `${an ? "an" : "a"} ${name} API key`;
}
