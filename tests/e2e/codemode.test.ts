/**
 * Code mode in the app, with the demo model and no key: "sum the sizes of the files slowly" makes the
 * model write a script that `codemode` runs (ls, then a two-second sleep per file); the tab is
 * reloaded while the call runs, and the call still ends once, with the sizes summed: the rerun script
 * got its journaled results back and finished.
 * In the dedicated-worker engine (`?engine=dedicated`), which can start workers, the script runs in
 * a script worker the engine starts (a nested dedicated Worker); the SharedWorker engine cannot start
 * one in Chromium and runs scripts in workers its tabs start (codemode-tabs.test.ts;
 * docs/ARCHITECTURE.md, code mode).
 */
import { expect, test } from "vitest";
import { appSuite, appUrl, lastAnswer, say, settled, uniqueStore, waitPhase } from "./page.ts";

const app = appSuite({ logTail: 100 });

test("the demo model's script runs in codemode and survives a reload mid-call", async () => {
  const page = await app.open({ label: "codemode" });
  // Three answers: it lists the workspace for a free name, writes the note, and says so.
  await say(page, "write a note");
  await settled(page, 3);

  await say(page, "sum the sizes of the files slowly");
  await page.locator('[data-testid="tool-slot"][data-status="running"]').waitFor({ timeout: 60_000 });
  await page.reload();
  await waitPhase(page, "ready");
  await settled(page, 5);

  const last = (await lastAnswer(page).textContent()) ?? "";
  expect(last).toContain("My script ran");
  expect(last).toMatch(/"files":1,"totalBytes":[1-9]\d*/);
  expect(last).toContain("notes/note-1.md:");
  const shown = (await page.locator('[data-testid="entries"]').textContent()) ?? "";
  expect(shown).not.toContain("interrupted");
  expect(shown).not.toContain("replay diverged");
}, 180_000);

test("in the dedicated-worker engine the script runs in a script worker the engine started", async () => {
  const url = appUrl(app.server.url, { store: uniqueStore("codemode-dedicated"), engine: "dedicated" });
  const page = await app.open({ label: "codemode-dedicated", url });
  await say(page, "write a note");
  await settled(page, 3);
  await say(page, "sum the sizes of the files");
  await settled(page, 5);
  const last = (await lastAnswer(page).textContent()) ?? "";
  expect(last).toContain("My script ran");
  expect(last).toMatch(/"files":1,"totalBytes":[1-9]\d*/);
  const workers = page.workers().map((w) => w.url());
  expect(
    workers.some((u) => u.includes("dedicated-worker")),
    workers.join(", "),
  ).toBe(true);
  expect(
    workers.some((u) => u.includes("script-worker")),
    workers.join(", "),
  ).toBe(true);
}, 180_000);
