/**
 * A server conversation's tools, set up from the app's settings as a person does it, in real
 * Chromium against a real local server space (workerd through miniflare, tests/server/miniflare.ts,
 * under the product's approval defaults: `SPACE_TEST_APPROVAL=ask`). Shown here:
 * - tool approval (issue 31 part 1) for a conversation that lives on the server: the settings'
 *   "Tool approval (on the server)" section sets `write` to "Run freely" in this conversation, and
 *   the server's engine runs the demo model's write without asking; set to "Never", the next write
 *   is refused (a tool error the model reads) and nothing asks either; the server's policy list
 *   says what the tab chose.
 * Screenshots of the section at 1280 and 390 px, light and dark (test-results/screenshots/).
 */
import type { Page } from "playwright-core";
import { afterAll, beforeAll, expect, test } from "vitest";
import { type ServerWorker, startServerWorker } from "../server/miniflare.ts";
import { seriousViolations } from "./axe.ts";
import { appSuite, eachLook, say, settled, until } from "./page.ts";

const app = appSuite({ logTail: 120 });
let server: ServerWorker;

beforeAll(async () => {
  server = await startServerWorker({
    entry: "space-entry.ts",
    objects: { SPACES: "TestSpace" },
    bindings: { SPACE_TEST_APPROVAL: "ask" },
  });
}, 120_000);
afterAll(async () => {
  await server?.stop();
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
