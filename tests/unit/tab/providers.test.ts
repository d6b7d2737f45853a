import { expect, test } from "vitest";
import { keyPhrase, providerName } from "../../../src/lib/providers.ts";

test("a provider is named as it calls itself, an unknown id as it is", () => {
  expect(providerName("openai")).toBe("OpenAI");
  expect(providerName("huggingface")).toBe("Hugging Face");
  expect(providerName("my-endpoint")).toBe("my-endpoint");
});

test("the key it needs takes the article of how the name is said", () => {
  expect(keyPhrase("openai")).toBe("an OpenAI API key");
  expect(keyPhrase("anthropic")).toBe("an Anthropic API key");
  expect(keyPhrase("xai")).toBe("an xAI API key");
  expect(keyPhrase("groq")).toBe("a Groq API key");
  expect(keyPhrase("google")).toBe("a Google API key");
  expect(keyPhrase("huggingface")).toBe("a Hugging Face API key");
  expect(keyPhrase("unicorn")).toBe("a unicorn API key");
});
