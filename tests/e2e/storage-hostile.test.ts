/**
 * Issue 28, part 3, the storage door in a real Chromium, through the app a person uses:
 * - the origin's quota shrunk below the store's size (CDP `Storage.overrideQuotaForOrigin`): the app
 *   says in words that storage is full, every answered message stays, and once space is freed (the
 *   override lifted) a reload goes on: a new message is answered and the earlier ones are all there;
 * - the store's database file damaged between two runs of the browser (SIGKILL, then the first page's
 *   SQLite header overwritten, from a page of the origin without the app's engine: in the opfs file
 *   of the shipped kind, and in wa-sqlite's IndexedDB block records of an idb store): `corrupt` at
 *   open, said in words, and "Download the damaged store" hands over the file's bytes, from which
 *   SQLite reads every earlier message once its header is mended.
 * The quota test runs on the shipped kind (opfs-lent: OPFS counts toward the origin's quota too).
 * The error screens are photographed at 390 px, light and dark.
 */
import { readFile } from "node:fs/promises";
import type { Page } from "playwright-core";
import { expect, test } from "vitest";
import { openStore } from "../../worker/store/open.ts";
import { StoreOpenError } from "../../worker/store/types.ts";
import { engine } from "./browser.ts";
import {
  appSuite,
  appUrl,
  say,
  settleAnimations,
  settled,
  shot,
  storeKindOf,
  uniqueStore,
  until,
  waitPhase,
} from "./page.ts";

const app = appSuite();

const userTexts = (page: Page) =>
  page.locator('[data-testid="entries"] > [data-kind="pi.user"] .text').allTextContents();

/** The failed banner at 390 px in light and dark, saved as `name-<scheme>-390.png`. */
async function photograph(page: Page, name: string): Promise<string[]> {
  const paths: string[] = [];
  await page.setViewportSize({ width: 390, height: 844 });
  for (const scheme of ["light", "dark"] as const) {
    await page.emulateMedia({ colorScheme: scheme });
    await settleAnimations(page);
    const path = shot(`${name}-${scheme}-390`);
    await page.screenshot({ path });
    paths.push(path);
  }
  return paths;
}

