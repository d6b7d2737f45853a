/**
 * A scheduled run as a person makes one, in real Chromium: "in 2 hours, summarize my notes" is
 * added from the conversation's Scheduled runs panel (previewed in words by the engine, catch-up
 * "run each missed time once"). The browser is then SIGKILLed while it waits, and started again
 * three hours later (the engine's clock moved by the test page's `clockOffset`: Playwright's clock
 * API does not reach a SharedWorker) with two tabs open at once: the missed run is caught up once,
 * both tabs show the note saying so and one answer, and a further reload fires nothing again.
 * Screenshots at 1280 and 390 px, light and dark, of the panel and of the caught-up note.
 */
import type { Page } from "playwright-core";
import { expect, test } from "vitest";
import { appSuite, appUrl, eachLook, entriesOf, settled, uniqueStore, until } from "./page.ts";

const app = appSuite();

const HOUR = 3_600_000;
const panel = (page: Page) => page.locator('[data-testid="schedules"]');
const inputs = (page: Page) =>
  page.locator('[data-testid="entries"] [data-kind="pi.user"]', { hasText: "summarize my notes" });

test("a schedule due while the app was closed is caught up once on the next start, in every tab", async () => {
  const store = uniqueStore("schedules");
  const url = appUrl(app.server.url, { store });
  const a = await app.open({ url, label: "A", composer: true });

  // Made as a person would: the panel, the form, its preview in words, Add.
  await panel(a).locator("summary").click();
  await panel(a).getByRole("button", { name: "New schedule…" }).click();
  await panel(a).getByLabel("What to send").fill("summarize my notes");
  await panel(a).getByRole("radio", { name: "Once" }).check();
  await panel(a).getByLabel("how many", { exact: true }).fill("2");
  await panel(a).getByLabel("unit", { exact: true }).selectOption("hours");
  await panel(a).getByLabel("If the app was closed at a due time").selectOption("run");
  await until(
    "the preview in words",
    () =>
      panel(a)
        .locator('[data-testid="schedule-preview"]')
        .innerText()
        .catch(() => ""),
    (t) => t.startsWith("Once, "),
  );
  await panel(a).getByRole("button", { name: "Add schedule" }).click();
  const item = panel(a).locator('[data-testid="schedule"]');
  await item.waitFor();
  await until(
    "the schedule's next run",
    () => item.locator('[data-testid="schedule-next"]').innerText(),
    (t) => t.startsWith("Next: "),
  );
  expect(await inputs(a).count()).toBe(0);
  await eachLook(a, async (look) => {
    await item.scrollIntoViewIfNeeded();
    await a.screenshot({ path: look.shot("schedule-panel") });
  });

  // The app is closed (the browser dies) and opened again three hours later, in two tabs at once.
  await app.relaunch();
  const later = appUrl(app.server.url, { store, clockOffset: String(3 * HOUR) });
  const [b, c] = await Promise.all([
    app.open({ url: later, label: "B", composer: true }),
    app.open({ url: later, label: "C", composer: true }),
  ]);
  await settled(b, 1);
  for (const page of [b, c]) {
    await until(
      "the catch-up note",
      () => entriesOf(page, "app.schedule").allInnerTexts(),
      (t) => t.length === 1,
    );
    const [note] = await entriesOf(page, "app.schedule").allInnerTexts();
    expect(note).toMatch(/^While the app was closed, 1 scheduled run was missed \(.+\)\. Ran it once now\.$/);
    await until(
      "the one input",
      () => inputs(page).count(),
      (n) => n === 1,
    );
  }
  await settled(c, 1);
  await panel(b).locator("summary").click();
  await until(
    "the schedule done",
    () => panel(b).locator('[data-testid="schedule-next"]').innerText(),
    (t) => t.startsWith("Done") && t.includes("ran 1"),
  );
  await b.bringToFront();
  await eachLook(b, async (look) => {
    await entriesOf(b, "app.schedule").scrollIntoViewIfNeeded();
    await b.screenshot({ path: look.shot("schedule-caught-up") });
  });

  // Another start: nothing fires again.
  await b.reload();
  await b.getByLabel("message").waitFor();
  await settled(b, 1);
  expect(await entriesOf(b, "app.schedule").count()).toBe(1);
  expect(await inputs(b).count()).toBe(1);
});
