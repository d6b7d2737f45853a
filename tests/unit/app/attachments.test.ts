/**
 * Attachments (issue 31 part 3; worker/app/attachments.ts, worker/protocol/attachments.ts): an
 * input's image goes to the model as image content and a text file as text with its name; the bytes
 * live once, in the input's entry, so a fork reads them without a copy and deleting the last
 * conversation that holds them frees them; export and import carry them, and import refuses a
 * damaged one; a file the engine will not take (an image for a text-only model, a renamed file,
 * damaged data, too many) is refused in words and nothing is stored. The attach-and-send commit is
 * swept over every crash point: a store holds the input with its files whole, or none of it.
 */
import type { ImageContent, Message, TextContent } from "@mariozechner/pi-ai";
import { afterAll, describe, expect, test } from "vitest";
import { configure } from "../../../worker/agent/conversation/handles.ts";
import { AgentHarness } from "../../../worker/agent/harness.ts";
import { createModelResolver } from "../../../worker/agent/models/resolver.ts";
import { AttachmentRefused } from "../../../worker/app/attachments.ts";
import { resendAsFork, submitWithTitle } from "../../../worker/app/intents.ts";
import {
  exportConversation,
  ImportRefused,
  importConversation,
  parseExport,
} from "../../../worker/app/transfer.ts";
import type { ConversationId } from "../../../worker/core/types.ts";
import type { MemoryStore } from "../../../worker/index.ts";
import type { AttachmentDraft } from "../../../worker/protocol/index.ts";
import type { MemoryImage } from "../../../worker/store/open.ts";
import {
  CRASH_MODES,
  CRASH_SWEEP_TEST_TIMEOUT_MS,
  type CrashScenario,
  crashSweep,
  fauxAgentModel,
  memoryStore,
} from "../../../worker/testing.ts";
import { echo } from "../agent/fixtures.ts";

const faux = fauxAgentModel(echo);
afterAll(() => faux.unregister());
/** The same faux provider, and a copy of its model that reads text only. */
const TEXT_ONLY = {
  ...faux.model,
  id: "faux-text-only",
  name: "Faux Text Only",
  input: ["text"] as ("text" | "image")[],
};
const models = createModelResolver({ extra: [faux.model, TEXT_ONLY] });
const options = { models, defaultModel: faux.ref };
const OWNERLESS = { ownership: { kind: "ownerless" } } as const;

// A 1x1 PNG; its base64 is unique in the store, so counting rows that hold it counts its copies.
const PNG =
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";
const PNG_SIZE = Buffer.from(PNG, "base64").length;
const IMAGE: AttachmentDraft = {
  kind: "image",
  name: "dot.png",
  mimeType: "image/png",
  size: PNG_SIZE,
  data: PNG,
};
const NOTES: AttachmentDraft = {
  kind: "text",
  name: "notes.md",
  mimeType: "text/markdown",
  size: 23,
  text: "# Notes\nthe owl is blue",
};
const PDF: AttachmentDraft = {
  kind: "pdf",
  name: "paper.pdf",
  size: 900,
  pages: 2,
  text: "page one\n\npage two",
};

async function harness(store?: MemoryStore) {
  const s = store ?? (await memoryStore());
  const h = await AgentHarness.open(s, options);
  await h.root();
  return { h, store: s };
}

const userBlocks = async (h: AgentHarness, c: ConversationId) => {
  const entry = (await h.requireConversation(c).entries()).find((e) => e.kind === "pi.user");
  const message = (entry?.model as unknown as Message[] | undefined)?.[0];
  return {
    entry,
    blocks: (message?.role === "user" ? message.content : []) as (TextContent | ImageContent)[],
  };
};

/** Rows of the store whose text holds the image's base64 (an entry, a submission, a document). */
const rowsHolding = (store: MemoryStore, needle: string) =>
  store.read(async (sql) => {
    let n = 0;
    for (const [table, column] of [
      ["entries", "body"],
      ["submissions", "body"],
      ["documents", "value"],
      ["doc_history", "value"],
      ["doc_patches", "op"],
      ["tasks", "input"],
      ["tasks", "state"],
      ["tasks", "memos"],
    ] as const)
      n += Number(
        (await sql.get(`SELECT count(*) AS n FROM ${table} WHERE instr(${column}, ?) > 0`, [needle]))?.["n"],
      );
    return n;
  });

