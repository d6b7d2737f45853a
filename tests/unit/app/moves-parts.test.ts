/**
 * A move package larger than the other home takes in one message, sent in parts (worker/core/move.ts
 * `stage` / `adoptStaged`, worker/app/moves.ts `cutPackage`): adopted exactly as the same package
 * sent whole; each part stored once however often it is sent, durably (a reopen keeps it); a count
 * that disagrees, a refused transfer and more than MAX_STAGED_BYTES in all refused typed; the parts
 * deleted by the adopt or refuse commit; a lost part's call retried by `resume()`, the move whole.
 * Over the peer's row bound: an entry moves (the peer keeps it out of line, decision 0016), a
 * document is cancelled right after step 1, never sent.
 */
import { describe, expect, test } from "vitest";
import { cutPackage, packageTooLarge } from "../../../worker/app/moves.ts";
import { MAX_STAGED_BYTES } from "../../../worker/core/move.ts";
import { HarnessError, harnessPeer, type MovePeer, MoveRefused, Moves } from "../../../worker/index.ts";
import type { MemoryStore } from "../../../worker/store/open.ts";
import { memoryStore } from "../../../worker/testing.ts";
import {
  type Home,
  midToolRound,
  movesSuite,
  openHome,
  release,
  transcript,
  World,
} from "./moves-fixtures.ts";

const suite = movesSuite();

async function home(name: string, world = new World(), options: { held?: boolean } = {}): Promise<Home> {
  const held = options.held ?? name === "browser";
  const h = await openHome({ name, held }, await memoryStore(), world, suite.faux);
  suite.track(h);
  return h;
}

/** The rows a receiver's adopt writes (the move record aside: it carries the adopt's time). */
async function adoptedRows(store: MemoryStore) {
  return store.read(async (sql) => ({
    conversations: await sql.all("SELECT * FROM conversations ORDER BY id"),
    entries: await sql.all("SELECT * FROM entries ORDER BY id"),
    tasks: await sql.all("SELECT * FROM tasks ORDER BY id"),
    documents: await sql.all("SELECT conversation_id, name, value, version FROM documents ORDER BY 1, 2"),
    submissions: await sql.all("SELECT * FROM submissions ORDER BY id"),
  }));
}

const stagedRows = (store: MemoryStore) =>
  store.read(async (sql) => Number((await sql.get("SELECT count(*) AS n FROM move_parts"))?.["n"]));

test("a package adopted from its staged parts is the same conversation, row for row, as the package adopted whole", async () => {
  const world = new World();
  const browser = await home("browser", world);
  // Both held: their runs wait on the stamp call, so each one's rows are the adopt commit's.
  const whole = await home("whole", world, { held: true });
  const inParts = await home("parts", world, { held: true });
  const c = await midToolRound(browser);
  const pkg = await browser.harness.prepareMove("T-same", c);
  const text = JSON.stringify(pkg);
  const parts = cutPackage(text, 2_000);
  expect(parts.length).toBeGreaterThan(2);
  expect(parts.join("")).toBe(text);
  const a = await whole.harness.adoptMove(JSON.parse(text));
  const wholeRows = await adoptedRows(whole.store);
  for (const [i, part] of parts.entries())
    expect(await inParts.harness.stageMovePart("T-same", i, parts.length, part)).toMatchObject({
      status: "staged",
      stored: i + 1,
    });
  const b = await inParts.harness.adoptStagedMove("T-same");
  expect(b).toBe(a);
  expect(await adoptedRows(inParts.store)).toEqual(wholeRows);
  // The adopt commit deleted the parts; again: the same conversation; a late part is ignored.
  expect(await stagedRows(inParts.store)).toBe(0);
  expect(await inParts.harness.adoptStagedMove("T-same")).toBe(b);
  expect(await inParts.harness.stageMovePart("T-same", 0, parts.length, parts[0]!)).toEqual({
    status: "adopted",
    conversationId: b,
  });
  expect(await stagedRows(inParts.store)).toBe(0);
  for (const h of [browser, whole, inParts]) release(h);
});

