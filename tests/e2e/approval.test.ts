/**
 * Tool approval as a person uses it, in real Chromium, with the product's defaults (`approval=1`:
 * reading runs freely, writing asks first). "Write a note" makes the demo model list the files (runs
 * at once) and then call `write`, which waits: both tabs show the request with its arguments in
 * words and nothing is written. The browser is SIGKILLed and relaunched: the request still waits in
 * both reopened tabs; it is approved in the second, the note is written once and the first tab's
 * request goes away. Then a second note is denied with a reason,
 * which the model's next request carries (the demo model quotes it) and no file is written. Each
 * look (light and dark, 1280 and 390 px) is screenshotted and checked with axe while a call waits.
 */
import type { Page } from "playwright-core";
import { expect, test } from "vitest";
import { seriousViolations } from "./axe.ts";
import { engine } from "./browser.ts";
import {
  appSuite,
  appUrl,
  eachLook,
  lastAnswer,
  say,
  settleAnimations,
  settled,
  uniqueStore,
  until,
} from "./page.ts";

const app = appSuite();

const request = (page: Page) => page.locator('[data-testid="approval-request"]');
const notes = async (page: Page) =>
  (await engine<Array<{ path: string }>>(page, "workspace.files")).filter((f) => f.path.startsWith("notes/"));

test("a write waits for approval across a SIGKILL, is approved in another tab and runs once; a denial's reason reaches the model", async () => {
  const url = appUrl(app.server.url, { store: uniqueStore("approval"), approval: "1" });
  let a = await app.open({ url, label: "A", composer: true });
  await say(a, "write a note");
  await request(a).waitFor();
  await expect.poll(() => request(a).getAttribute("data-tool")).toBe("write");
  const words = await request(a).locator("pre").innerText();
  expect(words).toContain("path: notes/");
  let b = await app.open({ url, label: "B", composer: true });
  await request(b).waitFor();
  expect(await request(b).locator("pre").innerText()).toBe(words);
  expect(await notes(a)).toEqual([]);
  // The header says the run is paused for the person, not working.
  for (const tab of [a, b])
    await expect.poll(() => tab.getByTestId("engine-status").getAttribute("title")).toBe("Paused for you");

  // Tab B opened last: A is brought to the front, or Chromium paints no new frame for its screenshots.
  await a.bringToFront();
  await eachLook(a, async (look) => {
    await request(a).scrollIntoViewIfNeeded();
    await a.screenshot({ path: look.shot("approval-waiting") });
    expect(await seriousViolations(a), `${look.scheme} ${look.width}`).toEqual([]);
    // The task panel says what waits in words read whole, never cut to "waiting for your approv…".
    const narrow = look.width < 1100;
    if (narrow) {
      await a.getByRole("button", { name: "Tasks", exact: true }).click();
      await settleAnimations(a);
    }
    const labels = a.getByTestId("task-label");
    await expect
      .poll(() => labels.allTextContents())
      .toContain("waiting for your approval to run the write tool");
    const cut = await labels.evaluateAll((all) =>
      all.filter((l) => l.scrollWidth > l.clientWidth).map((l) => l.textContent),
    );
    expect(cut, `${look.scheme} ${look.width}`).toEqual([]);
    await a.screenshot({ path: look.shot("approval-tasks") });
    if (narrow) {
      await a.keyboard.press("Escape");
      await settleAnimations(a);
    }
  });

  // A crash of the whole browser: the call keeps waiting, in every tab that opens again.
  await app.relaunch();
  a = await app.open({ url, label: "A again", composer: true });
  b = await app.open({ url, label: "B again", composer: true });
  await request(a).waitFor();
  await request(b).waitFor();
  expect(await notes(b)).toEqual([]);
  await b.getByRole("button", { name: "Approve", exact: true }).click();
  await settled(b, 2);
  const written = await notes(b);
  expect(written).toHaveLength(1);
  expect(await request(a).count()).toBe(0);
  const results = await engine<Array<{ kind: string }>>(b, "watches.entries", 1);
  expect(results.filter((e) => e.kind === "pi.tool-result")).toHaveLength(2); // ls, then write: once

  // A denial with a reason: nothing is written, and the model reads the reason.
  await say(a, "write a note");
  await request(a).waitFor();
  await request(a)
    .getByLabel(/Reason if you deny/)
    .fill("keep my notes folder tidy");
  await request(a).getByRole("button", { name: "Deny" }).click();
  await settled(a, 4);
  await until(
    "the answer quoting the denial",
    () => lastAnswer(a).innerText(),
    (t) => t.includes("keep my notes folder tidy"),
  );
  expect(await notes(a)).toEqual(written);
});