test("an image goes to the model as image content, a text file and a PDF's text as text with their names", async () => {
  const { h } = await harness();
  const sent = faux.requests.length;
  await submitWithTitle(h, 1, {
    text: "what is in these?",
    attachments: [IMAGE, NOTES, PDF],
    requestId: "a-1",
  });
  await h.waitForIdle();
  const request = faux.requests[sent]!;
  const user = request.messages.find((m) => m.role === "user")!;
  const content = user.content as (TextContent | ImageContent)[];
  expect(content.map((b) => b.type)).toEqual(["text", "image", "text", "text"]);
  expect(content[0]).toEqual({ type: "text", text: "what is in these?" });
  expect(content[1]).toMatchObject({ type: "image", data: PNG, mimeType: "image/png" });
  expect((content[2] as TextContent).text).toBe(
    'Attached file "notes.md" (text/markdown, 23 bytes):\n\n# Notes\nthe owl is blue',
  );
  expect((content[3] as TextContent).text).toBe(
    'Attached PDF "paper.pdf" (2 pages, 900 bytes; its text):\n\npage one\n\npage two',
  );
  // The transcript's marks name each file.
  const { blocks } = await userBlocks(h, 1);
  expect(blocks.map((b) => (b as { attachment?: { name: string } }).attachment?.name)).toEqual([
    undefined,
    "dot.png",
    "notes.md",
    "paper.pdf",
  ]);
  await h.close();
});

test("files sent without words title the conversation by the first file", async () => {
  const { h } = await harness();
  const c = await h.createConversation(OWNERLESS);
  await submitWithTitle(h, c.id, { text: "", attachments: [NOTES] });
  await h.waitForIdle();
  expect(await h.doc(c.id, "app.title")).toEqual({ title: "notes.md" });
  await h.close();
});

test("a fork reads its parent's attachment without a copy; deleting frees the bytes only when nothing holds them", async () => {
  const { h, store } = await harness();
  const parent = await h.createConversation(OWNERLESS);
  await submitWithTitle(h, parent.id, { text: "look", attachments: [IMAGE] });
  await h.waitForIdle();
  expect(await rowsHolding(store, PNG)).toBe(1);
  const answer = (await h.requireConversation(parent.id).entries()).at(-1)!;
  const fork = await h.forkConversation(parent.id, answer.id, OWNERLESS);
  // The fork sees the same entry (same id) and the image is still stored once.
  const inParent = await userBlocks(h, parent.id);
  const inFork = await userBlocks(h, fork.id);
  expect(inFork.entry?.id).toBe(inParent.entry?.id);
  expect(inFork.blocks[1]).toMatchObject({ type: "image", data: PNG });
  expect(await rowsHolding(store, PNG)).toBe(1);
  // The fork's own run sees the image too.
  const sent = faux.requests.length;
  await submitWithTitle(h, fork.id, { text: "and now?" });
  await h.waitForIdle();
  const firstUser = faux.requests[sent]!.messages.find((m) => m.role === "user")!;
  expect(JSON.stringify(firstUser.content)).toContain(PNG);
  // Deleting the fork leaves the parent's bytes; deleting the parent then frees them.
  await h.deleteConversation(fork.id);
  expect(await rowsHolding(store, PNG)).toBe(1);
  await h.deleteConversation(parent.id);
  expect(await rowsHolding(store, PNG)).toBe(0);
  await h.close();
});

test("export and import carry an attachment intact; a damaged one in a file is refused and nothing is written", async () => {
  const { h } = await harness();
  await submitWithTitle(h, 1, { text: "keep this", attachments: [IMAGE, PDF] });
  await h.waitForIdle();
  const text = await exportConversation(h, 1, { documents: [], secrets: [] });
  const id = await importConversation(h, parseExport(text, { documents: [] }));
  const original = await userBlocks(h, 1);
  const copy = await userBlocks(h, id);
  expect(copy.blocks).toEqual(original.blocks);
  expect(copy.blocks[1]).toMatchObject({
    type: "image",
    data: PNG,
    attachment: { name: "dot.png", size: PNG_SIZE },
  });

  const conversations = h.conversationRecords().length;
  const damaged = (change: (block: Record<string, unknown>) => void) => {
    const file = JSON.parse(text);
    const user = file.entries.find((e: { kind: string }) => e.kind === "pi.user");
    change(user.model[0].content[1]);
    return JSON.stringify(file);
  };
  for (const [what, change] of [
    ["not base64", (b: Record<string, unknown>) => (b["data"] = "not base64!")],
    [
      "a size that is not its data's",
      (b: Record<string, unknown>) => (b["attachment"] = { kind: "image", name: "dot.png", size: 5 }),
    ],
    ["a type an input cannot carry", (b: Record<string, unknown>) => (b["mimeType"] = "image/svg+xml")],
    ["a malformed mark", (b: Record<string, unknown>) => (b["attachment"] = { kind: "movie" })],
  ] as const) {
    expect(() => parseExport(damaged(change), { documents: [] }), what).toThrow(ImportRefused);
  }
  expect(h.conversationRecords().length).toBe(conversations);
  await h.close();
});

