/**
 * Attachments on the server home (issue 31 part 3, decision 0016): a tab attaches files to a server
 * conversation at the browser's limits. Over the socket a call longer than one frame goes in parts
 * (worker/protocol/server-socket.ts `messageFrames`, joined by worker/server/socket.ts), and the
 * space stores an entry or a submission over a Durable Object's row limit with its long strings out
 * of line (worker/core/spill.ts). Shown in workerd: three images of 5 MB (the largest an image may
 * be; 15 MB in one input) reach the model's request whole, stay whole across a kill of workerd, are
 * read by a fork and carried by an export and its import (in parts); and a broken run of parts is
 * refused `bad-parts` with nothing stored.
 */
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { ATTACHMENT_LIMITS } from "../../worker/protocol/attachments.ts";
import { type ServerWorker, startServerWorker } from "./miniflare.ts";
import { SocketTab } from "./socket-tab.ts";

/** As the test worker's vision model computes it (tests/server/worker/space-entry.ts). */
function fingerprint(text: string): string {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193) >>> 0;
  return h.toString(16).padStart(8, "0");
}

let server: ServerWorker;

beforeAll(async () => {
  server = await startServerWorker({ entry: "space-entry.ts", objects: { SPACES: "TestSpace" } });
});

afterAll(async () => {
  await server?.stop();
});

const tabs: SocketTab[] = [];
afterAll(async () => {
  await Promise.all(tabs.map((t) => t.close()));
});

async function tabOn(space: string): Promise<SocketTab> {
  const url = new URL(`/space/${space}/socket`, server.url());
  url.protocol = "ws:";
  const tab = await SocketTab.open(url, {
    protocols: ["durable-harness.v1", `token.${server.token(space)}`],
  });
  tabs.push(tab);
  await tab.hello(`tab-${tabs.length}`);
  return tab;
}

interface Block {
  type: string;
  text?: string;
  data?: string;
  mimeType?: string;
}
interface Entry {
  id: number;
  kind: string;
  model?: Array<{ content: string | Block[] }>;
}
type Frame = { value: { entries: Entry[] } } | { ops: Array<{ op: string; entries?: Entry[] }> };

function entriesOf(frames: readonly unknown[]): Entry[] {
  let entries: Entry[] = [];
  for (const frame of frames as Frame[]) {
    if ("value" in frame) entries = [...frame.value.entries];
    else for (const op of frame.ops) if (op.op === "append" && op.entries) entries.push(...op.entries);
  }
  return entries;
}

const blocksOf = (entry: Entry | undefined): Block[] =>
  (entry?.model ?? []).flatMap((m) => (typeof m.content === "string" ? [] : m.content));
const answerOf = (entries: readonly Entry[]) =>
  blocksOf(entries.findLast((e) => e.kind === "pi.assistant"))
    .map((b) => b.text ?? "")
    .join("");

