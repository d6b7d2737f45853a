/**
 * The door's bounds on attachments (worker/protocol/schema.ts, `run.submit`): an oversized image, a
 * file over its limit, an unknown kind or image type, too many files and a misspelt field are each
 * refused as `BadRequest` `bad-args` before the engine runs anything; a well-formed input reaches it.
 */
import { expect, test } from "vitest";
import { serveConnection } from "../../../worker/protocol/door.ts";
import { ATTACHMENT_LIMITS, MAX_IMAGE_BASE64, PROTOCOL_VERSION } from "../../../worker/protocol/index.ts";
import type { EngineMessage, ReplyMessage } from "../../../worker/protocol/wire.ts";
import { fakeEngine, rawPair } from "./fixtures.ts";

async function greeted() {
  const engine = fakeEngine();
  const [tab, side] = rawPair();
  serveConnection({ transport: side, engine });
  const waiting: ((r: ReplyMessage) => void)[] = [];
  tab.onMessage((m) => {
    const message = m as EngineMessage;
    if ("ok" in message) waiting.shift()?.(message);
  });
  let id = 0;
  const call = (method: string, ...args: unknown[]) =>
    new Promise<ReplyMessage>((resolve) => {
      waiting.push(resolve);
      tab.send({ id: ++id, method, args });
    });
  expect((await call("hello", { tabId: "t", protocol: PROTOCOL_VERSION })).ok).toBe(true);
  return { engine, call };
}

const image = { kind: "image", name: "a.png", mimeType: "image/png", size: 3, data: "iVBO" };
const text = { kind: "text", name: "a.md", mimeType: "text/markdown", size: 3, text: "abc" };
const pdf = { kind: "pdf", name: "a.pdf", size: 300, pages: 1, text: "abc" };

test("attachments over their limits, of unknown kinds or too many are refused at the door; nothing runs", async () => {
  const { engine, call } = await greeted();
  const refused: [string, unknown[]][] = [
    ["an image's data over the limit", [{ ...image, data: "A".repeat(MAX_IMAGE_BASE64 + 4) }]],
    ["an image over its size", [{ ...image, size: ATTACHMENT_LIMITS.imageBytes + 1 }]],
    ["an SVG", [{ ...image, mimeType: "image/svg+xml" }]],
    ["a text file over the file limit", [{ ...text, size: ATTACHMENT_LIMITS.fileBytes + 1 }]],
    ["too much text", [{ ...text, text: "x".repeat(ATTACHMENT_LIMITS.textChars + 1) }]],
    ["a PDF of no pages", [{ ...pdf, pages: 0 }]],
    ["an unknown kind", [{ ...text, kind: "movie" }]],
    ["an unnamed file", [{ ...text, name: "" }]],
    ["a field the door does not know", [{ ...text, path: "/etc/passwd" }]],
    ["too many files", Array.from({ length: ATTACHMENT_LIMITS.files + 1 }, () => text)],
  ];
  for (const [what, attachments] of refused) {
    const reply = await call("run.submit", 1, { text: "hi", attachments });
    expect(reply.ok, what).toBe(false);
    if (!reply.ok) {
      expect(reply.error.name, what).toBe("BadRequest");
      expect(reply.error.code, what).toBe("bad-args");
    }
  }
  expect(engine.log.filter((l) => l.startsWith("run.submit"))).toEqual([]);
  // Within the limits it reaches the engine.
  const attachments = [image, text, pdf, ...Array.from({ length: ATTACHMENT_LIMITS.files - 3 }, () => text)];
  expect((await call("run.submit", 1, { text: "", attachments })).ok).toBe(true);
  expect(engine.log.filter((l) => l.startsWith("run.submit")).length).toBe(1);
});
