/**
 * API keys are agent settings: `setApiKey` keeps a key in the store's settings, requests read it at
 * the moment they are sent, and it never reaches a conversation's view, entries or task state.
 */
import { expect, test } from "vitest";
import { defaultStream } from "../../../worker/agent/services.ts";
import { demoModel } from "../../../worker/app/demo-model.ts";
import { echo, open } from "./fixtures.ts";

test("a stored key reaches each request, never the transcript, the view or task state; null forgets it", async () => {
  const KEY = "sk-stored-0123456789abcdef";
  const seen: Array<string | undefined> = [];
  const { h, root, store, faux } = await open(echo, {
    stream: (model, context, options) => {
      seen.push(options.apiKey);
      return defaultStream(model, context, options);
    },
  });
  expect(h.models.hasKey(faux.ref.provider)).toBe(false);
  await h.models.setKey(faux.ref.provider, KEY);
  expect(h.models.hasKey(faux.ref.provider)).toBe(true);
  expect(h.models.hasKey("some-other-provider")).toBe(false);
  expect((await (await root.submit({ type: "input", content: "hi" })).wait()).status).toBe("done");
  await h.models.setKey(faux.ref.provider, null);
  expect(h.models.hasKey(faux.ref.provider)).toBe(false);
  expect((await (await root.submit({ type: "input", content: "again" })).wait()).status).toBe("done");
  expect(seen).toEqual([KEY, undefined]);
  const view = await root.viewState();
  expect(JSON.stringify([view, await root.entries()])).not.toContain(KEY);
  const stored = await store.read(async (sql) =>
    JSON.stringify([await sql.all("SELECT * FROM entries"), await sql.all("SELECT * FROM tasks")]),
  );
  expect(stored).not.toContain(KEY);
});

test("models() lists the resolver's models, only the demo provider's without a key", async () => {
  const { h, faux } = await open(echo);
  const models = h.models.list();
  expect(models.find((m) => m.provider === faux.ref.provider && m.id === faux.ref.modelId)?.needsKey).toBe(
    true,
  );
  expect(models.every((m) => m.needsKey === (m.provider !== demoModel.provider))).toBe(true);
});