/** A PNG of exactly `size` bytes (its signature, then bytes that differ per `seed`), as base64. */
function png(size: number, seed: number): string {
  const bytes = new Uint8Array(size);
  bytes.set([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
  let x = seed * 2654435761;
  for (let i = 8; i < size; i++) {
    x = (Math.imul(x, 1103515245) + 12345) >>> 0;
    bytes[i] = x >>> 24;
  }
  return Buffer.from(bytes).toString("base64");
}

async function watchEntries(tab: SocketTab, conversation: number): Promise<() => Entry[]> {
  const watch = await tab.value<number>("watches.conversation", conversation);
  await tab.until(() => (tab.frames.get(watch) ?? []).length >= 1, "the watch's first frame");
  return () => entriesOf(tab.frames.get(watch) ?? []);
}

describe("attachments on a server conversation", () => {
  test("15 MB of images in one input, sent in parts, reach the model whole and survive a kill of workerd", async () => {
    const size = ATTACHMENT_LIMITS.imageBytes;
    const images = [1, 2, 3].map((seed) => png(size, seed));
    const tab = await tabOn("pictures");
    const conversation = await tab.value<number>("conversations.create", "pictures");
    await tab.value("settings.setModel", conversation, { provider: "vision", modelId: "vision-1" });
    const entries = await watchEntries(tab, conversation);
    const text = "x".repeat(300_000); // a long text file beside them: a PDF's text is such a block
    const reply = await tab.callParted("run.submit", conversation, {
      text: "what are these?",
      requestId: "pictures-1",
      attachments: [
        ...images.map((data, i) => ({
          kind: "image",
          name: `picture-${i + 1}.png`,
          mimeType: "image/png",
          size,
          data,
        })),
        { kind: "text", name: "notes.txt", mimeType: "text/plain", size: text.length, text },
      ],
    });
    expect(reply.error).toBeUndefined();
    const expected = `saw 3 images: ${images.map((d) => `image/png ${d.length} ${fingerprint(d)}`).join(", ")}`;
    await tab.until(() => answerOf(entries()).startsWith(expected), "the model's answer", 120_000);
    expect(answerOf(entries())).toMatch(/; text 3\d{5}$/);

    await server.restart();
    const again = await tabOn("pictures");
    const reopened = await watchEntries(again, conversation);
    const user = reopened().find((e) => e.kind === "pi.user");
    const stored = blocksOf(user).filter((b) => b.type === "image");
    expect(stored.map((b) => b.data?.length)).toEqual(images.map((d) => d.length));
    expect(stored.map((b) => fingerprint(b.data ?? ""))).toEqual(images.map(fingerprint));
    expect(blocksOf(user).some((b) => b.text?.endsWith(text))).toBe(true);
    expect(answerOf(reopened())).toBe(answerOf(entries()));

    // A fork at the input reads it without a copy; an export carries the bytes, and its import (a
    // call of ~21 million characters, in parts) makes a copy whose images are the same.
    const imagesOf = async (id: number) =>
      blocksOf((await watchEntries(again, id))().find((e) => e.kind === "pi.user"))
        .filter((b) => b.type === "image")
        .map((b) => fingerprint(b.data ?? ""));
    const fork = await again.value<number>("conversations.fork", conversation, user!.id);
    expect(await imagesOf(fork)).toEqual(images.map(fingerprint));
    const exported = await again.value<{ text: string }>("conversations.export", conversation);
    expect(exported.text.length).toBeGreaterThan(20_000_000);
    const imported = await again.callParted("conversations.import", exported.text);
    expect(imported.error).toBeUndefined();
    expect(await imagesOf(imported.value as number)).toEqual(images.map(fingerprint));
  }, 300_000);

  test("a broken run of parts is refused bad-parts, and nothing is stored", async () => {
    const tab = await tabOn("broken");
    const conversation = await tab.value<number>("conversations.create", "broken");
    const files = ["a", "b", "c"].map((n) => ({
      kind: "text",
      name: `${n}.txt`,
      mimeType: "text/plain",
      size: 400_000,
      text: n.repeat(400_000),
    }));
    const call = (id: number) =>
      JSON.stringify({
        id,
        method: "run.submit",
        args: [conversation, { text: "read these", requestId: `broken-${id}`, attachments: files }],
      });
    const part = (id: number, index: number, count: number, text: string) =>
      JSON.stringify({ part: { call: id, index, count }, text });
    const refusal = (id: number) => tab.replies.find((r) => r.id === id)?.error;
    const whole = call(901);
    const half = Math.ceil(whole.length / 3);
    const slices = [whole.slice(0, half), whole.slice(half, 2 * half), whole.slice(2 * half)];
    // A part missing (0, then 2).
    tab.send(part(901, 0, 3, slices[0]!));
    tab.send(part(901, 2, 3, slices[2]!));
    await tab.until(() => refusal(901) !== undefined, "the refusal of a missing part");
    expect(refusal(901)).toMatchObject({ name: "BadRequest", code: "bad-parts" });
    // A part repeated (0, 1, 1).
    tab.send(part(902, 0, 3, slices[0]!.replace("901", "902")));
    tab.send(part(902, 1, 3, slices[1]!));
    tab.send(part(902, 1, 3, slices[1]!));
    await tab.until(() => refusal(902) !== undefined, "the refusal of a repeated part");
    expect(refusal(902)).toMatchObject({ code: "bad-parts" });
    // Another frame between two parts ends the run.
    tab.send(part(903, 0, 3, slices[0]!.replace("901", "903")));
    expect(await tab.value("conversations.list")).toHaveLength(2);
    expect(refusal(903)).toMatchObject({ code: "bad-parts" });
    // Nothing was stored: no entry.
    const entries = await watchEntries(tab, conversation);
    expect(entries()).toEqual([]);
    // The whole call in parts, as a tab sends it, is taken: one input, its files whole.
    const taken = await tab.callParted("run.submit", conversation, {
      text: "read these",
      requestId: "whole",
      attachments: files,
    });
    expect(taken.error).toBeUndefined();
    await tab.until(() => entries().some((e) => e.kind === "pi.user"), "the input stored");
    const users = entries().filter((e) => e.kind === "pi.user");
    expect(users).toHaveLength(1);
    expect(blocksOf(users[0]).filter((b) => b.text?.endsWith("c".repeat(400_000)))).toHaveLength(1);
  }, 120_000);
});
