/**
 * Deleting a conversation on the built app: the confirmation dialog used by keyboard alone (focus
 * starts on Cancel; Esc cancels and deletes nothing; Tab then Enter deletes), every other tab's list
 * drops it at once, a tab showing it says "no such conversation", and the deleted id's deep link says
 * so after a reload. Screenshots of the dialog at 1280 and 390 px in light and dark go to
 * test-results/screenshots/. A long list pages (issue 30): the tab holds the newest 100 and finds
 * older ones through the engine's search.
 */
import type { Page } from "playwright-core";
import { expect, test } from "vitest";
import { engine } from "./browser.ts";
import { appSuite, say, settleAnimations, settled, shot, until, waitPhase } from "./page.ts";

const app = appSuite({ logTail: 100 });

const titles = (page: Page) => page.locator('[data-testid="conversation-list"] li a .name').allTextContents();
const focused = (page: Page) => page.evaluate(() => document.activeElement?.textContent?.trim() ?? "");

test("delete with confirmation by keyboard: Esc keeps it, Enter on Delete removes it from every tab; a tab showing it says no such conversation", async () => {
  const a = await app.open({ label: "delete", viewport: { width: 1280, height: 800 }, composer: true });
  const b = await app.open({ url: a.url(), label: "delete-2", viewport: { width: 1280, height: 800 } });

  await a.getByRole("button", { name: "New conversation" }).click();
  await until(
    "the new conversation open",
    () => a.evaluate(() => location.hash),
    (h) => /^#\/c\/\d+$/.test(h) && h !== "#/c/1",
  );
  const hash = await a.evaluate(() => location.hash);
  await say(a, "Trip to Lisbon");
  await settled(a, 1);
  await until(
    "the conversation in the other tab's list",
    () => titles(b),
    (t) => t.includes("Trip to Lisbon"),
  );
  // The other tab shows it too.
  await b.evaluate((h) => {
    location.hash = h;
  }, hash);
  await b.locator('[data-testid="entries"] > [data-kind="pi.assistant"]').first().waitFor();

  // The keyboard: focus the row's Delete button, Enter opens the dialog with focus on Cancel. (The
  // first tab comes to the front: a page in the background paints no frames to screenshot.)
  await a.bringToFront();
  const remove = a.getByRole("button", { name: "Delete Trip to Lisbon" });
  await remove.focus();
  await a.keyboard.press("Enter");
  const dialog = a.getByTestId("delete-dialog");
  await dialog.waitFor();
  expect(await focused(a)).toBe("Cancel");
  for (const scheme of ["light", "dark"] as const) {
    await a.emulateMedia({ colorScheme: scheme });
    await a.screenshot({ path: shot(`delete-dialog-${scheme}-1280`) });
  }
  // Esc cancels: the dialog closes, focus returns to the row's button, nothing is deleted.
  await a.keyboard.press("Escape");
  await dialog.waitFor({ state: "detached" });
  expect(await a.evaluate(() => document.activeElement?.getAttribute("aria-label"))).toBe(
    "Delete Trip to Lisbon",
  );
  expect(await titles(b)).toContain("Trip to Lisbon");

  // Again, and this time Tab to Delete and Enter.
  await a.keyboard.press("Enter");
  await dialog.waitFor();
  await a.keyboard.press("Tab");
  expect(await focused(a)).toBe("Delete");
  await a.keyboard.press("Enter");
  await dialog.waitFor({ state: "detached" });

  // This tab goes back to the main conversation; the other tab's list drops it and its view says so.
  await until(
    "this tab back on the main conversation",
    () => a.evaluate(() => location.hash),
    (h) => h === "#/c/1",
  );
  await until(
    "the other tab's list without it",
    () => titles(b),
    (t) => !t.includes("Trip to Lisbon"),
  );
  expect(await titles(a)).not.toContain("Trip to Lisbon");
  await b.getByTestId("no-such-conversation").waitFor();
  // Its deep link, loaded fresh, says the same (the id is gone for good).
  await b.reload();
  await waitPhase(b, "ready");
  await b.getByTestId("no-such-conversation").waitFor();
  expect(await titles(b)).not.toContain("Trip to Lisbon");
});

test("the delete dialog at 390 px: opened from the conversation drawer, readable in light and dark, and the main conversation has no Delete", async () => {
  const page = await app.open({ label: "delete-390", viewport: { width: 390, height: 844 }, composer: true });
  await page.getByRole("button", { name: "Conversations" }).click();
  await page.getByRole("button", { name: "New conversation" }).click();
  await until(
    "the new conversation open",
    () => page.evaluate(() => location.hash),
    (h) => /^#\/c\/\d+$/.test(h) && h !== "#/c/1",
  );
  await say(page, "A rather long title for a narrow screen, to see it wrap");
  await settled(page, 1);
  await page.getByRole("button", { name: "Conversations" }).click();
  await settleAnimations(page);
  expect(await page.getByRole("button", { name: "Delete Main" }).count()).toBe(0);
  await page.getByRole("button", { name: /^Delete A rather long title/ }).click();
  const dialog = page.getByTestId("delete-dialog");
  await dialog.waitFor();
  const box = await dialog.boundingBox();
  expect(box && box.x >= 0 && box.x + box.width <= 390).toBe(true);
  expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBe(390);
  for (const scheme of ["light", "dark"] as const) {
    await page.emulateMedia({ colorScheme: scheme });
    await page.screenshot({ path: shot(`delete-dialog-${scheme}-390`) });
  }
  await dialog.getByRole("button", { name: "Cancel" }).click();
  await dialog.waitFor({ state: "detached" });
});

test("a long list pages: the newest 100 rows, Show more adds 100; an old conversation outside the page is found by title through the engine's search", async () => {
  const page = await app.open({ label: "paging", viewport: { width: 1280, height: 800 } });
  await engine(page, "debug.seed", { tasks: 0, conversations: 250 });
  const rows = page.locator('[data-testid="conversation-list"] li[data-id]');
  await until(
    "the list's first page",
    () => titles(page),
    (t) => t[0] === "Seeded conversation 250",
  );
  // 252 conversations (Main, the seed's task conversation, 250 seeded): the tab holds 100 of them.
  expect(await rows.count()).toBe(100);
  await page.getByRole("button", { name: "Show more" }).click();
  await until(
    "the second page",
    () => rows.count(),
    (n) => n === 200,
  );
  // "Seeded conversation 7" is older than every row shown: found through the engine, not the page.
  expect(await titles(page)).not.toContain("Seeded conversation 7");
  await page.getByLabel("Search conversations").fill("Seeded conversation 7");
  await until(
    "the old conversation found",
    () => titles(page),
    (t) => t.includes("Seeded conversation 7"),
  );
});
