/**
 * Attachments as a person uses them (issue 31 part 3): an image and a PDF attached from the picker
 * show as chips under the input (name, size, the PDF's pages), go to a routed vision model whose
 * request is checked to carry the image's bytes and the PDF's text (extracted in the tab by pdf.js),
 * show in the transcript as a thumbnail and a file, and come back whole after an export and an
 * import. A text-only model is refused in words before anything is stored; an unknown binary file
 * is refused on its chip; a paste and a drop attach files too. Screenshots of the input with chips
 * and of the transcript with the thumbnail at 1280 and 390 px (test-results/screenshots/attach-*).
 * The routed provider (groq, tests/e2e/openai-stream.ts) needs the dedicated engine.
 */
import { readFile } from "node:fs/promises";
import type { Page, Route } from "playwright-core";
import { expect, test } from "vitest";
import { seriousViolations } from "./axe.ts";
import { openAiStream } from "./openai-stream.ts";
import {
  appSuite,
  appUrl,
  entriesOf,
  say,
  settleAnimations,
  settled,
  shot,
  uniqueStore,
  until,
  useRoutedModel,
} from "./page.ts";

const app = appSuite({ logTail: 150 });

const KEY = "gsk-e2e-FAKE-a77ac4ed0b1e2c3d4f5a";
const VISION = { provider: "groq", modelId: "meta-llama/llama-4-scout-17b-16e-instruct" };

// A 1x1 PNG.
const PNG =
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";
const PDF_TEXT = "Barn owls hunt by sound";

/** A one-page PDF whose page says `text` (Helvetica), with a correct cross-reference table. */
function tinyPdf(text: string): Buffer {
  const stream = `BT /F1 18 Tf 20 50 Td (${text}) Tj ET`;
  const objects = [
    "<< /Type /Catalog /Pages 2 0 R >>",
    "<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
    "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 400 100] /Resources << /Font << /F1 4 0 R >> >> /Contents 5 0 R >>",
    "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>",
    `<< /Length ${stream.length} >>\nstream\n${stream}\nendstream`,
  ];
  let out = "%PDF-1.4\n";
  const offsets: number[] = [];
  objects.forEach((o, i) => {
    offsets.push(out.length);
    out += `${i + 1} 0 obj\n${o}\nendobj\n`;
  });
  const xref = out.length;
  out += `xref\n0 ${objects.length + 1}\n0000000000 65535 f \n`;
  for (const o of offsets) out += `${String(o).padStart(10, "0")} 00000 n \n`;
  out += `trailer\n<< /Size ${objects.length + 1} /Root 1 0 R >>\nstartxref\n${xref}\n%%EOF\n`;
  return Buffer.from(out, "latin1");
}

const chips = (page: Page) => page.getByTestId("attachment-chip");
const readyChips = (page: Page) => page.locator('[data-testid="attachment-chip"][data-status="ready"]');

/**
 * Screenshots of the page at 1280 and 390 px wide (light; dark at 390 too), each look checked by
 * axe-core in `selector`; back at 1280 light after.
 */
async function looks(page: Page, name: string, selector: string, focus: () => Promise<void>): Promise<void> {
  for (const [scheme, width, height] of [
    ["light", 1280, 800],
    ["light", 390, 844],
    ["dark", 390, 844],
  ] as const) {
    await page.emulateMedia({ colorScheme: scheme });
    await page.setViewportSize({ width, height });
    await settleAnimations(page);
    await focus();
    await page.screenshot({ path: shot(`attach-${name}-${scheme}-${width}`) });
    expect(await seriousViolations(page, selector), `${name} ${scheme} ${width}`).toEqual([]);
  }
  await page.emulateMedia({ colorScheme: null });
  await page.setViewportSize({ width: 1280, height: 800 });
  await settleAnimations(page);
}

