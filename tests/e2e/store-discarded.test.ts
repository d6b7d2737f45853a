/**
 * A store the browser discarded (worker/core/store-identity.ts, docs/ARCHITECTURE.md "The kill storm
 * in the browser"): Chromium deletes an origin's IndexedDB when it finds its LevelDB damaged after a
 * crash. Simulated here the way Chromium does it: the browser is SIGKILLed and the profile's
 * IndexedDB folder removed before it runs again. The app must never open the empty store silently:
 * the tab says in words that the browser deleted the saved data, names the export made before, and
 * waits; only "Start fresh" goes on, and a later run takes the new store as it is.
 * The store is made by a page that forces the idb kind (as every build before opfs-lent shipped),
 * and the later runs leave the kind to the engine: the idb store's marker keeps it idb
 * (worker/browser/store-kind.ts), so the discard is still reported, never taken for a new store.
 */
import { existsSync } from "node:fs";
import { rm } from "node:fs/promises";
import { join } from "node:path";
import { expect, test } from "vitest";
import { engine } from "./browser.ts";
import { appSuite, appUrl, say, settled, storeKindOf, uniqueStore, until, waitPhase } from "./page.ts";

const app = appSuite();

test("the browser deleted the IndexedDB store between runs: the tab says so in words, names the export, writes nothing until 'Start fresh', and the fresh store is kept from then on", async () => {
  const store = uniqueStore("discarded");
  const url = appUrl(app.server.url, { store });
  const page = await app.open({
    url: appUrl(app.server.url, { store, storeKind: "idb" }),
    label: "before",
    composer: true,
  });
  expect(await storeKindOf(page)).toBe("idb");
  await say(page, "remember the green umbrella");
  await settled(page, 1);
  const { fileName } = await engine<{ fileName: string }>(page, "conversations.export", 1);

  // The browser dies and, as Chromium does after finding its LevelDB damaged, deletes the origin's
  // IndexedDB before the app runs again.
  await app.browser.kill();
  const idb = join(app.browser.profileDir, "Default", "IndexedDB");
  expect(existsSync(idb)).toBe(true);
  await rm(idb, { recursive: true, force: true });
  let browser = await app.relaunch();

  const after = await app.open({ url, label: "after", phase: "failed", browser });
  const banner = after.locator('[data-testid="engine-error"]');
  expect(await banner.getAttribute("data-reason")).toBe("discarded");
  const words = (await banner.textContent()) ?? "";
  expect(words).toContain("The browser deleted this app's saved data");
  expect(words).toContain("the conversations kept in this browser are gone");
  expect(await after.locator('[data-testid="discarded-export"]').textContent()).toContain(
    `You exported "${fileName}" on`,
  );
  expect(words).toContain(`import "${fileName}"`);
  expect(words).not.toMatch(/Error:|at \w+ \(|\.js:\d+/);
  // Nothing empty is shown as if it were the user's data: no conversation, no composer.
  expect(await after.locator('[data-testid="engine-status"]').getAttribute("data-phase")).toBe("failed");
  expect(await after.getByLabel("message").count()).toBe(0);

  // "Start fresh": the engine opens the empty store and gets ready.
  await after.getByRole("button", { name: "Start fresh" }).click();
  await waitPhase(after, "ready");
  const fresh = await engine<Array<{ kind: string }>>(after, "watches.entries", 1);
  expect(fresh.filter((e) => e.kind === "pi.user")).toEqual([]);
  await say(after, "a new beginning");
  await settled(after, 1);

  // The next run finds the store its marker names: ready, with what was written since.
  browser = await app.relaunch();
  const again = await app.open({ url, label: "again", composer: true, browser });
  expect(await storeKindOf(again)).toBe("idb");
  await until(
    "the message written after starting fresh",
    () => again.locator('[data-testid="entries"] > [data-kind="pi.user"] .text').allTextContents(),
    (texts) => texts.includes("a new beginning"),
  );
});
