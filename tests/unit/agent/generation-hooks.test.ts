/**
 * Hook timing in the built-in tasks: each phase resolves its hooks once, at its start (spec §7.5),
 * and an onYield continuation applies only when the run's final boundary selected no user item and
 * no reset (spec §6, §8.3).
 */
import { fauxToolCall } from "@mariozechner/pi-ai";
import { Type } from "typebox";
import { describe, expect, test } from "vitest";
import { textResult } from "../../../worker/agent/tools/contract.ts";
import { type AgentHooks, defineTool } from "../../../worker/index.ts";
import { deferred, until } from "../../../worker/testing.ts";
import { callsThenAnswer, echo, kinds, liveOf, messageOf, open, textOf, transcript } from "./fixtures.ts";

const users = async (c: Parameters<typeof transcript>[0]) =>
  (await transcript(c)).filter((e) => e.kind === "pi.user").map((e) => textOf(messageOf(e)));

describe("onYield continuation", () => {
  test("an onYield continuation is dropped when the final boundary selects a queued follow-up", async () => {
    const hold = deferred();
    let yields = 0;
    const { root } = await open(
      async (req, n) => {
        if (n === 1) await hold.promise;
        return echo(req, n);
      },
      { hooks: { onYield: [() => (++yields === 1 ? "continue please" : undefined)] } },
    );
    const one = await root.submit({ type: "input", content: "one" });
    const two = await root.submit({ type: "input", content: "two" });
    hold.resolve();
    const first = await one.wait();
    expect((await two.wait()).status).toBe("done");
    expect(await users(root)).toEqual(["one", "two"]);
    const entries = await transcript(root);
    // "one" was answered by the first answer: the continuation did not keep it open.
    expect(first).toMatchObject({ status: "done", answer: entries[1]!.id });
  });

  test("an onYield continuation is dropped when the final boundary selects a queued steer too", async () => {
    // Break 29C: the user item queued at the final boundary was always a follow-up; an engine that
    // counted only follow-ups (and resets) as user triggers applied the continuation beside a steer.
    // Break 29J found the same gap from the stop/length line (sections-5-9 293), and wrote this test too.
    const hold = deferred();
    let yields = 0;
    const { root } = await open(
      async (req, n) => {
        if (n === 1) await hold.promise;
        return echo(req, n);
      },
      { hooks: { onYield: [() => (++yields === 1 ? "continue please" : undefined)] } },
    );
    const one = await root.submit({ type: "input", content: "one" });
    const two = await root.submit({ type: "input", content: "two", whenBusy: "steer" });
    hold.resolve();
    const first = await one.wait();
    expect((await two.wait()).status).toBe("done");
    await root.waitForIdle();
    expect(await users(root)).toEqual(["one", "two"]);
    const entries = await transcript(root);
    expect(first).toMatchObject({ status: "done", answer: entries[1]!.id });
  });

  test("an onYield continuation is dropped when the final boundary selects a follow-up queued behind a write (draw 32d)", async () => {
    // Draw 32d: every named test queued one item; a boundary that read only the first queued item
    // (a write) took the follow-up behind it for no user item and applied the continuation too.
    const hold = deferred();
    let yields = 0;
    const { root, faux } = await open(
      async (req, n) => {
        if (n === 1) await hold.promise;
        return echo(req, n);
      },
      { hooks: { onYield: [() => (++yields === 1 ? "continue please" : undefined)] } },
    );
    const one = await root.submit({ type: "input", content: "one" });
    const note = await root.submit({ type: "write", entry: { kind: "note", data: {} } });
    const two = await root.submit({ type: "input", content: "two" });
    hold.resolve();
    expect((await one.wait()).status).toBe("done");
    // Sweep 42b, 100: read once idle, not by waiting on `two`, so a follow-up placed beside a
    // continuation (and never answered) fails here on what was written rather than by a timeout.
    await root.waitForIdle();
    expect(await users(root)).toEqual(["one", "two"]);
    expect((await note.record()).status).toBe("done");
    expect((await two.record()).status).toBe("done");
    expect(kinds(await root.entries())).toEqual([
      "pi.user",
      "pi.assistant",
      "note",
      "pi.user",
      "pi.assistant",
    ]);
    expect(faux.requests).toHaveLength(2);
  });

  test("an onYield continuation is dropped when the final boundary places a queued reset", async () => {
    const hold = deferred();
    const { root } = await open(
      async (req, n) => {
        if (n === 1) await hold.promise;
        return echo(req, n);
      },
      { hooks: { onYield: [(m) => (textOf(m) === "echo: one" ? "continue please" : undefined)] } },
    );
    const one = await root.submit({ type: "input", content: "one" });
    const reset = await root.reset();
    hold.resolve();
    expect((await one.wait()).status).toBe("done");
    expect((await reset.wait()).status).toBe("done");
    await root.waitForIdle();
    expect(kinds(await root.entries())).toEqual(["pi.user", "pi.assistant", "pi.reset"]);
  });

  test("an onYield continuation still applies when the final boundary selects only writes; without one, a boundary of writes leaves the conversation idle", async () => {
    const holds = [deferred(), deferred()];
    let yields = 0;
    const { h, root, faux } = await open(
      async (req, n) => {
        if (n <= 2) await holds[n - 1]!.promise;
        return echo(req, n);
      },
      { hooks: { onYield: [() => (++yields === 1 ? "continue please" : undefined)] } },
    );
    const one = await root.submit({ type: "input", content: "one" });
    const note = await root.submit({ type: "write", entry: { kind: "note", data: {} } });
    holds[0]!.resolve();
    expect((await note.wait()).status).toBe("done");
    await until(() => faux.requests.length === 2, { what: "the continuation's request" });
    // While the continuation runs, another write queues; the next final boundary (no continuation
    // now) places it and starts nothing: the conversation is idle (sample 22).
    const later = await root.submit({ type: "write", entry: { kind: "note", data: { later: true } } });
    expect((await later.record()).status).toBe("queued");
    holds[1]!.resolve();
    expect((await one.wait()).status).toBe("done");
    expect((await later.wait()).status).toBe("done");
    await root.waitForIdle();
    expect(await users(root)).toEqual(["one", "continue please"]);
    expect(kinds(await root.entries())).toEqual([
      "pi.user",
      "pi.assistant",
      "note",
      "pi.user",
      "pi.assistant",
      "note",
    ]);
    expect(faux.requests).toHaveLength(2);
    expect(liveOf(h).run).toBeUndefined();
    expect(root.busy).toBe(false);
  });

  test("without a continuation, a final boundary that places only a write the model sees leaves the conversation idle: the write is placed and no run begins (sweep 42b)", async () => {
    // Sweep 42b, 100: the named writes were display-only; a final boundary that began a run for a
    // placed write carrying a user message passed them.
    const hold = deferred();
    const { h, root, faux } = await open(async (req, n) => {
      if (n === 1) await hold.promise;
      return echo(req, n);
    });
    const one = await root.submit({ type: "input", content: "one" });
    const note = await root.submit({
      type: "write",
      entry: { kind: "app.note", model: [{ role: "user", content: "a note", timestamp: 0 }] },
    });
    expect((await note.record()).status).toBe("queued");
    hold.resolve();
    expect((await one.wait()).status).toBe("done");
    expect((await note.wait()).status).toBe("done");
    await root.waitForIdle();
    expect(kinds(await root.entries())).toEqual(["pi.user", "pi.assistant", "app.note"]);
    expect(faux.requests).toHaveLength(1);
    expect(liveOf(h).run).toBeUndefined();
    expect(root.busy).toBe(false);
  });
});

