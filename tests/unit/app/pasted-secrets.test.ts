/**
 * Secrets pasted by mistake (issue 28, part 3): a saved API key or the saved server token typed into
 * a message, a title or an imported file never shows in a conversation's title, the conversation
 * list, the export's file name or a search result, whether the key was saved before the paste or
 * after it. The engine service (worker/app/engine-service.ts) on the memory store, as a tab calls it.
 */
import { afterAll, expect, test } from "vitest";
import { AgentHarness } from "../../../worker/agent/harness.ts";
import { TITLE_DOC } from "../../../worker/app/conversation-list.ts";
import { HarnessEngine } from "../../../worker/app/engine-service.ts";
import { remoteApi } from "../../../worker/app/remote.ts";
import type { ConversationSummary } from "../../../worker/protocol/index.ts";
import { fauxAgentModel, memoryStore } from "../../../worker/testing.ts";
import { echo } from "../agent/fixtures.ts";

const KEY = "sk-ant-api03-PASTEDbyMISTAKE0123456789";
const TOKEN = "home.TOKENpastedBYmistake_0123456789";
const faux = fauxAgentModel(echo);
afterAll(() => faux.unregister());

async function engine() {
  const harness = await AgentHarness.open(await memoryStore(), {
    models: faux.models,
    defaultModel: faux.ref,
  });
  const service = new HarnessEngine({
    harness: async () => harness,
    build: "test-build",
    tabArrived: () => {},
  });
  const tab = service.tab("a");
  const saveSecrets = async () => {
    await tab.keys.set("anthropic", KEY);
    await remoteApi(async () => harness).set("http://127.0.0.1:8787", TOKEN);
  };
  return { harness, service, tab, saveSecrets };
}

const spelled = (text: string) => text.includes(KEY) || text.includes(TOKEN);
/** Whether `text` holds any 6 characters in a row of either secret. */
const anyPart = (text: string) =>
  [KEY, TOKEN].some((s) =>
    Array.from({ length: s.length - 5 }, (_, i) => s.slice(i, i + 6)).some((w) => text.includes(w)),
  );

test("a key or token typed into a first message: the title, the list, the file name and search never spell it", async () => {
  const { harness, tab, saveSecrets } = await engine();
  await saveSecrets();
  const heard: ConversationSummary[][] = [];
  await tab.conversations.watch((list) => void heard.push(list));
  const a = await tab.conversations.create();
  await tab.run.submit(a, { text: `my key is ${KEY} please check it` });
  const b = await tab.conversations.create();
  await tab.run.submit(b, { text: `${TOKEN} is the token` });
  await harness.waitForIdle();

  const titles = (await tab.conversations.list()).map((c) => c.title);
  expect(titles.some((t) => t.includes("[redacted]"))).toBe(true);
  for (const t of titles) expect(spelled(t) || anyPart(t)).toBe(false);
  for (const id of [a, b]) {
    const stored = (await harness.doc(id, TITLE_DOC)) as { title: string };
    expect(spelled(stored.title)).toBe(false);
    const { fileName, text } = await tab.conversations.export(id);
    expect(anyPart(fileName.toLowerCase())).toBe(false);
    expect(anyPart(fileName)).toBe(false);
    expect(spelled(text)).toBe(false);
  }
  await expect.poll(() => heard.at(-1)?.length).toBe((await tab.conversations.list()).length);
  for (const list of heard) for (const c of list) expect(spelled(c.title)).toBe(false);

  // Search finds a conversation by its words, never by the secret or a piece of it.
  expect(await tab.conversations.search("please check")).toEqual([a]);
  expect(await tab.conversations.search(KEY)).toEqual([]);
  expect(await tab.conversations.search(KEY.slice(4, 24))).toEqual([]);
  expect(await tab.conversations.search(TOKEN)).toEqual([]);
  await harness.close();
});

test("a key saved after it was pasted: the list, the export's file name and search stop spelling it", async () => {
  const { harness, tab, saveSecrets } = await engine();
  const a = await tab.conversations.create();
  await tab.run.submit(a, { text: `${KEY} and ${TOKEN}` });
  await harness.waitForIdle();
  const heard: ConversationSummary[][] = [];
  await tab.conversations.watch((list) => void heard.push(list));
  await expect.poll(() => heard.length).toBeGreaterThan(0);
  expect(await tab.conversations.search(KEY)).toEqual([a]);

  await saveSecrets();
  const title = (await tab.conversations.list()).find((c) => c.id === a)!.title;
  expect(spelled(title) || anyPart(title)).toBe(false);
  await expect.poll(() => heard.at(-1)?.find((c) => c.id === a)?.title).toBe(title);
  const { fileName } = await tab.conversations.export(a);
  expect(anyPart(fileName)).toBe(false);
  expect(await tab.conversations.search(KEY)).toEqual([]);
  expect(await tab.conversations.search(TOKEN)).toEqual([]);
  await harness.close();
});

test("a key typed as a title (create, rename) or carried in an imported file's title is stored redacted", async () => {
  const { harness, tab, saveSecrets } = await engine();
  await saveSecrets();
  const created = await tab.conversations.create(`keys ${KEY}`);
  const renamed = await tab.conversations.create("plain");
  await tab.conversations.rename(renamed, `token ${TOKEN}`);
  const source = await tab.conversations.create("to export");
  const { text } = await tab.conversations.export(source);
  const file = JSON.parse(text) as { documents: Record<string, unknown> };
  file.documents[TITLE_DOC] = { title: `imported ${KEY}` };
  const imported = await tab.conversations.import(JSON.stringify(file));
  for (const id of [created, renamed, imported]) {
    const stored = (await harness.doc(id, TITLE_DOC)) as { title: string };
    expect(stored.title).toContain("[redacted]");
    expect(spelled(stored.title)).toBe(false);
  }
  await harness.close();
});
