/**
 * A server conversation's tools, set up from the app's settings as a person does it, in real
 * Chromium against a real local server space (workerd through miniflare, tests/server/miniflare.ts,
 * under the product's approval defaults: `SPACE_TEST_APPROVAL=ask`). Shown here:
 * - tool approval (issue 31 part 1) for a conversation that lives on the server: the settings'
 *   "Tool approval (on the server)" section sets `write` to "Run freely" in this conversation, and
 *   the server's engine runs the demo model's write without asking; set to "Never", the next write
 *   is refused (a tool error the model reads) and nothing asks either; the server's policy list
 *   says what the tab chose.
 * - an MCP server (issue 31 part 2) added to the server space from a server conversation's
 *   settings: a real MCP server (the SDK's, tests/unit/app/mcp-server.ts) on loopback that wants a
 *   bearer token, which is the server's secret (the binding `MCP_DOCS_TOKEN`): the section offers
 *   no token field and names the variable; its tools are listed under its name; the demo model
 *   calls `docs_echo` from the server conversation, the call asks first (the server's card),
 *   approved it answers; the MCP server stopped, the next call's error is said in words, in the
 *   answer and in the section after a refresh.
 * Screenshots of both sections at 1280 and 390 px, light and dark (test-results/screenshots/).
 */
import type { Page } from "playwright-core";
import { afterAll, beforeAll, expect, test } from "vitest";
import { type ServerWorker, startServerWorker } from "../server/miniflare.ts";
import { startMcpServer, type TestMcpServer } from "../unit/app/mcp-server.ts";
import { seriousViolations } from "./axe.ts";
import { appSuite, eachLook, lastAnswer, say, settled, shot, until } from "./page.ts";

const app = appSuite({ logTail: 120 });
let server: ServerWorker;
let mcp: TestMcpServer;
const MCP_TOKEN = "e2e-server-mcp-token-5b8e21";

beforeAll(async () => {
  mcp = await startMcpServer({ token: MCP_TOKEN });
  server = await startServerWorker({
    entry: "space-entry.ts",
    objects: { SPACES: "TestSpace" },
    bindings: { SPACE_TEST_APPROVAL: "ask", MCP_DOCS_TOKEN: MCP_TOKEN },
  });
}, 120_000);
afterAll(async () => {
  await server?.stop();
  await mcp?.stop();
});

const serverState = (page: Page) =>
  page.evaluate(
    () => document.querySelector('[data-testid="server-section"]')?.getAttribute("data-state") ?? "",
  );

/** Attach the page to `space` (Settings > Server), then open a new conversation there. */
async function onServerConversation(page: Page, space: string): Promise<void> {
  await page.getByTestId("open-settings").first().click();
  await page.getByTestId("server-url").fill(server.url().toString());
  await page.getByTestId("server-token").fill(server.token(space));
  await page.getByTestId("server-save").click();
  await until(
    "connected",
    () => serverState(page),
    (s) => s === "connected",
  );
  await page.getByRole("button", { name: "Close settings" }).click();
  await page.getByTestId("server-new").click();
  await until(
    "on the new server conversation",
    () => page.evaluate(() => location.hash),
    (h) => /^#\/s\/\d+$/.test(h),
  );
  await page.getByTestId("server-home").waitFor();
}

/** The transcript's tool results: the tool's name and whether it failed. */
const toolResults = (page: Page) =>
  page
    .locator('[data-testid="entries"] > [data-kind="pi.tool-result"] .who')
    .allTextContents()
    .then((all) => all.map((t) => t.replace(/\s+/g, " ").trim()));

test("tool approval for a server conversation is set in the settings and obeyed by the server's engine", async () => {
  const page = await app.open({
    label: "server-policy",
    viewport: { width: 1280, height: 800 },
    composer: true,
  });
  await onServerConversation(page, "e2e-policy");

  // The settings of a server conversation offer its approval policies, the server's.
  await page.getByTestId("open-settings").first().click();
  const section = page.getByTestId("tool-policies");
  await section.waitFor();
  expect(await section.locator("h3").textContent()).toBe("Tool approval (on the server)");
  const write = section.getByLabel("write: in this conversation");
  await until(
    "the server's tools listed",
    () => section.locator("tbody tr").count(),
    (n) => n > 0,
  );
  expect(await section.getByLabel("write: everywhere").inputValue()).toBe("default");
  expect(await seriousViolations(page, '[data-testid="settings"]')).toEqual([]);
  await eachLook(page, async (look) => {
    await section.scrollIntoViewIfNeeded();
    await page.screenshot({ path: look.shot("server-tool-policies") });
  });
  await page.setViewportSize({ width: 1280, height: 800 });
  await write.selectOption("allow");
  // Saved on the server: the row shows the policy the server now applies.
  const row = section.locator('tr[data-tool="write"]');
  await until(
    "the server applies the choice",
    () => row.getAttribute("data-effective"),
    (v) => v === "allow",
  );
  await page.getByRole("button", { name: "Close settings" }).click();

  // "write a note": the listing runs freely, and the write runs too, without asking.
  await say(page, "write a note");
  // Until the write ran or asked (a request shown would fail the check after).
  await until(
    "the write ran or asked",
    async () =>
      [await toolResults(page), await page.locator('[data-testid="approval-request"]').count()] as const,
    ([results, asking]) => results.length >= 2 || asking > 0,
  );
  expect(await page.locator('[data-testid="approval-request"]').count()).toBe(0);
  expect(await toolResults(page)).toEqual(["tool · ls · done", "tool · write · done"]);
  await settled(page, 3);

  // Now "Never": the next write is refused by the server, without asking either.
  await page.getByTestId("open-settings").first().click();
  await section.waitFor();
  await until(
    "the section loaded",
    () => write.inputValue(),
    (v) => v === "allow",
  );
  await write.selectOption("never");
  await until(
    "the server applies the choice",
    () => row.getAttribute("data-effective"),
    (v) => v === "never",
  );
  await page.getByRole("button", { name: "Close settings" }).click();
  await say(page, "write another note");
  await until(
    "the refused write",
    () => toolResults(page),
    (r) => r.length >= 3 && r.slice(2).some((t) => t.startsWith("tool · write") && !t.endsWith("done")),
  );
  expect(await page.locator('[data-testid="approval-request"]').count()).toBe(0);
  const refused = page.locator('[data-testid="entries"] > [data-kind="pi.tool-result"]').last();
  expect(await refused.textContent()).toContain("set never to run in this conversation");
});

