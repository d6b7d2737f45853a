/**
 * Import files tried with hostile content (issue 28 part 3), through the engine service as a tab
 * calls it: every truncation of a real export, wrong versions, duplicate ids, heads and edits that
 * dangle or form a cycle, files of 50 MB and past the limit, a key-shaped string, scripts and HTML.
 * What `tests/unit/app/transfer.test.ts` already refuses by hand (not JSON, a foreign or newer format,
 * an invalid kind, a dangling head or edit, bad model messages, a foreign document) is not repeated;
 * here every refusal is an `ImportRefused` and the store's tables are exactly as before it. What is
 * imported stays inert: text is stored as it came, no key is saved by it, and the tab's markdown
 * renderer (src/lib/markdown.ts) shows its HTML as text.
 */
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { markdownToHtml } from "../../../src/lib/markdown.ts";
import { API_KEYS_DOC, SETTINGS_CONVERSATION } from "../../../worker/agent/models/keys.ts";
import { TITLE_DOC } from "../../../worker/app/conversation-list.ts";
import { entryText } from "../../../worker/app/search.ts";
import { EXPORT_FORMAT, ImportRefused, MAX_IMPORT_CHARS } from "../../../worker/app/transfer.ts";
import { hostileEngine, storeState } from "./hostile-fixtures.ts";

let engine: Awaited<ReturnType<typeof hostileEngine>>;
/** A real export of a conversation with a few turns. */
let exported: string;

beforeAll(async () => {
  engine = await hostileEngine();
  const { tab, harness } = engine;
  const id = await tab.conversations.create("a trip");
  for (const text of ["plan the trip", "and the way back"]) {
    await tab.run.submit(id, { text });
    await harness.waitForIdle();
  }
  exported = (await tab.conversations.export(id)).text;
});
afterAll(() => engine.close());

/** Import `text`; it must be refused with ImportRefused, and the store must be as it was. */
async function expectRefusedUnwritten(text: unknown, reason?: RegExp): Promise<void> {
  const before = await storeState(engine.store);
  let error: unknown;
  try {
    await engine.tab.conversations.import(text as string);
  } catch (e) {
    error = e;
  }
  expect(error).toBeInstanceOf(ImportRefused);
  if (reason) expect((error as Error).message).toMatch(reason);
  expect(await storeState(engine.store)).toEqual(before);
}

const base = () => JSON.parse(exported) as Record<string, unknown> & { entries: Record<string, unknown>[] };
const withEntries = (entries: unknown[]) => JSON.stringify({ ...base(), entries });

describe("refused, nothing written", () => {
  test("every truncation of a real export (200 generated cut points, and the empty file)", async () => {
    await expectRefusedUnwritten("", /not JSON/);
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 1, max: exported.trimEnd().length - 1 }), async (cut) => {
        await expectRefusedUnwritten(exported.slice(0, cut));
      }),
      { numRuns: 200, seed: 28_34 },
    );
  });

  test("wrong versions: missing, zero, negative, a string, a fraction, newer", async () => {
    const { version: _, ...unversioned } = base();
    await expectRefusedUnwritten(JSON.stringify(unversioned), /version undefined is unknown/);
    for (const version of [0, -1, "1", 0.5, null, [1], { v: 1 }])
      await expectRefusedUnwritten(JSON.stringify({ ...base(), version }), /version .* is unknown/);
    for (const version of [2, 1.5, 1e308])
      await expectRefusedUnwritten(JSON.stringify({ ...base(), version }), /newer version/);
  });

  test("duplicate ids, and heads or edits that dangle, point forward, name themselves or form a cycle", async () => {
    const user = (id: number, extra: Record<string, unknown> = {}) => ({
      id,
      kind: "pi.user",
      model: [{ role: "user", content: `m${id}` }],
      ...extra,
    });
    const cases: [unknown[], RegExp][] = [
      [[user(1), user(1)], /increasing/],
      [[user(1), user(2), user(2)], /increasing/],
      [[user(0)], /increasing/],
      [[user(1.5)], /increasing/],
      [[user(Number.MAX_SAFE_INTEGER + 2)], /increasing/],
      [[user(1, { head: 2 }), user(2, { head: 1 })], /head names no earlier entry/], // a cycle
      [[user(1), user(2, { head: 3 }), user(3)], /head names no earlier entry/],
      [[user(1, { head: -1 })], /head names no earlier entry/],
      [[user(1, { edits: [{ target: 1, action: "omit" }] })], /edit names no earlier/],
      [[user(1), user(2, { edits: [{ target: 3, action: "omit" }] }), user(3)], /edit names no earlier/],
      [[user(1), user(2, { edits: [{ target: 1, action: "delete" }] })], /unknown action/],
      [[user(1), user(2, { edits: "all" })], /edits are not a list/],
    ];
    for (const [entries, reason] of cases) await expectRefusedUnwritten(withEntries(entries), reason);
  });

  test("past the limit (64 MiB), and 50 MB that is not an export", async () => {
    await expectRefusedUnwritten(" ".repeat(MAX_IMPORT_CHARS + 1), /larger than 64 MiB/);
    await expectRefusedUnwritten("x".repeat(50 * 1024 * 1024), /not JSON/);
    const tooMany = JSON.stringify({
      ...base(),
      entries: Array.from({ length: 200_001 }, (_, i) => ({ id: i + 1 })),
    });
    await expectRefusedUnwritten(tooMany, /more than 200000 entries/);
  });

  test("a file that tries to carry keys or settings: documents outside the export's set are refused", async () => {
    for (const name of [API_KEYS_DOC, "app.remote", "engine.userTools", "__proto__", "constructor"])
      await expectRefusedUnwritten(
        `{"format":"${EXPORT_FORMAT}","version":1,"exportedAt":0,"entries":[],"documents":{${JSON.stringify(name)}:{"anthropic":"sk-ant-x0123456789"}}}`,
        /unknown document/,
      );
  });
});

