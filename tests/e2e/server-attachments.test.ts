/**
 * Attachments on a server conversation as a person uses them (issue 31 part 3, decision 0016), in
 * real Chromium against a real local server (workerd through miniflare, the test worker's space
 * with its scripted vision model, tests/server/worker/space-entry.ts): the composer states the same
 * limits as in a browser conversation, and a 5 MB image (the largest an image may be; 6.7 million
 * characters of base64, beyond one socket frame) picked in a server conversation goes over the
 * socket in parts, reaches the model's request whole (it answers the image's length and
 * fingerprint) and shows as a thumbnail.
 */
import { afterAll, beforeAll, expect, test } from "vitest";
import { ATTACHMENT_LIMITS, LIMITS_IN_WORDS } from "../../worker/protocol/attachments.ts";
import { type ServerWorker, startServerWorker } from "../server/miniflare.ts";
import { appSuite, say, settled, shot, until } from "./page.ts";

const app = appSuite({ logTail: 120 });
let server: ServerWorker;

beforeAll(async () => {
  server = await startServerWorker({ entry: "space-entry.ts", objects: { SPACES: "TestSpace" } });
}, 120_000);
afterAll(async () => {
  await server?.stop();
});

/** As the test worker's vision model computes it. */
function fingerprint(text: string): string {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193) >>> 0;
  return h.toString(16).padStart(8, "0");
}

/** A real 1x1 PNG, padded after its end to exactly `size` bytes (browsers ignore what follows IEND). */
function png(size: number): Buffer {
  const dot = Buffer.from(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==",
    "base64",
  );
  const bytes = Buffer.alloc(size);
  dot.copy(bytes);
  let x = 12345;
  for (let i = dot.length; i < size; i++) {
    x = (Math.imul(x, 1103515245) + 12345) >>> 0;
    bytes[i] = x >>> 24;
  }
  return bytes;
}

test("a server conversation states the browser's limits and takes a 5 MB image to its model", async () => {
  const space = "e2e-attach";
  const page = await app.open({
    label: "server-attach",
    viewport: { width: 1280, height: 800 },
    composer: true,
  });
  await page.getByTestId("open-settings").first().click();
  await page.getByTestId("server-url").fill(server.url().toString());
  await page.getByTestId("server-token").fill(server.token(space));
  await page.getByTestId("server-save").click();
  await until(
    "connected",
    () =>
      page.evaluate(
        () => document.querySelector('[data-testid="server-section"]')?.getAttribute("data-state") ?? "",
      ),
    (s) => s === "connected",
  );
  await page.getByRole("button", { name: "Close settings" }).click();
  await page.getByTestId("server-new").click();
  await page.getByTestId("server-home").waitFor();

  // The same words as a browser conversation's composer.
  const attach = page.getByRole("button", { name: "Attach files" });
  expect(await attach.getAttribute("title")).toContain(LIMITS_IN_WORDS);

  // The scripted model that takes images, chosen in the conversation's settings (the server's models).
  await page.getByTestId("open-settings").first().click();
  await page.getByTestId("model-search").fill("vision-1");
  await page.getByTestId("model-list").getByRole("button", { name: "vision-1" }).click();
  await until(
    "the model chosen",
    () => page.getByTestId("current-model").textContent(),
    (t) => (t ?? "").includes("vision-1"),
  );
  await page.getByRole("button", { name: "Close settings" }).click();

  const image = png(ATTACHMENT_LIMITS.imageBytes);
  const base64 = image.toString("base64");
  await page
    .getByTestId("attach-input")
    .setInputFiles([{ name: "big.png", mimeType: "image/png", buffer: image }]);
  await until(
    "the image read",
    () => page.locator('[data-testid="attachment-chip"][data-status="ready"]').count(),
    (n) => n === 1,
    60_000,
  );
  await say(page, "what is it?");
  await settled(page, 1);
  const answer = await page
    .locator('[data-testid="entries"] > [data-kind="pi.assistant"]')
    .last()
    .textContent();
  expect(answer).toContain(`saw 1 images: image/png ${base64.length} ${fingerprint(base64)}`);
  const thumb = page.locator(
    '[data-testid="entries"] > [data-kind="pi.user"] [data-testid="attached-image"] img',
  );
  await thumb.waitFor();
  expect(await thumb.getAttribute("src")).toBe(`data:image/png;base64,${base64}`);
  await thumb.scrollIntoViewIfNeeded();
  // The bytes decode: the thumbnail is an image, not a broken one.
  await until(
    "the thumbnail decoded",
    () => thumb.evaluate((img) => (img as HTMLImageElement).naturalWidth),
    (w) => w === 1,
  );
  await page.screenshot({ path: shot("server-attach-1280") });
}, 240_000);