describe("each phase resolves hooks once, at its start", () => {
  test("a request phase keeps the hooks it started with: an onYield installed mid-request does not apply to it", async () => {
    let continued = 0;
    const later: AgentHooks = { onYield: [() => (++continued === 1 ? "continue please" : undefined)] };
    let current: AgentHooks = {};
    current = {
      beforeRequest: [
        () => {
          current = later; // the registry changes while this phase runs
          return undefined;
        },
      ],
    };
    const { root } = await open(echo, { hooks: () => current });
    expect((await (await root.submit({ type: "input", content: "one" })).wait()).status).toBe("done");
    expect(await users(root)).toEqual(["one"]);
    expect(continued).toBe(0);
  });

  test("a tool call phase keeps the hooks it started with: an afterTool installed by beforeTool does not apply to it", async () => {
    const tool = defineTool({
      name: "probe",
      description: "Answers ran",
      parameters: Type.Object({}),
      async execute() {
        return textResult("ran");
      },
    });
    let current: AgentHooks = {};
    const later: AgentHooks = { afterTool: [() => textResult("replaced")] };
    current = {
      beforeTool: [
        () => {
          current = later;
          return undefined;
        },
      ],
    };
    const { root } = await open(callsThenAnswer(fauxToolCall("probe", {}, { id: "call-1" })), {
      tools: [tool],
      hooks: () => current,
    });
    expect((await (await root.submit({ type: "input", content: "go" })).wait()).status).toBe("done");
    const result = (await transcript(root)).find((e) => e.kind === "pi.tool-result")!;
    expect(textOf(messageOf(result))).toBe("ran");
  });

  test("a request phase reads the hooks getter once: its beforeRequest and onYield hooks see no read in between", async () => {
    let reads = 0;
    const seen: Record<string, number> = {};
    const hooks: AgentHooks = {
      beforeRequest: [
        () => {
          seen["beforeRequest"] = reads;
          return undefined;
        },
      ],
      afterResponse: [() => void (seen["afterResponse"] = reads)],
      onYield: [
        () => {
          seen["onYield"] = reads;
          return undefined;
        },
      ],
    };
    const { root } = await open(echo, {
      hooks: () => {
        reads++;
        return hooks;
      },
    });
    await (await root.submit({ type: "input", content: "one" })).wait();
    expect(seen["beforeRequest"]).toBeGreaterThan(0);
    expect(seen).toEqual({
      beforeRequest: seen["beforeRequest"],
      afterResponse: seen["beforeRequest"],
      onYield: seen["beforeRequest"],
    });
  });
});
