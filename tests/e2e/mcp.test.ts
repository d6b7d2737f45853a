/**
 * Tools from an MCP server as a person uses them, in real Chromium with the product's defaults
 * (`approval=1`): the test starts a real MCP server (the SDK's, tests/unit/app/mcp-server.ts) on
 * loopback with a bearer token; the person adds it in Settings (name, address, token), sees its
 * tools listed under its name and the token never shown again; asks the demo model to call
 * `docs_echo`, which waits for approval (MCP tools ask first), approves, and the server's answer
 * comes back. Then the server is stopped: the next call's error is said in words in the answer, a
 * refresh in Settings says the server is not answering, and after a reload the cached tools are
 * still listed. Each look (light and dark, 1280 and 390 px) is screenshotted and checked with axe.
 */
import type { Page } from "playwright-core";
import { afterAll, beforeAll, expect, test } from "vitest";
import { startMcpServer, type TestMcpServer } from "../unit/app/mcp-server.ts";
import { seriousViolations } from "./axe.ts";
import { appSuite, appUrl, eachLook, lastAnswer, say, settled, uniqueStore, waitPhase } from "./page.ts";

const app = appSuite();
const TOKEN = "e2e-mcp-token-0123456789";
let server: TestMcpServer;

beforeAll(async () => {
  server = await startMcpServer({ token: TOKEN });
});
afterAll(async () => {
  await server.stop();
});

const POLL = { timeout: 30_000, interval: 100 };
const request = (page: Page) => page.locator('[data-testid="approval-request"]');
const answerText = async (page: Page) => (await lastAnswer(page).textContent()) ?? "";

async function openSettings(page: Page) {
  await page.getByTestId("open-settings").click();
  const dialog = page.getByTestId("settings");
  await dialog.getByTestId("mcp-servers").waitFor();
  return dialog;
}

async function closeSettings(page: Page) {
  await page.keyboard.press("Escape");
  await page.getByTestId("settings").waitFor({ state: "detached" });
}

test("an MCP server added in Settings: its tool is approved and called; the server stopped, the error is said in words", async () => {
  const url = appUrl(app.server.url, { store: uniqueStore("mcp"), approval: "1" });
  const page = await app.open({ url, label: "mcp", composer: true });

  let dialog = await openSettings(page);
  await dialog.getByTestId("mcp-name").fill("docs");
  await dialog.getByTestId("mcp-url").fill(server.url);
  await dialog.getByTestId("mcp-token").fill(TOKEN);
  await dialog.getByTestId("mcp-add").click();
  await expect
    .poll(() => dialog.getByTestId("mcp-note").textContent(), POLL)
    .toContain("Added “docs” with 5 tools");
  const row = dialog.getByTestId("mcp-server-docs");
  expect(await row.textContent()).toContain("docs_echo");
  expect(await row.textContent()).toContain("token saved");
  expect(await dialog.getByTestId("mcp-token").inputValue()).toBe("");
  expect(await dialog.textContent()).not.toContain(TOKEN);
  // Its tools, under its name, in this conversation's extensions and the approval list at once.
  await expect.poll(() => dialog.getByTestId("extension-mcp:docs").isChecked(), POLL).toBe(true);
  expect(await dialog.getByTestId("conversation-extensions").textContent()).toContain("docs (MCP server)");
  await expect.poll(() => dialog.getByTestId("tool-policies").textContent(), POLL).toContain("docs_echo");
  await closeSettings(page);

  // MCP tools ask first: approve, the server answers, the demo model says so.
  await say(page, 'call the tool docs_echo with {"text": "hello from the browser"}');
  await request(page).waitFor();
  expect(await request(page).getAttribute("data-tool")).toBe("docs_echo");
  expect(server.calls).toEqual([]);
  await page.getByRole("button", { name: "Approve", exact: true }).click();
  await settled(page, 2);
  expect(await answerText(page)).toContain("echo: hello from the browser");
  expect(server.calls).toEqual(["echo"]);

  // The server goes away: the model gets an error in words, and so does the person.
  await server.stop();
  await say(page, 'call the tool docs_echo with {"text": "anyone there?"}');
  await request(page).waitFor();
  await page.getByRole("button", { name: "Approve", exact: true }).click();
  await settled(page, 4);
  const words = await answerText(page);
  expect(words).toContain(`The MCP server "docs" (${server.url}) did not answer`);
  expect(words).not.toContain(TOKEN);
  dialog = await openSettings(page);
  await dialog.getByTestId("mcp-refresh").click();
  await expect
    .poll(() => dialog.getByTestId("mcp-server-docs").getByTestId("mcp-server-status").textContent(), POLL)
    .toMatch(
      /^Not answering: the MCP server "docs" .* did not answer .*Its 5 tools listed before stay offered\.$/,
    );
  await closeSettings(page);

  // A reload with the server still down: the cached tools are listed, and offered.
  await page.reload();
  await waitPhase(page, "ready");
  dialog = await openSettings(page);
  await expect.poll(() => dialog.getByTestId("mcp-server-docs").textContent(), POLL).toContain("docs_launch");
  expect(await dialog.getByTestId("tool-policies").textContent()).toContain("docs_echo");

  await eachLook(page, async (look) => {
    const section = dialog.getByTestId("mcp-servers");
    await section.scrollIntoViewIfNeeded();
    const overflow = await dialog.evaluate((d) => d.scrollWidth - d.clientWidth);
    expect(overflow, `horizontal overflow at ${look.width} px, ${look.scheme}`).toBeLessThanOrEqual(0);
    await section.screenshot({ path: look.shot("mcp-servers") });
    expect(
      await seriousViolations(page, '[data-testid="mcp-servers"]'),
      `${look.scheme} ${look.width}`,
    ).toEqual([]);
  });
  await server.restart();
}, 240_000);

