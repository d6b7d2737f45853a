/**
 * The tab's judgement of a file before it is read (src/lib/attachments.ts), and its reads: images of
 * the four types within 5 MB, text-like files by type or extension, PDFs, each within its limit;
 * anything else refused in words naming the file and the limit or the kind. A text file is read as
 * UTF-8 and refused when it is binary; bytes become base64 in slices, the same as Node's.
 */
import { describe, expect, test } from "vitest";
import { FileRefused, judgeFile, readAttachment, toBase64 } from "../../../src/lib/attachments.ts";
import { ATTACHMENT_LIMITS } from "../../../worker/protocol/index.ts";

const MB = 1024 * 1024;

describe("judgeFile", () => {
  test("images of the four types within their limit; others refused in words", () => {
    expect(judgeFile({ name: "a.png", type: "image/png", size: 10 })).toEqual({
      kind: "image",
      mimeType: "image/png",
    });
    expect(judgeFile({ name: "a.JPG", type: "", size: 10 })).toEqual({
      kind: "image",
      mimeType: "image/jpeg",
    });
    expect(judgeFile({ name: "big.png", type: "image/png", size: 6 * MB })).toEqual({
      refused: '"big.png" is 6.0 MB: an image can be at most 5.0 MB',
    });
    expect(judgeFile({ name: "a.svg", type: "image/svg+xml", size: 10 })).toMatchObject({
      refused: expect.stringMatching(/only PNG, JPEG, GIF and WebP/),
    });
  });

  test("text-like files by type or extension, PDFs, within 20 MB; unknown binaries refused", () => {
    expect(judgeFile({ name: "notes.md", type: "", size: 10 })).toEqual({
      kind: "text",
      mimeType: "text/plain",
    });
    expect(judgeFile({ name: "data.csv", type: "text/csv", size: 10 })).toEqual({
      kind: "text",
      mimeType: "text/csv",
    });
    expect(judgeFile({ name: "x.json", type: "application/json", size: 10 })).toEqual({
      kind: "text",
      mimeType: "application/json",
    });
    expect(judgeFile({ name: "main.rs", type: "", size: 10 })).toMatchObject({ kind: "text" });
    expect(judgeFile({ name: "paper.pdf", type: "application/pdf", size: 10 })).toEqual({ kind: "pdf" });
    expect(
      judgeFile({ name: "paper.pdf", type: "application/pdf", size: ATTACHMENT_LIMITS.fileBytes + 1 }),
    ).toEqual({
      refused: '"paper.pdf" is 20.0 MB: a file can be at most 20.0 MB',
    });
    expect(judgeFile({ name: "tool.exe", type: "application/octet-stream", size: 10 })).toEqual({
      refused:
        '"tool.exe" is a kind of file this app cannot read (application/octet-stream): attach images, PDFs or text files',
    });
  });
});

test("bytes become the same base64 as Node's, across slice boundaries", () => {
  const bytes = Uint8Array.from({ length: 0x8000 * 2 + 7 }, (_, i) => (i * 31) & 0xff);
  expect(toBase64(bytes)).toBe(Buffer.from(bytes).toString("base64"));
});

describe("readAttachment", () => {
  test("a text file is read as its text; a binary one is refused in words", async () => {
    const notes = new File(["# hi\nthere"], "notes.md", { type: "text/markdown" });
    expect(await readAttachment(notes, { kind: "text", mimeType: "text/markdown" })).toEqual({
      kind: "text",
      name: "notes.md",
      mimeType: "text/markdown",
      size: 10,
      text: "# hi\nthere",
    });
    const binary = new File([new Uint8Array([0x61, 0, 0x62])], "x.txt", { type: "text/plain" });
    await expect(readAttachment(binary, { kind: "text", mimeType: "text/plain" })).rejects.toThrow(
      FileRefused,
    );
    const latin1 = new File([new Uint8Array([0xe9, 0x74, 0xe9])], "y.txt", { type: "text/plain" });
    await expect(readAttachment(latin1, { kind: "text", mimeType: "text/plain" })).rejects.toThrow(
      /not UTF-8/,
    );
  });

  test("an image is read as its bytes in base64", async () => {
    const png = new File([new Uint8Array([0x89, 0x50, 0x4e, 0x47])], "a.png", { type: "image/png" });
    expect(await readAttachment(png, { kind: "image", mimeType: "image/png" })).toEqual({
      kind: "image",
      name: "a.png",
      mimeType: "image/png",
      size: 4,
      data: "iVBORw==",
    });
  });
});