describe("staging", () => {
  test("a part sent again is stored once (its first text kept), durably across a reopen; a disagreeing count is refused typed", async () => {
    const world = new World();
    const receiver = await home("server", world);
    expect(await receiver.harness.stageMovePart("T-idem", 0, 3, "ab")).toMatchObject({ stored: 1, count: 3 });
    expect(await receiver.harness.stageMovePart("T-idem", 0, 3, "zz")).toMatchObject({ stored: 1, count: 3 });
    const disagree = await receiver.harness.stageMovePart("T-idem", 1, 4, "cd").catch((e: unknown) => e);
    expect(disagree).toBeInstanceOf(MoveRefused);
    expect(disagree).toMatchObject({ reason: "bad_package" });
    await expect(receiver.harness.stageMovePart("T-idem", 3, 3, "cd")).rejects.toMatchObject({
      reason: "bad_package",
    });
    // A part still missing: not final, typed.
    const missing = await receiver.harness.adoptStagedMove("T-idem").catch((e: unknown) => e);
    expect(missing).toBeInstanceOf(HarnessError);
    expect(missing).not.toBeInstanceOf(MoveRefused);
    expect(missing).toMatchObject({ code: "parts_missing" });
    // The engine stops; the next one on the same store still has the part, and its count.
    const image = receiver.store.image();
    await receiver.harness.close();
    const again = await openHome(receiver, await memoryStore(image), world, suite.faux);
    expect(await again.harness.stageMovePart("T-idem", 0, 3, "yy")).toMatchObject({ stored: 1 });
    expect(await again.harness.stageMovePart("T-idem", 1, 3, "cd")).toMatchObject({ stored: 2 });
    const rows = await again.store.read((sql) =>
      sql.all("SELECT idx, part FROM move_parts WHERE transfer = 'T-idem' ORDER BY idx"),
    );
    expect(rows).toEqual([
      { idx: 0, part: "ab" },
      { idx: 1, part: "cd" },
    ]);
    // The parts do not make a package: refused typed, nothing adopted.
    await again.harness.stageMovePart("T-idem", 2, 3, "ef");
    await expect(again.harness.adoptStagedMove("T-idem")).rejects.toMatchObject({ reason: "bad_package" });
  });

  test("refuse deletes a transfer's parts, and a part of a refused transfer is refused", async () => {
    const receiver = await home("server");
    await receiver.harness.stageMovePart("T-ref", 0, 2, "{");
    expect(await stagedRows(receiver.store)).toBe(1);
    expect(await receiver.harness.refuseMove("T-ref")).toEqual({ status: "refused" });
    expect(await stagedRows(receiver.store)).toBe(0);
    const late = await receiver.harness.stageMovePart("T-ref", 1, 2, "}").catch((e: unknown) => e);
    expect(late).toBeInstanceOf(MoveRefused);
    expect(late).toMatchObject({ reason: "refused" });
    await expect(receiver.harness.adoptStagedMove("T-ref")).rejects.toMatchObject({ reason: "refused" });
    expect(await stagedRows(receiver.store)).toBe(0);
  });

  test("a transfer stages at most MAX_STAGED_BYTES (UTF-8) in all: the part over it is refused too_large, in words", async () => {
    const receiver = await home("server");
    const half = Math.floor(MAX_STAGED_BYTES / 2);
    await receiver.harness.stageMovePart("T-big", 0, 3, "x".repeat(half));
    // Its characters fit; its bytes (2 each) do not.
    const over = await receiver.harness
      .stageMovePart("T-big", 1, 3, "é".repeat(Math.floor(half / 2) + 1))
      .catch((e: unknown) => e);
    expect(over).toBeInstanceOf(MoveRefused);
    expect(over).toMatchObject({ reason: "too_large" });
    expect((over as Error).message).toContain("too large to move");
    expect(await stagedRows(receiver.store)).toBe(1);
    await receiver.harness.stageMovePart("T-big", 1, 3, "é".repeat(Math.floor(half / 2) - 10));
    expect(await stagedRows(receiver.store)).toBe(2);
  });
});