test("an MCP server edited in Settings: renamed, its token kept and never shown back, then removed", async () => {
  const url = appUrl(app.server.url, { store: uniqueStore("mcp-edit"), approval: "1" });
  const page = await app.open({ url, label: "mcp-edit", composer: true });
  const dialog = await openSettings(page);
  await dialog.getByTestId("mcp-name").fill("docs");
  await dialog.getByTestId("mcp-url").fill(server.url);
  await dialog.getByTestId("mcp-token").fill(TOKEN);
  await dialog.getByTestId("mcp-add").click();
  await expect.poll(() => dialog.getByTestId("mcp-note").textContent(), POLL).toContain("Added “docs”");

  await dialog.getByTestId("mcp-server-docs").getByTestId("mcp-edit").click();
  const form = dialog.getByTestId("mcp-edit-form");
  // The saved token is never shown back: the field is empty, and says an empty one keeps it.
  expect(await form.getByTestId("mcp-edit-token").inputValue()).toBe("");
  expect(await form.textContent()).toContain("leave empty to keep the saved one");
  expect(await form.getByTestId("mcp-edit-url").inputValue()).toBe(server.url);
  await eachLook(page, async (look) => {
    await form.scrollIntoViewIfNeeded();
    await form.screenshot({ path: look.shot("mcp-edit") });
    expect(
      await seriousViolations(page, '[data-testid="mcp-servers"]'),
      `${look.scheme} ${look.width}`,
    ).toEqual([]);
  });
  await form.getByTestId("mcp-edit-name").fill("notes");
  await form.getByTestId("mcp-edit-save").click();
  // The server (which wants the token) answered the renamed setting: the token was kept.
  await expect
    .poll(() => dialog.getByTestId("mcp-note").textContent(), POLL)
    .toContain("Saved “notes”: 5 tools");
  const row = dialog.getByTestId("mcp-server-notes");
  expect(await row.textContent()).toContain("notes_echo");
  expect(await row.textContent()).toContain("token saved");
  expect(await dialog.getByTestId("mcp-server-docs").count()).toBe(0);
  expect(await dialog.textContent()).not.toContain(TOKEN);
  await expect.poll(() => dialog.getByTestId("extension-mcp:notes").isChecked(), POLL).toBe(true);

  // Removing the saved token: the server refuses the setting without it, said in words, nothing changed.
  await row.getByTestId("mcp-edit").click();
  await dialog.getByTestId("mcp-edit-drop-token").check();
  await dialog.getByTestId("mcp-edit-save").click();
  await expect.poll(() => dialog.getByTestId("mcp-error").textContent(), POLL).toContain("notes");
  expect(await dialog.getByTestId("mcp-server-notes").textContent()).toContain("token saved");
  expect(await dialog.textContent()).not.toContain(TOKEN);
}, 240_000);