test("storage full: the origin's quota shrunk below the store's size; the app says storage is full in words, keeps every answer, and goes on once space is freed", async () => {
  const url = appUrl(app.server.url, { store: uniqueStore("quota-chat") });
  const origin = new URL(app.server.url).origin;
  const page = await app.open({ url, label: "quota", composer: true });
  expect(await storeKindOf(page)).toBe("opfs-lent");
  const sent = ["the first question", "the second question", "the third question"];
  for (const [i, text] of sent.entries()) {
    await say(page, text);
    await settled(page, i + 1);
  }
  expect(await userTexts(page)).toEqual(sent);

  const cdp = await app.browser.context.newCDPSession(page);
  const { usage } = await page.evaluate(() => navigator.storage.estimate());
  // Below what the store already holds: any write that needs new space fails.
  await cdp.send("Storage.overrideQuotaForOrigin", { origin, quotaSize: Math.floor((usage ?? 0) / 2) });
  // Chromium re-reads the space left only now and then: grow the store until a COMMIT is refused.
  await until(
    "a commit refused for want of space",
    () =>
      engine(page, "debug.seed", { tasks: 200, batch: 200 }).then(
        () => "",
        (e: unknown) => String(e),
      ),
    (e) => e !== "",
  );
  await waitPhase(page, "failed");
  const banner = page.locator('[data-testid="engine-error"]');
  expect(await banner.getAttribute("data-reason")).toBe("quota");
  const words = (await banner.textContent()) ?? "";
  expect(words).toContain("This site's storage is full, so nothing new can be saved.");
  expect(words).toContain("everything committed so far is kept");
  // Words, not a stack or an SQLite code.
  expect(words).not.toMatch(/SQLITE|Error:|at \w+ \(|\.js:\d+/);
  expect(await page.locator('[data-testid="engine-status"]').textContent()).toMatch(/storage is full/);
  // Every acknowledged message and its answer is still on screen.
  expect(await userTexts(page)).toEqual(sent);
  await photograph(page, "storage-full");

  // Space comes back: the override lifted, a reload reopens the store; the earlier messages are all
  // there, and a new one is answered.
  await cdp.send("Storage.overrideQuotaForOrigin", { origin });
  await cdp.detach();
  await page.setViewportSize({ width: 1280, height: 800 });
  await page.reload();
  await waitPhase(page, "ready");
  await page.getByLabel("message").waitFor();
  await settled(page, sent.length);
  expect(await userTexts(page)).toEqual(sent);
  await say(page, "the question after space was freed");
  await settled(page, sent.length + 1);
  expect(await userTexts(page)).toEqual([...sent, "the question after space was freed"]);
});

/** Overwrite the SQLite header of page 1 of the store's file, where its kind keeps it. */
function damageFirstPage(page: Page, store: string, kind: "idb" | "opfs-lent") {
  return kind === "idb" ? damageIdbFirstPage(page, store) : damageOpfsFirstPage(page, store);
}

/** Overwrite the SQLite header at the start of the opfs store's file (`stores/<store>.db` in OPFS). */
function damageOpfsFirstPage(page: Page, store: string) {
  return page.evaluate(async (store) => {
    const dir = await (await navigator.storage.getDirectory()).getDirectoryHandle("stores");
    const handle = await dir.getFileHandle(`${store}.db`);
    const fileSize = (await handle.getFile()).size;
    const writable = await handle.createWritable({ keepExistingData: true });
    await writable.write({ type: "write", position: 0, data: new TextEncoder().encode("not a database!!") });
    await writable.close();
    return { damaged: 1, fileSize };
  }, store);
}

/** The sizes of the opfs store's database file and its write-ahead log (0 when there is none). */
function opfsFileSizes(page: Page, store: string) {
  return page.evaluate(async (store) => {
    const dir = await (await navigator.storage.getDirectory()).getDirectoryHandle("stores");
    const size = async (name: string) => {
      try {
        return (await (await dir.getFileHandle(name)).getFile()).size;
      } catch (error) {
        if (error instanceof DOMException && error.name === "NotFoundError") return 0;
        throw error;
      }
    };
    return { db: await size(`${store}.db`), wal: await size(`${store}.db-wal`) };
  }, store);
}

/** Overwrite the SQLite header of page 1 in every IndexedDB block record that holds it. */
function damageIdbFirstPage(page: Page, store: string) {
  return page.evaluate(async (store) => {
    const db = await new Promise<IDBDatabase>((resolve, reject) => {
      const open = indexedDB.open(store);
      open.onsuccess = () => resolve(open.result);
      open.onerror = () => reject(open.error);
    });
    const path = `/${store}.db`;
    const tx = db.transaction(["blocks", "metadata"], "readwrite");
    const blocks = tx.objectStore("blocks");
    let damaged = 0;
    const fileSize = await new Promise<number>((resolve, reject) => {
      const get = tx.objectStore("metadata").get(path);
      get.onsuccess = () => resolve((get.result as { fileSize: number }).fileSize);
      get.onerror = () => reject(get.error);
    });
    await new Promise<void>((resolve, reject) => {
      const cursor = blocks.openCursor(IDBKeyRange.bound([path, -1e15], [path, 1e15]));
      cursor.onsuccess = () => {
        const at = cursor.result;
        if (!at) return resolve();
        const block = at.value as { offset: number; data: Uint8Array };
        if (-block.offset === 0) {
          // "SQLite format 3\0" becomes garbage: the file is no longer a database to SQLite.
          block.data.set(new TextEncoder().encode("not a database!!"), 0);
          at.update(block);
          damaged++;
        }
        at.continue();
      };
      cursor.onerror = () => reject(cursor.error);
    });
    await new Promise<void>((resolve, reject) => {
      tx.oncomplete = () => resolve();
      tx.onerror = () => reject(tx.error);
    });
    db.close();
    return { damaged, fileSize };
  }, store);
}

// Both kinds a SharedWorker engine opens: the shipped one (a new store is opfs-lent) and idb (the
// stores of profiles from before it, and browsers without OPFS sync access handles).
test.each([
  { kind: "opfs-lent" as const, params: {} },
  { kind: "idb" as const, params: { storeKind: "idb" } },
])(
  "a store damaged between runs ($kind): corrupt at open, said in words, and the damaged store downloads with every earlier message readable",
  async ({ kind, params }) => {
    const store = uniqueStore(`damaged-${kind}`);
    const url = appUrl(app.server.url, { store, ...params });
    const page = await app.open({ url, label: "before", composer: true });
    expect(await storeKindOf(page)).toBe(kind);
    const sent = ["remember the blue teapot", "and the seventh lighthouse"];
    for (const [i, text] of sent.entries()) {
      await say(page, text);
      await settled(page, i + 1);
    }

    if (kind === "opfs-lent") {
      // The opfs store runs in WAL mode: its commits are in its log until the line, quiet for 2 s,
      // checkpoints them into the database file (worker/store/browser.ts, OPFS_IDLE_CHECKPOINT_MS).
      // The damage below is to that file, as a store that was quiet for a while has it.
      await until(
        "the store's log checkpointed into its file",
        () => opfsFileSizes(page, store),
        (sizes) => sizes.db > 0 && sizes.wal === 0,
      );
    }

    // The browser dies; before the app runs again, its store's first page is damaged on disk.
    const browser = await app.relaunch();
    const other = app.record(await browser.newPage(), "damage");
    // A page of the origin without the app (the server's 404): no engine holds the store.
    await other.goto(`${app.server.url}no-app-here`);
    const { damaged, fileSize } = await damageFirstPage(other, store, kind);
    expect(damaged).toBeGreaterThan(0);
    await other.close();

    const after = await app.open({ url, label: "after", phase: "failed", browser });
    const banner = after.locator('[data-testid="engine-error"]');
    expect(await banner.getAttribute("data-reason")).toBe("corrupt");
    const words = (await banner.textContent()) ?? "";
    expect(words).toMatch(/The store could not be opened \(corrupt\)\./);
    expect(words).toContain("The saved data is damaged: part of it can no longer be read.");
    expect(words).toContain("Export what can be read, then reset the store.");
    expect(words).not.toMatch(/SQLITE|Error:|at \w+ \(|\.js:\d+/);
    expect(await after.locator('[data-testid="engine-status"]').textContent()).toMatch(/damaged/);

    const [download] = await Promise.all([
      after.waitForEvent("download"),
      after.getByRole("button", { name: "Download the damaged store" }).click(),
    ]);
    expect(download.suggestedFilename()).toBe(`${store}-damaged.sqlite`);
    const bytes = new Uint8Array(await readFile((await download.path()) as string));
    expect(bytes.byteLength).toBe(fileSize);
    await until(
      "the download's words",
      () => after.locator('[data-testid="download-damaged-status"]').textContent(),
      (t) => /^Saved [\d.]+ KB\. A SQLite recovery tool/.test(t ?? ""),
    );
    await photograph(after, `storage-damaged-${kind}`);

    // The download is the damaged file itself: SQLite refuses it as corrupt...
    const asIs = await openStore({
      kind: "memory",
      name: "download",
      image: [{ path: "/download.db", bytes }],
    }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(asIs).toBeInstanceOf(StoreOpenError);
    expect((asIs as StoreOpenError).reason).toBe("corrupt");
    // ...and with its header mended, every message sent before the damage reads back.
    const mended = bytes.slice();
    mended.set(new TextEncoder().encode("SQLite format 3\0"), 0);
    const line = await openStore({
      kind: "memory",
      name: "mended",
      image: [{ path: "/mended.db", bytes: mended }],
    });
    const rows = await line.read((sql) =>
      sql.all("SELECT body FROM entries WHERE kind = 'pi.user' ORDER BY id"),
    );
    await line.close();
    const texts = rows.map((r) => String(r["body"]));
    for (const text of sent) expect(texts.some((body) => body.includes(text))).toBe(true);
  },
);