test("an image and a PDF go to a vision model, show as a thumbnail and a file, and survive export and import", async () => {
  const page = await app.open({
    url: appUrl(app.server.url, { store: uniqueStore("attach"), engine: "dedicated" }),
    label: "attach",
    viewport: { width: 1280, height: 800 },
    composer: true,
  });
  const bodies: string[] = [];
  await app.browser.context.route("https://api.groq.com/**", (route: Route) => {
    bodies.push(route.request().postData() ?? "");
    return route.fulfill({
      status: 200,
      contentType: "text/event-stream",
      body: openAiStream("A small dot, and a page about owls.", {
        model: VISION.modelId,
        usage: { prompt_tokens: 40, completion_tokens: 9 },
      }),
    });
  });
  await useRoutedModel(page, VISION, KEY);

  await page.getByTestId("attach-input").setInputFiles([
    { name: "dot.png", mimeType: "image/png", buffer: Buffer.from(PNG, "base64") },
    { name: "owls.pdf", mimeType: "application/pdf", buffer: tinyPdf(PDF_TEXT) },
  ]);
  await until(
    "both files read",
    () => readyChips(page).count(),
    (n) => n === 2,
  );
  const words = await chips(page).allTextContents();
  expect(words[0]).toContain("dot.png");
  expect(words[0]).toContain("bytes");
  expect(words[1]).toContain("owls.pdf");
  expect(words[1]).toContain("1 page");
  // Each chip's Remove button is reachable from the keyboard, named after its file.
  await expect(page.getByRole("button", { name: "Remove owls.pdf" }).isVisible()).resolves.toBe(true);
  await looks(page, "input", "form.composer", () => page.getByLabel("message").scrollIntoViewIfNeeded());

  await say(page, "what do you see?");
  await settled(page, 1);
  // The request carried the image's bytes and the PDF's text under its name.
  const body = JSON.parse(bodies.at(-1)!) as { messages: { role: string; content: unknown }[] };
  const user = JSON.stringify(body.messages.find((m) => m.role === "user")?.content);
  expect(user).toContain(`data:image/png;base64,${PNG}`);
  expect(user).toContain("owls.pdf");
  expect(user).toContain("1 page");
  expect(user).toContain(PDF_TEXT);
  // The chips are gone; the transcript shows a thumbnail and the file.
  expect(await chips(page).count()).toBe(0);
  const sent = entriesOf(page, "pi.user").last();
  const thumb = sent.locator('[data-testid="attached-image"] img');
  await thumb.waitFor();
  expect(await thumb.evaluate((img) => (img as HTMLImageElement).naturalWidth)).toBe(1);
  expect(await sent.getByTestId("attached-file").textContent()).toContain("owls.pdf");
  await looks(page, "transcript", '[data-testid="entries"]', () => sent.scrollIntoViewIfNeeded());

  // Exported and imported as a person does it (the Export button's download, the Import picker): the
  // copy opens and shows the same thumbnail and file, bytes intact.
  const [download] = await Promise.all([page.waitForEvent("download"), page.getByTestId("export").click()]);
  const exported = await readFile((await download.path())!, "utf8");
  expect(exported).toContain(PNG);
  expect(exported).toContain(PDF_TEXT);
  expect(exported).not.toContain(KEY);
  const original = await page.evaluate(() => location.hash);
  await page.getByTestId("import-file").setInputFiles({
    name: download.suggestedFilename(),
    mimeType: "application/json",
    buffer: Buffer.from(exported),
  });
  await until(
    "the imported copy open",
    () => page.evaluate(() => location.hash),
    (h) => /^#\/c\/\d+$/.test(h) && h !== original,
  );
  const copied = entriesOf(page, "pi.user").last();
  await copied.locator('[data-testid="attached-image"] img').waitFor();
  expect(await copied.locator('[data-testid="attached-image"] img').getAttribute("src")).toBe(
    `data:image/png;base64,${PNG}`,
  );
  expect(await copied.getByTestId("attached-file").textContent()).toContain("owls.pdf");

  // Edit and resend keeps the message's files: the editor shows them as chips, one is removed, and
  // the fork's message (and the model's request) carries the one kept with the edited words.
  await copied.getByRole("button", { name: "Edit and resend as a fork" }).click();
  const editor = copied.getByTestId("edit-form");
  expect(await editor.getByTestId("attachment-chip").allTextContents()).toEqual([
    expect.stringContaining("dot.png"),
    expect.stringContaining("owls.pdf"),
  ]);
  await looks(page, "edit", '[data-testid="edit-form"]', () => editor.scrollIntoViewIfNeeded());
  await editor.getByRole("button", { name: "Remove owls.pdf" }).click();
  await copied.getByLabel("edited text").fill("only the dot now");
  const asked = bodies.length;
  const copyHash = await page.evaluate(() => location.hash);
  await editor.getByRole("button", { name: "Resend as a fork" }).click();
  await until(
    "the fork open",
    () => page.evaluate(() => location.hash),
    (h) => /^#\/c\/\d+$/.test(h) && h !== copyHash,
  );
  await until(
    "the edited message asked",
    async () => bodies.length,
    (n) => n === asked + 1,
  );
  const resent = entriesOf(page, "pi.user").last();
  await until(
    "the fork's message shown",
    () => resent.locator(".text").first().textContent(),
    (t) => t === "only the dot now",
  );
  await settled(page, 1);
  await resent.locator('[data-testid="attached-image"] img').waitFor();
  expect(await resent.getByTestId("attached-file").count()).toBe(0);
  expect(bodies.length).toBe(asked + 1);
  const again = JSON.parse(bodies.at(-1)!) as { messages: { role: string; content: unknown }[] };
  const resentUser = JSON.stringify(again.messages.filter((m) => m.role === "user").at(-1)?.content);
  expect(resentUser).toContain(`data:image/png;base64,${PNG}`);
  expect(resentUser).toContain("only the dot now");
  expect(resentUser).not.toContain(PDF_TEXT);
});