test("an MCP server added to a server conversation from its settings: its tool answers through the server; stopped, the error is said in words", async () => {
  const page = await app.open({
    label: "server-mcp",
    viewport: { width: 1280, height: 800 },
    composer: true,
  });
  await onServerConversation(page, "e2e-mcp");
  const POLL = { timeout: 30_000, interval: 100 };

  await page.getByTestId("open-settings").first().click();
  const dialog = page.getByTestId("settings");
  const section = dialog.getByTestId("mcp-servers");
  await section.waitFor();
  expect(await section.locator("h3").textContent()).toBe("MCP servers (on the server)");
  // The token is the server's secret: no field for one here, and the section names the variable.
  expect(await section.getByTestId("mcp-token").count()).toBe(0);
  await section.getByTestId("mcp-name").fill("docs");
  expect(await section.getByTestId("mcp-home-note").textContent()).toContain("MCP_DOCS_TOKEN");
  await section.getByTestId("mcp-url").fill(mcp.url);
  await section.getByTestId("mcp-add").click();
  await expect
    .poll(() => section.getByTestId("mcp-note").textContent(), POLL)
    .toContain("Added “docs” with 5 tools");
  const row = section.getByTestId("mcp-server-docs");
  expect(await row.textContent()).toContain("docs_echo");
  expect(await row.textContent()).toContain("token set on the server");
  expect(await dialog.textContent()).not.toContain(MCP_TOKEN);
  // Its tools are in this conversation's extensions and in the server's approval list at once.
  await expect.poll(() => dialog.getByTestId("extension-mcp:docs").isChecked(), POLL).toBe(true);
  await expect.poll(() => dialog.getByTestId("tool-policies").textContent(), POLL).toContain("docs_echo");
  expect(await seriousViolations(page, '[data-testid="mcp-servers"]')).toEqual([]);
  await eachLook(page, async (look) => {
    await section.scrollIntoViewIfNeeded();
    const overflow = await dialog.evaluate((d) => d.scrollWidth - d.clientWidth);
    expect(overflow, `horizontal overflow at ${look.width} px, ${look.scheme}`).toBeLessThanOrEqual(0);
    await page.screenshot({ path: look.shot("server-mcp-servers") });
  });
  await page.setViewportSize({ width: 1280, height: 800 });
  await page.getByRole("button", { name: "Close settings" }).click();

  // The demo model calls it from the server conversation: it asks first, approved it answers.
  const request = page.locator('[data-testid="approval-request"]');
  await say(page, 'call the tool docs_echo with {"text": "hello from the server"}');
  await request.waitFor();
  expect(await request.getAttribute("data-tool")).toBe("docs_echo");
  expect(mcp.calls).toEqual([]);
  await page.getByRole("button", { name: "Approve", exact: true }).click();
  await until(
    "the answer",
    async () => (await lastAnswer(page).textContent()) ?? "",
    (t) => t.includes("echo: hello from the server"),
  );
  await settled(page, 2);
  expect(mcp.calls).toEqual(["echo"]);

  // The MCP server stops: the next call's error is said in words, to the model and the person.
  await mcp.stop();
  try {
    await say(page, 'call the tool docs_echo with {"text": "anyone there?"}');
    await request.waitFor();
    await page.getByRole("button", { name: "Approve", exact: true }).click();
    await until(
      "the error in words",
      async () => (await lastAnswer(page).textContent()) ?? "",
      (t) => t.includes(`The MCP server "docs" (${mcp.url}) did not answer`),
    );
    const words = (await lastAnswer(page).textContent()) ?? "";
    expect(words).not.toContain(MCP_TOKEN);
    // workerd's words ("Network connection lost.") inside the sentence, without a doubled stop.
    expect(words).not.toContain(".).");
    await eachLook(page, async (look) => {
      await lastAnswer(page).scrollIntoViewIfNeeded();
      await page.screenshot({ path: look.shot("server-mcp-error") });
    });
    await page.setViewportSize({ width: 1280, height: 800 });
    await page.emulateMedia({ colorScheme: "light" });
    await page.getByTestId("open-settings").first().click();
    await section.getByTestId("mcp-refresh").click();
    await expect
      .poll(() => section.getByTestId("mcp-server-docs").getByTestId("mcp-server-status").textContent(), POLL)
      .toMatch(
        /^Not answering: the MCP server "docs" .* did not answer .*Its 5 tools listed before stay offered\.$/,
      );
    await section.getByTestId("mcp-server-docs").scrollIntoViewIfNeeded();
    await page.screenshot({ path: shot("server-mcp-down-light-1280") });
  } finally {
    await mcp.restart();
  }
}, 240_000);