test("a saved secret in an attached file's text is redacted from the export like any message's", async () => {
  const { h } = await harness();
  const secret = "sk-attached-0123456789abcdef";
  await submitWithTitle(h, 1, { text: "my config", attachments: [{ ...NOTES, text: `key=${secret}` }] });
  await h.waitForIdle();
  const text = await exportConversation(h, 1, { documents: [], secrets: [secret] });
  expect(text).not.toContain(secret);
  expect(text).toContain("key=[redacted]");
  await h.close();
});

describe("edit and resend keeps the message's files", () => {
  /** A conversation whose second input carries the three files; returns its entries' ids. */
  async function twoQuestions(h: AgentHarness) {
    const c = await h.createConversation(OWNERLESS);
    await submitWithTitle(h, c.id, { text: "hello" });
    await h.waitForIdle();
    await submitWithTitle(h, c.id, { text: "what is in these?", attachments: [IMAGE, NOTES, PDF] });
    await h.waitForIdle();
    const users = (await h.requireConversation(c.id).entries()).filter((e) => e.kind === "pi.user");
    return { c: c.id, first: users[0]!.id, second: users[1]!.id };
  }
  const names = (blocks: readonly unknown[]) =>
    blocks.map((b) => (b as { attachment?: { name: string } }).attachment?.name ?? "(text)");
  const lastUser = async (h: AgentHarness, c: ConversationId) => {
    const entry = (await h.requireConversation(c).entries()).filter((e) => e.kind === "pi.user").at(-1);
    const message = (entry?.model as unknown as Message[] | undefined)?.[0];
    return (message?.role === "user" ? message.content : []) as (TextContent | ImageContent)[];
  };

  test("the edited text goes with every file, and the model's request carries them", async () => {
    const { h } = await harness();
    const { c, second } = await twoQuestions(h);
    const sent = faux.requests.length;
    const fork = await resendAsFork(h, c, second, "and what about these?");
    await h.waitForIdle();
    const blocks = await lastUser(h, fork);
    expect(names(blocks)).toEqual(["(text)", "dot.png", "notes.md", "paper.pdf"]);
    expect(blocks[0]).toEqual({ type: "text", text: "and what about these?" });
    const user = faux.requests[sent]!.messages.filter((m) => m.role === "user").at(-1)!;
    expect(JSON.stringify(user.content)).toContain(PNG);
    expect(JSON.stringify(user.content)).toContain("the owl is blue");
    expect(JSON.stringify(user.content)).toContain("page two");
    await h.close();
  });

  test("`keep` chooses the files by index; [] drops them all; a file alone may be resent without words", async () => {
    const { h } = await harness();
    const { c, first, second } = await twoQuestions(h);
    const some = await resendAsFork(h, c, second, "only two", [2, 0]);
    await h.waitForIdle();
    expect(names(await lastUser(h, some))).toEqual(["(text)", "paper.pdf", "dot.png"]);
    const none = await resendAsFork(h, c, second, "no files", []);
    await h.waitForIdle();
    expect(await lastUser(h, none)).toEqual("no files");
    const wordless = await resendAsFork(h, c, second, "  ", [1]);
    await h.waitForIdle();
    expect(names(await lastUser(h, wordless))).toEqual(["notes.md"]);
    // The first message (no files) resent in a new conversation: text only, as before.
    const fresh = await resendAsFork(h, c, first, "hi again");
    await h.waitForIdle();
    expect(await lastUser(h, fresh)).toEqual("hi again");
    await h.close();
  });

  test("a file the message does not have, nothing to send, or an image for a text-only model writes nothing", async () => {
    const { h } = await harness();
    const { c, first, second } = await twoQuestions(h);
    const before = h.conversationRecords().length;
    await expect(resendAsFork(h, c, second, "x", [3])).rejects.toThrow(
      /has 3 attached files; there is no file 3/,
    );
    await expect(resendAsFork(h, c, first, "x", [0])).rejects.toThrow(/has 0 attached files/);
    await expect(resendAsFork(h, c, second, " ", [])).rejects.toThrow(TypeError);
    await expect(resendAsFork(h, c, 9999, "x")).rejects.toMatchObject({ name: "EntryNotVisible" });
    expect(h.conversationRecords().length).toBe(before);
    // A first message resent goes to a new conversation with the source's model as it is now: when
    // that model reads text only, the image is refused in words, and without it the rest goes.
    const solo = await h.createConversation(OWNERLESS);
    await submitWithTitle(h, solo.id, { text: "see", attachments: [IMAGE, NOTES] });
    await h.waitForIdle();
    const [message] = (await h.requireConversation(solo.id).entries()).filter((e) => e.kind === "pi.user");
    await h.transaction((tx) =>
      configure(tx, solo.id, { model: { provider: TEXT_ONLY.provider, modelId: TEXT_ONLY.id } }),
    );
    const count = h.conversationRecords().length;
    const refusal = await resendAsFork(h, solo.id, message!.id, "again").catch((e: unknown) => e);
    expect(refusal).toBeInstanceOf(AttachmentRefused);
    expect((refusal as Error).message).toMatch(
      /Faux Text Only reads text only, so it cannot see the image "dot.png"/,
    );
    expect(h.conversationRecords().length).toBe(count);
    const ok = await resendAsFork(h, solo.id, message!.id, "again", [1]);
    await h.waitForIdle();
    expect(names(await lastUser(h, ok))).toEqual(["(text)", "notes.md"]);
    await h.close();
  });
});

