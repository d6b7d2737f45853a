/**
 * Head writes and staleness (spec §6): an entry with `head` starts the active range at that entry.
 * A head write whose head is older than where the active range starts now is stale: it is answered
 * `unanswered: stale` and never placed, whether placed at once or queued for a boundary (where heads
 * placed earlier at the same boundary count). User inputs never become stale.
 */
import { fauxToolCall } from "@mariozechner/pi-ai";
import { describe, expect, test } from "vitest";
import { AgentHarness, InvalidTransition } from "../../worker/index.ts";
import { openStore } from "../../worker/store/open.ts";
import { fauxAgentModel, memoryStore } from "../../worker/testing.ts";
import { callsThenAnswer, cleanups, echo, gatedTool, inboxOf, open, transcript } from "./agent-fixtures.ts";

const note = (n: number, head?: number) => ({
  type: "write" as const,
  entry: { kind: "app.note", data: { n }, model: [], ...(head !== undefined ? { head } : {}) },
});

describe("head writes", () => {
  test("placed at once: a head older than the active range start is stale; at or after it is placed", async () => {
    const { root } = await open(echo);
    for (let n = 1; n <= 3; n++) expect((await (await root.submit(note(n))).wait()).status).toBe("done");
    const cut = await (await root.submit(note(4, 3))).wait(); // entry 4: the range starts at 3
    expect(cut.status).toBe("done");
    expect(await (await root.submit(note(5, 2))).wait()).toEqual({ status: "unanswered", reason: "stale" });
    expect((await (await root.submit(note(6, 3))).wait()).status).toBe("done");
    const kept = (await transcript(root)).map((e) => (e.data as { n: number }).n);
    expect(kept).toEqual([1, 2, 3, 4, 6]);
  });

  test("queued at a boundary: a head placed earlier at the same boundary makes a later, older one stale", async () => {
    const hold = gatedTool();
    const { h, root } = await open(callsThenAnswer(fauxToolCall("hold", {}, { id: "call-1" })), {
      tools: [hold.tool],
    });
    for (let n = 1; n <= 2; n++) await (await root.submit(note(n))).wait();
    const run = await root.submit({ type: "input", content: "go" }); // entry 3
    await hold.started.promise;
    const newer = await root.submit(note(10, 3));
    const older = await root.submit(note(11, 2));
    expect(inboxOf(h).items).toHaveLength(2);
    hold.release.open();
    expect((await newer.wait()).status).toBe("done");
    expect(await older.wait()).toEqual({ status: "unanswered", reason: "stale" });
    expect((await run.wait()).status).toBe("done");
    expect(inboxOf(h).items).toEqual([]);
    const notes = (await transcript(root))
      .filter((e) => e.kind === "app.note")
      .map((e) => (e.data as { n: number }).n);
    expect(notes).toEqual([1, 2, 10]);
  });

  test("a head that names no earlier entry is refused at submit", async () => {
    const { root } = await open(echo);
    await (await root.submit(note(1))).wait();
    for (const head of [0, -1, 1.5, 99])
      await expect(root.submit(note(2, head))).rejects.toThrow(InvalidTransition);
  });

  test("the active range start survives a restart, and is found in a store written before the head column", async () => {
    // A schema-1 store holding a head marker only in the entry's body.
    const old = await openStore({ kind: "memory", targetVersion: 1 });
    await old.commit(async (sql) => {
      await sql.run("INSERT INTO conversations (id, created_at) VALUES (1, 0)");
      for (let id = 1; id <= 3; id++)
        await sql.run("INSERT INTO entries (id, conversation_id, kind, body) VALUES (?, 1, 'app.note', ?)", [
          id,
          JSON.stringify({ data: { n: id }, model: [], ...(id === 3 ? { head: 2 } : {}) }),
        ]);
    });
    const image = old.image();
    await old.close();
    const faux = fauxAgentModel(echo);
    const h = await AgentHarness.open(await memoryStore(image), {
      models: faux.models,
      defaultModel: faux.ref,
    });
    cleanups.push(async () => {
      await h.close().catch(() => undefined);
      faux.unregister();
    });
    const root = await h.root();
    expect(await (await root.submit(note(4, 1))).wait()).toEqual({ status: "unanswered", reason: "stale" });
    expect((await (await root.submit(note(5, 2))).wait()).status).toBe("done");
  });
});
