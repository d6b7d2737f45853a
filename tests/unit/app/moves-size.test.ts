/**
 * A conversation larger than the other home takes in one message (worker/app/moves.ts
 * `maxPackageChars`, the server's message limit in the browser engine: remote-peer.ts): refused
 * `too_large` with nothing written when its entries alone are over the limit, and, when only the
 * whole package is (its documents and tasks besides), cancelled at once after step 1 without ever
 * being sent: the peer hears nothing, the conversation runs here again and finishes whole. This is
 * the orchestrator without `maxStagedBytes` (a peer that takes no parts); with it, a larger package
 * goes in parts up to that bound (moves-parts.test.ts).
 */
import { expect, test } from "vitest";
import { packageTooLarge } from "../../../worker/app/moves.ts";
import type { MovePackage } from "../../../worker/core/move.ts";
import { harnessPeer, type MovePeer, MoveRefused, Moves } from "../../../worker/index.ts";
import { memoryStore } from "../../../worker/testing.ts";
import { midToolRound, movesSuite, openHome, release, transcript, World } from "./moves-fixtures.ts";

const suite = movesSuite();

async function homes() {
  const world = new World();
  const browser = await openHome({ name: "browser", held: true }, await memoryStore(), world, suite.faux);
  const server = await openHome({ name: "server", held: false }, await memoryStore(), world, suite.faux);
  suite.track(browser, server);
  const heard: string[] = [];
  const real = harnessPeer(() => server.harness);
  const hear =
    <A extends unknown[], R>(name: string, call: (...a: A) => R) =>
    (...a: A): R => {
      heard.push(name);
      return call(...a);
    };
  const peer: MovePeer = {
    prepare: hear("prepare", real.prepare),
    adopt: hear("adopt", real.adopt),
    finish: hear("finish", real.finish),
    refuse: hear("refuse", real.refuse),
    cancel: hear("cancel", real.cancel),
  };
  return { browser, server, peer, heard };
}

test("entries over the limit: refused too_large before step 1, nothing written, nothing sent", async () => {
  const { browser, peer, heard } = await homes();
  const c = await midToolRound(browser);
  const entries = JSON.stringify(await browser.harness.requireConversation(c).entries()).length;
  const moves = new Moves(browser.harness, { peer: () => peer, maxPackageChars: () => entries - 1 });
  const refused = await moves.moveOut(c, "server").catch((e: unknown) => e);
  expect(refused).toBeInstanceOf(MoveRefused);
  expect(refused).toMatchObject({ reason: "too_large" });
  expect((refused as Error).message).toContain("too large to move");
  expect(moves.list()).toEqual([]);
  expect(browser.harness.awayOf(c)).toBeUndefined();
  expect(heard).toEqual([]);
  release(browser);
  await browser.harness.waitForConversationIdle(c);
  expect(transcript(await browser.harness.requireConversation(c).entries()).at(-1)).toContain("done second");
});

test("a package over the limit (its entries under it): cancelled at once after step 1, never sent; it runs here again", async () => {
  const { browser, peer, heard } = await homes();
  const c = await midToolRound(browser);
  const entries = JSON.stringify(await browser.harness.requireConversation(c).entries()).length;
  const moves = new Moves(browser.harness, { peer: () => peer, maxPackageChars: () => entries + 10 });
  const result = await moves.moveOut(c, "server");
  expect(result).toMatchObject({ status: "cancelled" });
  expect((result as { reason: string }).reason).toContain("too large to move");
  expect(heard).toEqual([]);
  expect(browser.harness.awayOf(c)).toBeUndefined();
  expect(moves.list().map((i) => i.step)).toEqual(["cancelled"]);
  release(browser);
  await browser.harness.waitForConversationIdle(c);
  expect(transcript(await browser.harness.requireConversation(c).entries()).at(-1)).toContain("done second");
});

test("the size is counted as UTF-8 bytes (workerd's limit) and as the door counts, not only as characters", () => {
  const pkg = (text: string, numbers = 0) =>
    ({
      entries: [{ id: 1, text, n: Array.from({ length: numbers }, (_, i) => i) }],
    }) as unknown as MovePackage;
  expect(packageTooLarge(pkg("e".repeat(600)), 1000)).toBe(false);
  // 600 characters, 1,200 bytes.
  expect(packageTooLarge(pkg("é".repeat(600)), 1000)).toBe(true);
  // Short as text (about 400 characters), over as the door counts (24 for each number).
  expect(JSON.stringify(pkg("", 100)).length).toBeLessThan(1000);
  expect(packageTooLarge(pkg("", 100), 1000)).toBe(true);
});
