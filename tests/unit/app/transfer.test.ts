/**
 * Export and import of a conversation: the round trip keeps entries (renumbered: heads and edits
 * follow), documents and the model's context; no stored key leaves; malformed, foreign or newer
 * files are refused with a clear error and nothing is written.
 */
import { expect, test } from "vitest";
import { storedApiKeyValues } from "../../../worker/agent/models/keys.ts";
import { defaultStream } from "../../../worker/agent/services.ts";
import { listWorkspaceFiles } from "../../../worker/agent/workspace/browse.ts";
import { MemoryFs } from "../../../worker/agent/workspace/memory-fs.ts";
import {
  EXPORT_FORMAT,
  exportConversation,
  ImportRefused,
  importConversation,
  parseExport,
} from "../../../worker/app/transfer.ts";
import { echo, open } from "../agent/fixtures.ts";

const DOCS = ["pi.agent", "pi.usage", "app.title"];
const KEY = "sk-transfer-0123456789abcdef";

test("a conversation exported and imported keeps its entries, documents and model context, without the key", async () => {
  const seen: string[] = [];
  const { h, root, faux } = await open(echo, {
    stream: (model, context, options) => {
      seen.push(JSON.stringify(context.messages.map((m) => m.role)));
      return defaultStream(model, context, options);
    },
  });
  await h.models.setKey(faux.ref.provider, KEY);
  await root.configure({ instructions: `Never say ${KEY}` });
  await (await root.submit({ type: "input", content: "first" })).wait();
  await root.reset();
  await (await root.submit({ type: "input", content: `second ${KEY}` })).wait();
  await h.transaction((tx) => tx.writeDoc(root.id, "app.title", { title: "Round trip" }));
  const text = await exportConversation(h, root.id, {
    documents: DOCS,
    secrets: storedApiKeyValues((c, n) => h.docNow(c, n)),
  });
  expect(text).not.toContain(KEY);
  expect(JSON.parse(text).format).toBe(EXPORT_FORMAT);

  const id = await importConversation(h, parseExport(text, { documents: DOCS }));
  const copy = h.requireConversation(id);
  const before = await root.entries();
  const after = await copy.entries();
  expect(after.map((e) => e.kind)).toEqual(before.map((e) => e.kind));
  // The model messages are the same, the key redacted where the transcript quoted it.
  expect(JSON.stringify(after.map((e) => e.model))).toBe(
    JSON.stringify(before.map((e) => e.model))
      .split(KEY)
      .join("[redacted]"),
  );
  // The reset's head names the copy's own entry, not the original's id.
  const head = after.find((e) => e.kind === "pi.reset");
  expect(head?.head).toBe(head?.id);
  expect(await h.doc(id, "app.title")).toEqual({ title: "Round trip" });
  expect((await copy.agentState()).instructions).toBe("Never say [redacted]");
  // The model sees the same context in the copy: only what follows the reset.
  seen.length = 0;
  await (await copy.submit({ type: "input", content: "third" })).wait();
  expect(seen[0]).toBe(JSON.stringify(["user", "assistant", "user"]));
});

test("malformed, foreign and newer files are refused with what is wrong, and nothing is written", async () => {
  const good = { format: EXPORT_FORMAT, version: 1, exportedAt: 0, entries: [], documents: {} };
  const cases: Array<[unknown, RegExp]> = [
    ["{not json", /not JSON/],
    [JSON.stringify({ format: "something-else" }), /not a conversation export/],
    [JSON.stringify({ ...good, version: 9 }), /newer version/],
    [JSON.stringify({ ...good, entries: {} }), /no entries list/],
    [
      JSON.stringify({
        ...good,
        entries: [
          { id: 2, kind: "pi.user" },
          { id: 1, kind: "pi.user" },
        ],
      }),
      /increasing/,
    ],
    [JSON.stringify({ ...good, entries: [{ id: 1, kind: "<script>" }] }), /kind is invalid/],
    [
      JSON.stringify({ ...good, entries: [{ id: 1, kind: "pi.reset", head: 7 }] }),
      /head names no earlier entry/,
    ],
    [
      JSON.stringify({ ...good, entries: [{ id: 1, kind: "x", edits: [{ target: 5, action: "omit" }] }] }),
      /edit names no earlier/,
    ],
    [
      JSON.stringify({
        ...good,
        entries: [{ id: 1, kind: "pi.user", model: [{ role: "user", content: 5 }] }],
      }),
      /content/,
    ],
    [
      JSON.stringify({ ...good, entries: [{ id: 1, kind: "pi.user", model: { role: "user" } }] }),
      /not a list/,
    ],
    [JSON.stringify({ ...good, documents: { "engine.apiKeys": {} } }), /unknown document "engine.apiKeys"/],
    [42, /not text/],
  ];
  for (const [text, reason] of cases) {
    let error: unknown;
    try {
      parseExport(text, { documents: DOCS });
    } catch (e) {
      error = e;
    }
    expect(error, String(text)).toBeInstanceOf(ImportRefused);
    expect((error as Error).message).toMatch(reason);
    expect((error as Error).message).toMatch(/Nothing was written/);
  }
});

test("an import that fails inside its commit writes nothing", async () => {
  const { h, store } = await open(echo);
  const countConversations = () =>
    store.read(async (sql) => Number((await sql.get("SELECT count(*) AS n FROM conversations"))?.["n"]));
  const before = await countConversations();
  // Passes the file checks, then fails in the commit: a document value that is not JSON-safe.
  const file = parseExport(
    JSON.stringify({
      format: EXPORT_FORMAT,
      version: 1,
      exportedAt: 0,
      entries: [{ id: 1, kind: "pi.user", model: [{ role: "user", content: "hi" }] }],
      documents: { "pi.agent": { model: { provider: "x", id: "y" } } },
    }),
    { documents: DOCS },
  );
  const broken = { ...file, entries: [...file.entries, { id: 2, kind: "pi.user", data: Number.NaN }] };
  await expect(importConversation(h, broken)).rejects.toBeInstanceOf(ImportRefused);
  expect(await countConversations()).toBe(before);
});

test("the workspace browser lists every file below the root with its size", async () => {
  const fs = new MemoryFs();
  await fs.write("a.md", "hello");
  await fs.write("notes/n1.md", "é");
  await fs.write("notes/deep/x.txt", "");
  expect(await listWorkspaceFiles(fs)).toEqual([
    { path: "a.md", size: 5 },
    { path: "notes/deep/x.txt", size: 0 },
    { path: "notes/n1.md", size: 2 },
  ]);
  expect(await listWorkspaceFiles(fs, 1)).toHaveLength(1);
});