test("a text-only model and an unknown binary file are refused in words; a paste and a drop attach files", async () => {
  const page = await app.open({
    label: "attach-refused",
    viewport: { width: 1280, height: 800 },
    composer: true,
  });
  // The demo model reads text only.
  await page.getByTestId("attach-input").setInputFiles([
    { name: "dot.png", mimeType: "image/png", buffer: Buffer.from(PNG, "base64") },
    { name: "tool.exe", mimeType: "application/octet-stream", buffer: Buffer.from([0x4d, 0x5a, 0, 1]) },
  ]);
  await until(
    "the image read",
    () => readyChips(page).count(),
    (n) => n === 1,
  );
  const refused = page.locator('[data-testid="attachment-chip"][data-status="refused"]');
  expect(await refused.textContent()).toContain("cannot read");
  await say(page, "look at this");
  const alert = page.locator("form.composer [role=alert]");
  await alert.waitFor();
  expect(await alert.textContent()).toMatch(/reads text only.*dot\.png/);
  // Nothing was stored; the files and the words stay for the person to change.
  expect(await entriesOf(page, "pi.user").count()).toBe(0);
  expect(await readyChips(page).count()).toBe(1);
  expect(await page.getByLabel("message").inputValue()).toBe("look at this");
  await page.getByRole("button", { name: "Remove dot.png" }).click();
  await page.getByRole("button", { name: "Remove tool.exe" }).click();
  expect(await chips(page).count()).toBe(0);

  // A pasted file and a dropped one become chips; the text file goes to the model as text.
  await page.getByLabel("message").evaluate((box) => {
    const data = new DataTransfer();
    data.items.add(new File(["the owl is blue"], "pasted.txt", { type: "text/plain" }));
    box.dispatchEvent(new ClipboardEvent("paste", { clipboardData: data, bubbles: true, cancelable: true }));
  });
  await page.locator("form.composer").evaluate((form) => {
    const data = new DataTransfer();
    data.items.add(new File(["a,b\n1,2\n"], "table.csv", { type: "text/csv" }));
    form.dispatchEvent(new DragEvent("drop", { dataTransfer: data, bubbles: true, cancelable: true }));
  });
  await until(
    "both files read",
    () => readyChips(page).count(),
    (n) => n === 2,
  );
  await page.getByLabel("message").fill("");
  await page.getByRole("button", { name: "Send" }).click();
  await settled(page, 1);
  const sent = entriesOf(page, "pi.user").last();
  expect(await sent.getByTestId("attached-file").count()).toBe(2);
  expect(await sent.getByTestId("attached-file").first().textContent()).toContain("pasted.txt");
});
