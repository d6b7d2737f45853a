/**
 * The SharedWorker's store kind in Chromium (worker/browser/store-kind.ts, decision 0015): a new
 * store is `opfs-lent`; a profile whose store lives in IndexedDB (made by the build before, which
 * shipped idb) opens as idb with its conversations, whether or not that build wrote the store's
 * marker (stores older than markers have none). Each store is made, the browser SIGKILLed and
 * relaunched, and the store opened again by a page that leaves the kind to the engine.
 */
import type { Page } from "playwright-core";
import { expect, test } from "vitest";
import { appSuite, appUrl, say, settled, storeKindOf, uniqueStore, until } from "./page.ts";

const app = appSuite();

const userTexts = (page: Page) =>
  page.locator('[data-testid="entries"] > [data-kind="pi.user"] .text').allTextContents();

/** Where the origin keeps each kind's store and marker, as a page of it sees them. */
const onDisk = (page: Page, store: string) =>
  page.evaluate(async (store) => {
    const root = await navigator.storage.getDirectory();
    const has = async (dir: string, file: string) => {
      try {
        await (await root.getDirectoryHandle(dir)).getFileHandle(file);
        return true;
      } catch {
        return false;
      }
    };
    return {
      idbDatabase: (await indexedDB.databases()).some((d) => d.name === store),
      opfsFile: await has("stores", `${store}.db`),
      idbMarker: await has("store-markers", `idb-${encodeURIComponent(store)}.json`),
      opfsLentMarker: await has("store-markers", `opfs-lent-${encodeURIComponent(store)}.json`),
    };
  }, store);

test("a new store is opfs-lent: its file and marker are in OPFS, nothing in IndexedDB, and it opens as opfs-lent again after a SIGKILL", async () => {
  const store = uniqueStore("kind-new");
  const url = appUrl(app.server.url, { store });
  const page = await app.open({ url, label: "new", composer: true });
  expect(await storeKindOf(page)).toBe("opfs-lent");
  await say(page, "remember the red kite");
  await settled(page, 1);
  await until(
    "the store's marker written",
    () => onDisk(page, store),
    (d) => d.opfsLentMarker,
  );
  expect(await onDisk(page, store)).toEqual({
    idbDatabase: false,
    opfsFile: true,
    idbMarker: false,
    opfsLentMarker: true,
  });

  const browser = await app.relaunch();
  const again = await app.open({ url, label: "again", composer: true, browser });
  expect(await storeKindOf(again)).toBe("opfs-lent");
  await settled(again, 1);
  expect(await userTexts(again)).toEqual(["remember the red kite"]);
});

test.each([
  { marker: "with its marker", dropMarker: false },
  { marker: "older than markers (none)", dropMarker: true },
])(
  "a profile whose store is in IndexedDB from the build before ($marker) opens as idb with its conversations, and nothing is made in OPFS",
  async ({ dropMarker }) => {
    const store = uniqueStore("kind-old");
    // The build before: every store was idb (here forced, which lays it out exactly as that build did).
    const before = await app.open({
      url: appUrl(app.server.url, { store, storeKind: "idb" }),
      label: "old build",
      composer: true,
    });
    expect(await storeKindOf(before)).toBe("idb");
    const sent = ["the first question", "the second question"];
    for (const [i, text] of sent.entries()) {
      await say(before, text);
      await settled(before, i + 1);
    }
    await until(
      "the store's marker written",
      () => onDisk(before, store),
      (d) => d.idbMarker,
    );
    if (dropMarker)
      await before.evaluate(
        async (file) => {
          const dir = await (await navigator.storage.getDirectory()).getDirectoryHandle("store-markers");
          await dir.removeEntry(file);
        },
        `idb-${encodeURIComponent(store)}.json`,
      );

    const browser = await app.relaunch();
    const after = await app.open({
      url: appUrl(app.server.url, { store }),
      label: "new build",
      composer: true,
      browser,
    });
    expect(await storeKindOf(after)).toBe("idb");
    await settled(after, sent.length);
    expect(await userTexts(after)).toEqual(sent);
    await say(after, "the question after the update");
    await settled(after, sent.length + 1);
    expect(await userTexts(after)).toEqual([...sent, "the question after the update"]);
    const disk = await onDisk(after, store);
    expect(disk).toMatchObject({ idbDatabase: true, opfsFile: false, opfsLentMarker: false });
    // A store that had no marker gets one now (the store's identity: worker/core/store-identity.ts).
    await until(
      "the idb store's marker",
      () => onDisk(after, store),
      (d) => d.idbMarker,
    );
  },
);