describe("cutting", () => {
  test("each part fits one message as the limit counts it, surrogate pairs are never split, the text is cut the same way every time", () => {
    const text = JSON.stringify({ s: `"q\\${"é😀".repeat(500)}\ud800x`.repeat(3) });
    const parts = cutPackage(text, 1_000);
    expect(parts.join("")).toBe(text);
    expect(cutPackage(text, 1_000)).toEqual(parts);
    for (const part of parts) {
      expect(new TextEncoder().encode(JSON.stringify(["moves.stage", "T", 1, 2, part])).length).toBeLessThan(
        1_000,
      );
      const last = part.charCodeAt(part.length - 1);
      if (part !== parts.at(-1))
        expect(last >= 0xd800 && last <= 0xdbff && part.at(-1) !== "\ud800").toBe(false);
    }
  });
});

describe("the orchestrator", () => {
  async function pair(options: { loseStage?: number } = {}) {
    const world = new World();
    const browser = await home("browser", world);
    const server = await home("server", world);
    const heard: string[] = [];
    const real = harnessPeer(() => server.harness);
    let lose = options.loseStage;
    const peer: MovePeer = {
      ...real,
      adopt: (pkg) => {
        heard.push("adopt");
        return real.adopt(pkg);
      },
      stage: async (transfer, index, count, part) => {
        heard.push(`stage ${index}/${count}`);
        if (lose !== undefined && index === lose) {
          lose = undefined;
          throw new Error("the connection was lost");
        }
        return real.stage!(transfer, index, count, part);
      },
      adoptStaged: (transfer) => {
        heard.push("adoptStaged");
        return real.adoptStaged!(transfer);
      },
    };
    return { browser, server, peer, heard };
  }

  test("a package over the peer's message limit moves in parts and the run finishes there whole", async () => {
    const { browser, server, peer, heard } = await pair();
    const c = await midToolRound(browser);
    const limit = 2_000;
    const moves = new Moves(browser.harness, {
      peer: () => peer,
      maxPackageChars: () => limit,
      maxStagedBytes: () => MAX_STAGED_BYTES,
    });
    const result = await moves.moveOut(c, "server");
    expect(result.status).toBe("done");
    const remote = (result as { remote: number }).remote;
    expect(heard).not.toContain("adopt");
    const count = Number(heard[0]!.split("/")[1]);
    expect(count).toBeGreaterThan(1);
    expect(heard).toEqual([...Array.from({ length: count }, (_, i) => `stage ${i}/${count}`), "adoptStaged"]);
    expect(await stagedRows(server.store)).toBe(0);
    expect(browser.harness.awayOf(c)).toMatchObject({ status: "done", remote });
    release(server);
    await server.harness.waitForConversationIdle(remote);
    const there = transcript(await server.harness.requireConversation(remote).entries());
    expect(there.at(-1)).toContain("done second");
    expect(there.filter((line) => line.includes("done first"))).toHaveLength(1);
  });

  test("a document larger than the peer stores in a row: cancelled right after step 1, in words, never sent; it runs here", async () => {
    const { browser, peer, heard } = await pair();
    const c = await midToolRound(browser);
    await browser.harness.transaction((tx) => tx.writeDoc(c, "app.big", { text: "d".repeat(200_000) }));
    const moves = new Moves(browser.harness, {
      peer: () => peer,
      maxPackageChars: () => 2_000,
      maxStagedBytes: () => MAX_STAGED_BYTES,
      maxValueBytes: () => 100_000,
    });
    const result = await moves.moveOut(c, "server");
    expect(result).toMatchObject({ status: "cancelled" });
    expect((result as { reason: string }).reason).toMatch(
      /too large to move: one of its documents is 200,\d{3} bytes, and the server stores at most 100,000 bytes in one/,
    );
    expect(heard).toEqual([]);
    expect(browser.harness.awayOf(c)).toBeUndefined();
    // Still this home's: it runs here.
    release(browser);
    await browser.harness.waitForConversationIdle(c);
    expect(transcript(await browser.harness.requireConversation(c).entries()).at(-1)).toContain(
      "done second",
    );
  });

  test("an entry larger than the peer stores in a row moves: the peer keeps its long strings out of line, the entry whole", async () => {
    const world = new World();
    const browser = await home("browser", world);
    const server = await openHome({ name: "server", held: false }, await memoryStore(), world, suite.faux, {
      maxValueBytes: 100_000,
    });
    suite.track(server);
    const c = await midToolRound(browser);
    const big = { text: "e".repeat(300_000) };
    await browser.harness.transaction((tx) => tx.appendEntry(c, { kind: "app.note", data: big }));
    const moves = new Moves(browser.harness, {
      peer: () => harnessPeer(() => server.harness),
      maxPackageChars: () => 2_000,
      maxStagedBytes: () => MAX_STAGED_BYTES,
      maxValueBytes: () => 100_000,
    });
    const result = await moves.moveOut(c, "server");
    expect(result.status).toBe("done");
    const remote = (result as { remote: number }).remote;
    const there = await server.harness.requireConversation(remote).entries();
    expect(there.filter((e) => e.kind === "app.note").map((e) => e.data)).toEqual([big]);
    const rows = await server.store.read(async (sql) => ({
      longest: Number((await sql.get("SELECT max(length(body)) AS n FROM entries"))?.["n"]),
      spilled: Number((await sql.get("SELECT count(*) AS n FROM spills"))?.["n"]),
    }));
    expect(rows.longest).toBeLessThan(100_000);
    expect(rows.spilled).toBeGreaterThan(0);
    release(server);
    await server.harness.waitForConversationIdle(remote);
    expect(transcript(await server.harness.requireConversation(remote).entries()).at(-1)).toContain(
      "done second",
    );
  });

  test("a part's call lost: the move stays pending; resume() sends the parts again and it ends whole, once", async () => {
    const { browser, server, peer, heard } = await pair({ loseStage: 2 });
    const c = await midToolRound(browser);
    const moves = new Moves(browser.harness, {
      peer: () => peer,
      maxPackageChars: () => 2_000,
      maxStagedBytes: () => MAX_STAGED_BYTES,
    });
    await expect(moves.moveOut(c, "server")).rejects.toThrow("the connection was lost");
    expect(moves.list().map((i) => i.step)).toEqual(["prepared"]);
    expect(await stagedRows(server.store)).toBe(2);
    const [outcome] = await moves.resume();
    expect(outcome).toMatchObject({ status: "fulfilled", value: { status: "done" } });
    expect(heard.filter((h) => h === "adoptStaged")).toHaveLength(1);
    expect(await stagedRows(server.store)).toBe(0);
    expect(
      server.harness.conversationRecords().filter((r) => r.id !== 1 && r.owner === undefined),
    ).toHaveLength(1);
    release(server);
    const remote = moves.list()[0]!.remote!;
    await server.harness.waitForConversationIdle(remote);
    expect(transcript(await server.harness.requireConversation(remote).entries()).at(-1)).toContain(
      "done second",
    );
  });

  test("a package over the staged bound: cancelled at once after step 1, never sent, too_large in words", async () => {
    const { browser, peer, heard } = await pair();
    const c = await midToolRound(browser);
    const pkg = await browser.harness.prepareMove("probe", c);
    await browser.harness.cancelMove("probe");
    const bytes = new TextEncoder().encode(JSON.stringify(pkg)).length;
    expect(packageTooLarge(pkg, 2_000)).toBe(true);
    const moves = new Moves(browser.harness, {
      peer: () => peer,
      maxPackageChars: () => 2_000,
      maxStagedBytes: () => bytes - 1_000,
    });
    const result = await moves.moveOut(c, "server");
    expect(result).toMatchObject({ status: "cancelled" });
    expect((result as { reason: string }).reason).toContain("too large to move");
    expect(heard).toEqual([]);
    expect(browser.harness.awayOf(c)).toBeUndefined();
    release(browser);
    await browser.harness.waitForConversationIdle(c);
    expect(transcript(await browser.harness.requireConversation(c).entries()).at(-1)).toContain(
      "done second",
    );
  });
});