describe("refused in words before anything is stored", () => {
  const cases: [string, AttachmentDraft[], RegExp, string?][] = [
    ["an image for a text-only model", [IMAGE], /Faux Text Only reads text only.*"dot\.png"/, "text-only"],
    [
      "a file whose bytes are not its type's",
      [{ ...IMAGE, mimeType: "image/jpeg" }],
      /not the image\/jpeg image/,
    ],
    ["damaged base64", [{ ...IMAGE, data: `${PNG.slice(0, -4)}!!!!` }], /did not arrive whole/],
    ["a size its data does not have", [{ ...IMAGE, size: PNG_SIZE + 3 }], /did not arrive whole/],
    ["binary data as text", [{ ...NOTES, text: "a\u0000b" }], /not text/],
    ["too many files", Array.from({ length: 9 }, () => NOTES), /at most 8/],
  ];
  for (const [what, attachments, words, model] of cases)
    test(`${what}`, async () => {
      const { h, store } = await harness();
      const c = await h.createConversation({
        ...OWNERLESS,
        ...(model ? { agent: { model: { provider: TEXT_ONLY.provider, modelId: TEXT_ONLY.id } } } : {}),
      });
      const before = await store.read(async (sql) => [
        await sql.all("SELECT id FROM entries"),
        await sql.all("SELECT id FROM submissions"),
        await sql.all("SELECT conversation_id, name FROM documents"),
      ]);
      const refusal = await submitWithTitle(h, c.id, { text: "see", attachments }).catch((e: unknown) => e);
      expect(refusal).toBeInstanceOf(AttachmentRefused);
      expect((refusal as Error).message).toMatch(words);
      expect((refusal as AttachmentRefused).code).toMatch(/^attachment_refused:/);
      const after = await store.read(async (sql) => [
        await sql.all("SELECT id FROM entries"),
        await sql.all("SELECT id FROM submissions"),
        await sql.all("SELECT conversation_id, name FROM documents"),
      ]);
      expect(after).toEqual(before);
      await h.close();
    });
});

describe("the attach-and-send commit, swept over every crash point", () => {
  /** What a look at the store found: the input with its files whole, none of it, or a part. */
  type Found = "none" | "whole" | "part";
  const look = async (h: AgentHarness): Promise<Found> => {
    const { entry, blocks } = await userBlocks(h, 1);
    if (!entry) return "none";
    const image = blocks[2] as ImageContent | undefined;
    return blocks.length === 3 && image?.type === "image" && image.data === PNG ? "whole" : "part";
  };
  let seeded: MemoryImage | undefined;
  const scenario = async (): Promise<CrashScenario<AgentHarness, { seen: Found[] }, Found>> => {
    const image: MemoryImage =
      seeded ??
      (await (async () => {
        const { h, store } = await harness();
        await h.close();
        return store.image();
      })());
    seeded = image;
    return {
      name: "attach and send",
      image,
      services: () => ({ seen: [] }),
      open: (store, _services, engine) => AgentHarness.open(store, { ...options, ...engine }),
      finish: async (h, run) => {
        const at = await look(h);
        run.seen.push(at);
        // Like a client: sent again with the same request id unless the store holds it.
        if (at !== "whole")
          await submitWithTitle(h, 1, { text: "look", attachments: [NOTES, IMAGE], requestId: "swept" });
        await h.waitForIdle();
        return look(h);
      },
    };
  };
  for (const mode of CRASH_MODES)
    test(`attach and send (${mode.name})`, { timeout: CRASH_SWEEP_TEST_TIMEOUT_MS }, async () => {
      const seen: Found[] = [];
      await crashSweep(await scenario(), {
        mode,
        check: ({ services, result, label }) => {
          expect(result, label).toBe("whole");
          seen.push(...services.seen);
        },
      });
      // Never a part of the input; the sweep cut both before and after its commit.
      expect(seen.filter((f) => f === "part")).toEqual([]);
      expect(new Set(seen)).toEqual(new Set(["none", "whole"]));
    });
});
