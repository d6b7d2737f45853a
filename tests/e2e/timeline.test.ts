/**
 * A run you can see (issue 31 part 5), as a person uses it in real Chromium with the demo model: a
 * run that delegates to a subagent (which lists the files) and then reads a file that is not there.
 * The timeline (opened beside the task panel, loaded on demand) shows the subagent nested under the
 * answer that called it and the child's answers under the subagent, and the failed read coloured
 * and labelled as an error; opening its bar (by the keyboard) says why it ended and shows its
 * entries. Each look (light and dark, 1280 and 390 px) is screenshotted and checked with axe. Then
 * the read is rerun from its bar (it runs again: both calls in the history, the new one under its
 * rerun on the timeline), and "Fork here" on an entry opens a new conversation holding it.
 */
import { copyFileSync, existsSync } from "node:fs";
import { basename, join } from "node:path";
import type { Page } from "playwright-core";
import { expect, test } from "vitest";
import { seriousViolations } from "./axe.ts";
import { engine } from "./browser.ts";
import { appSuite, appUrl, eachLook, say, settled, uniqueStore, until } from "./page.ts";

const app = appSuite();

const dialog = (page: Page) => page.getByTestId("timeline");
const bars = (page: Page) => dialog(page).getByTestId("timeline-bar");

/** Keep a copy of a screenshot where the person reviewing this work looks (SHOTS_DIR, when set). */
function keep(path: string): void {
  const dir = process.env["SHOTS_DIR"];
  if (dir && existsSync(dir)) copyFileSync(path, join(dir, basename(path)));
}

type Entry = { kind: string; model?: Array<{ role: string; toolName?: string; isError?: boolean }> };
const readResults = async (page: Page) =>
  (await engine<Entry[]>(page, "watches.entries", 1)).filter(
    (e) => e.kind === "pi.tool-result" && e.model?.[0]?.toolName === "read",
  );

test("the timeline of a run with a subagent and a tool error; a bar opened, a tool call rerun, a fork made", async () => {
  const url = appUrl(app.server.url, { store: uniqueStore("timeline") });
  const page = await app.open({
    url,
    label: "timeline",
    composer: true,
    viewport: { width: 1280, height: 800 },
  });
  await say(page, 'call the tool subagent with {"task": "list the files"}');
  await settled(page, 2);
  await say(page, "read missing/nothing.md");
  await settled(page, 4);

  await page.getByTestId("open-timeline").click();
  await dialog(page).waitFor();
  await until(
    "the run's bars",
    () => bars(page).count(),
    (n) => n >= 8,
  );
  // Nested: the subagent under the answer that called it, the child's answers under the subagent.
  const subagent = bars(page).and(page.locator('[data-kind="subagent"]'));
  await expect.poll(() => subagent.count()).toBe(1);
  expect(await subagent.getAttribute("data-depth")).toBe("1");
  expect(await subagent.getAttribute("data-outcome")).toBe("ok");
  const childAnswers = bars(page).and(page.locator('[data-kind="generation"][data-depth="2"]'));
  expect(await childAnswers.count()).toBeGreaterThanOrEqual(2);
  // The failed read: coloured and labelled as an error (its name says so in words).
  const failed = bars(page).and(page.locator('[data-outcome="error"]'));
  await expect.poll(() => failed.count()).toBe(1);
  expect(await failed.getAttribute("aria-label")).toMatch(/^read tool: error, /);
  expect(await failed.textContent()).toContain("read tool");

  // Opened by the keyboard: why it ended, and its entries (the call and its error result).
  await failed.focus();
  await page.keyboard.press("Enter");
  const detail = dialog(page).getByTestId("timeline-detail");
  await detail.waitFor();
  expect(await detail.getByTestId("timeline-why").textContent()).toMatch(
    /^Why it ended: the read tool failed: /,
  );
  const lines = detail.getByTestId("timeline-entry");
  await expect.poll(() => lines.count()).toBe(2);
  expect(await lines.nth(0).textContent()).toContain("calls read");
  expect(await lines.nth(1).textContent()).toContain("read tool (error)");

  await eachLook(page, async (look) => {
    await dialog(page)
      .getByTestId("dialog-body")
      .evaluate((body) => (body.scrollTop = 0));
    const path = look.shot("timeline");
    await page.screenshot({ path });
    keep(path);
    expect(await seriousViolations(page), `${look.scheme} ${look.width}`).toEqual([]);
  });
  await page.setViewportSize({ width: 1280, height: 800 });

  // Rerun the read: it runs again, both calls stay in the history, the new one under its rerun.
  expect(await readResults(page)).toHaveLength(1);
  await detail.getByTestId("timeline-rerun").click();
  await until(
    "the second read's result",
    () => readResults(page),
    (results) => results.length === 2,
  );
  await until(
    "the rerun's bars",
    () => bars(page).and(page.locator('[data-outcome="error"]')).count(),
    (n) => n === 2,
  );
  const rerun = bars(page).filter({ hasText: "rerun of a tool call" });
  expect(await rerun.count()).toBe(1);
  expect(await rerun.getAttribute("data-depth")).toBe("0");
  const last = bars(page).last();
  expect(await last.getAttribute("data-depth")).toBe("1");
  expect(await last.getAttribute("aria-label")).toMatch(/^read tool: error, /);

  // Fork here, at the failed read's call: a new conversation that holds it opens.
  await failed.first().click();
  await detail.getByTestId("timeline-fork").first().click();
  await until(
    "the fork's page",
    () => page.evaluate(() => location.hash),
    (hash) => /^#\/c\/\d+$/.test(hash) && hash !== "#/c/1",
  );
  await dialog(page).waitFor({ state: "detached" });
  const forkId = Number((await page.evaluate(() => location.hash)).slice("#/c/".length));
  const forked = await engine<Entry[]>(page, "watches.entries", forkId);
  expect(forked.some((e) => e.kind === "pi.assistant")).toBe(true);
  expect(forked.filter((e) => e.kind === "pi.tool-result")).toHaveLength(1);
});
