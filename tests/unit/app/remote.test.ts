/**
 * The server setting (worker/app/remote.ts) on a real harness: saved in the settings conversation,
 * read back without the token (`get`) and with it only for the tab's own connection
 * (`credentials`), a new address keeping the saved token, forgetting both; bad addresses and tokens
 * refused with `RemoteSettingsInvalid` and nothing written, never with the token in the message; the
 * token redacted from an export like the API keys.
 */
import { expect, test } from "vitest";
import { SETTINGS_CONVERSATION } from "../../../worker/agent/models/keys.ts";
import { REMOTE_DOC, remoteApi, remoteSecrets } from "../../../worker/app/remote.ts";
import { exportConversation } from "../../../worker/app/transfer.ts";
import { echo, open } from "../agent/fixtures.ts";

const TOKEN = "tok_3f9a.b-c~d";

test("the address and token are kept; the settings read only whether a token is saved", async () => {
  const { h } = await open(echo);
  const remote = remoteApi(async () => h);
  expect(await remote.get()).toEqual({ url: null, hasToken: false });
  expect(await remote.credentials()).toBeNull();

  await remote.set(" http://127.0.0.1:8787/space/home/ ", TOKEN);
  expect(await remote.get()).toEqual({ url: "http://127.0.0.1:8787/space/home", hasToken: true });
  expect(JSON.stringify(await remote.get())).not.toContain(TOKEN);
  expect(await remote.credentials()).toEqual({ url: "http://127.0.0.1:8787/space/home", token: TOKEN });

  // A new address with no token keeps the saved one; null forgets both.
  await remote.set("https://agents.example.org/space/home", null);
  expect(await remote.credentials()).toEqual({ url: "https://agents.example.org/space/home", token: TOKEN });
  await remote.set(null, null);
  expect(await remote.get()).toEqual({ url: null, hasToken: false });
  expect(await remote.credentials()).toBeNull();

  // A server's address alone: the token names the space (`<space>.<mac>`, as the server makes them).
  await remote.set("http://127.0.0.1:8787", "home.abc_DEF-123");
  expect(await remote.credentials()).toEqual({ url: "http://127.0.0.1:8787", token: "home.abc_DEF-123" });
});

test("a bad address or token is refused in words, nothing is written, and the token is not repeated", async () => {
  const { h } = await open(echo);
  const remote = remoteApi(async () => h);
  await remote.set("http://localhost:8787/space/a", TOKEN);
  const before = h.docNow(SETTINGS_CONVERSATION, REMOTE_DOC);
  const bad: [string, string | null, RegExp][] = [
    ["", TOKEN, /enter the server's address/],
    ["localhost:8787", TOKEN, /starts with http/],
    ["ftp://host", TOKEN, /starts with http/],
    ["http://user:pw@host", TOKEN, /no user name or password/],
    [`http://host/space/a?token=${TOKEN}`, null, /no \? or #/],
    ["http://host:8787", "no-dot-token", /names no space/],
    ["http://host/space/a", "has space inside", /not a token/],
    ["http://host/space/a", "", /paste the token/],
    ["http://host/space/a", "x".repeat(1025), /not a token/],
  ];
  for (const [url, token, words] of bad) {
    const error = await remote.set(url, token).catch((e: unknown) => e);
    expect(error).toMatchObject({ name: "RemoteSettingsInvalid", code: "remote_settings_invalid" });
    expect((error as Error).message).toMatch(words);
    expect((error as Error).message).not.toContain(TOKEN);
  }
  expect(h.docNow(SETTINGS_CONVERSATION, REMOTE_DOC)).toEqual(before);
});

test("an export redacts the token wherever a conversation quoted it", async () => {
  const { h, root } = await open(echo);
  const remote = remoteApi(async () => h);
  await remote.set("http://localhost:8787/space/a", TOKEN);
  await (await root.submit({ type: "input", content: `my token is ${TOKEN}` })).wait();
  const text = await exportConversation(h, root.id, {
    documents: [],
    secrets: remoteSecrets((c, n) => h.docNow(c, n)),
  });
  expect(text).toContain("my token is");
  expect(text).not.toContain(TOKEN);
});