describe("imported inert", () => {
  test("a 50 MB export (one long message) imports whole, as text", async () => {
    const long = "a line of a long message\n".repeat(2 * 1024 * 1024); // 52 MB
    const file = withEntries([{ id: 1, kind: "pi.user", model: [{ role: "user", content: long }] }]);
    expect(file.length).toBeGreaterThan(50 * 1024 * 1024);
    const id = await engine.tab.conversations.import(file);
    const entries = await engine.tab.watches.entries(id);
    expect(entries).toHaveLength(1);
    expect(entryText(entries[0]!)).toBe(long);
  });

  test("a key-shaped string is a message's text: no key is saved, the list shows no key", async () => {
    const key = "sk-ant-api03-IMPORTEDkeyShaped0123456789";
    const keysBefore = await engine.harness.doc(SETTINGS_CONVERSATION, API_KEYS_DOC);
    const id = await engine.tab.conversations.import(
      JSON.stringify({
        ...base(),
        entries: [{ id: 1, kind: "pi.user", model: [{ role: "user", content: `my key ${key}` }] }],
        documents: { [TITLE_DOC]: { title: `key ${key}` }, "pi.agent": { apiKey: key } },
      }),
    );
    expect(await engine.harness.doc(SETTINGS_CONVERSATION, API_KEYS_DOC)).toEqual(keysBefore);
    expect(await engine.tab.keys.list()).toEqual([]);
    expect(entryText((await engine.tab.watches.entries(id))[0]!)).toBe(`my key ${key}`);
    // Once that string is saved as a key, the imported title no longer shows it.
    await engine.tab.keys.set("anthropic", key);
    const title = (await engine.tab.conversations.list()).find((c) => c.id === id)!.title;
    expect(title).toBe("key [redacted]");
    await engine.tab.keys.set("anthropic", null);
  });

  test("scripts and HTML in messages, titles and data are stored as text and rendered inert", async () => {
    const hostile = [
      "<script>alert(1)</script>",
      '<img src=x onerror="alert(2)">',
      "<iframe src=javascript:alert(3)></iframe>",
      "[click](javascript:alert(4))",
      "![x](javascript:alert(5))",
      '<a href="javascript:alert(6)">a</a>',
      "<svg onload=alert(7)>",
      "<style>body{display:none}</style>",
      "</p><p onclick=alert(8)>",
    ].join("\n\n");
    const id = await engine.tab.conversations.import(
      JSON.stringify({
        ...base(),
        entries: [
          { id: 1, kind: "pi.user", model: [{ role: "user", content: hostile }] },
          {
            id: 2,
            kind: "pi.assistant",
            data: { html: hostile },
            model: [{ role: "assistant", content: [{ type: "text", text: hostile }] }],
          },
        ],
        documents: { [TITLE_DOC]: { title: "<script>alert('title')</script>" } },
      }),
    );
    const entries = await engine.tab.watches.entries(id);
    for (const entry of entries) {
      const text = entryText(entry);
      expect(text).toBe(hostile);
      const html = markdownToHtml(text);
      expect(html).not.toMatch(/<(script|img|iframe|svg|style)\b/i);
      expect(html).not.toMatch(/<[^>]*\son\w+\s*=/i);
      expect(html).not.toMatch(/href="\s*javascript:/i);
    }
    expect((await engine.tab.conversations.list()).find((c) => c.id === id)!.title).toBe(
      "<script>alert('title')</script>",
    );
  });

  test("the tab's markdown renderer keeps generated HTML inert (2,000 generated mixtures)", () => {
    const pieces = fc.constantFrom(
      "<script>",
      "</script>",
      "<img src=x onerror=alert(1)>",
      "<a href='javascript:x'>",
      "[l](javascript:x)",
      "![i](data:text/html,x)",
      "<svg/onload=x>",
      "`code`",
      "```\n",
      "\n\n",
      "**b**",
      "<!--",
      "-->",
      "&lt;",
      "<",
      ">",
      '"',
      " on",
      "click=",
      "\u0000",
      "\u2028",
    );
    fc.assert(
      fc.property(fc.array(fc.oneof(pieces, fc.string({ maxLength: 5 })), { maxLength: 30 }), (parts) => {
        const html = markdownToHtml(parts.join(""));
        expect(html).not.toMatch(/<(script|img|iframe|svg|style)\b/i);
        expect(html).not.toMatch(/<[^>]*\son\w+\s*=/i);
        expect(html).not.toMatch(/href="\s*(javascript|data):/i);
      }),
      { numRuns: 2000, seed: 28_35 },
    );
  });
});
