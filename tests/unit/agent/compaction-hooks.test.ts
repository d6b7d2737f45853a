/**
 * `beforeCompact` (spec §7.2, §8.7): after range selection and before summarizing, the hooks see the
 * summarized entries (head marker first) and their messages, the first kept entry, the reason and the
 * instructions. The first decision wins: `{ decline: true }` completes with `{}` and writes nothing;
 * `{ summary }` is placed as the model's summary would be, without a summary request. A hook that
 * throws is reported and the next one asked; with nothing to compact no hook is asked.
 */
import { fauxAssistantMessage, type Message } from "@mariozechner/pi-ai";
import { describe, expect, test } from "vitest";
import { SUMMARY_SYSTEM_PROMPT } from "../../../worker/agent/compaction/task.ts";
import type { BeforeCompactInput, Conversation, EntryRecord } from "../../../worker/index.ts";
import { AgentHarness } from "../../../worker/index.ts";
import {
  type FauxRequest,
  type FauxResponder,
  fauxAgentModel,
  memoryStore,
} from "../../../worker/testing.ts";
import { cleanups, open, textOf } from "./fixtures.ts";

const big = (label: string) => `${label} ${"x".repeat(400)}`; // about 100 tokens
const isSummary = (r: FauxRequest) => r.systemPrompt === SUMMARY_SYSTEM_PROMPT;
const echoOrSummary: FauxResponder = (req) =>
  isSummary(req) ? fauxAssistantMessage("MODEL SUMMARY") : fauxAssistantMessage(big("answer"));
const settings = { compaction: { keepRecentTokens: 250 } };

async function chat(root: Conversation, turns: number): Promise<void> {
  for (let i = 1; i <= turns; i++) await (await root.submit({ type: "input", content: big(`q${i}`) })).wait();
}

const summaryText = (e: EntryRecord) => textOf((e.model as unknown as Message[])[0]!);

describe("beforeCompact", () => {
  test("sees the range about to be summarized; declining completes with no summary and no request", async () => {
    const seen: BeforeCompactInput[] = [];
    const { h, root, faux } = await open(echoOrSummary, {
      settings,
      hooks: {
        beforeCompact: [
          (input) => {
            seen.push(input);
            return { decline: true };
          },
        ],
      },
    });
    await chat(root, 4); // 8 entries of about 100 tokens: 1-5 summarized, 6-8 kept
    const before = await root.entries();
    // Break 31F: the decline decides the outcome, so its commit removes the status (a decline that
    // left it passed; the named status tests placed, failed, aborted or orphaned a compaction).
    const outcomeLive: Array<{ compactions?: unknown } | undefined> = [];
    h.subscribe((change) => {
      if (change.tasks.some((t) => t.kind === "pi.compaction" && t.state.status === "terminal"))
        outcomeLive.push(
          change.docs.find((d) => d.conversationId === 1 && d.name === "pi.live")?.value as
            | { compactions?: unknown }
            | undefined,
        );
    });
    const taskId = await root.compact("keep the numbers");
    expect((await h.waitForTask(taskId)).state).toMatchObject({
      status: "terminal",
      outcome: { status: "completed", result: {} },
    });
    expect(outcomeLive).toHaveLength(1);
    expect(outcomeLive[0]).toBeDefined();
    expect(outcomeLive[0]!.compactions).toBeUndefined();
    expect(seen).toHaveLength(1);
    expect(seen[0]).toMatchObject({ reason: "manual", firstKept: 6, instructions: "keep the numbers" });
    expect(seen[0]!.entries.map((e) => e.id)).toEqual([1, 2, 3, 4, 5]);
    expect(seen[0]!.messages.map((m) => m.role)).toEqual(["user", "assistant", "user", "assistant", "user"]);
    expect(faux.requests.filter(isSummary)).toEqual([]);
    expect(await root.entries()).toEqual(before);
  });

  test("the summarized entries hold a pi.system entry before the cut, in transcript order", async () => {
    // Spec §8.7: the summarized entries are the head marker, if any, then the non-marker entries
    // before the cut. Break 31F: the pi.system entries left out of the hook's entries passed every
    // test (none had instructions, so no run wrote one).
    const seen: BeforeCompactInput[] = [];
    const { root } = await open(echoOrSummary, {
      settings,
      hooks: {
        beforeCompact: [
          (input) => {
            seen.push(input);
            return { decline: true };
          },
        ],
      },
    });
    await root.configure({ instructions: "be brief" });
    await chat(root, 4);
    const all = await root.entries();
    const system = all.filter((e) => e.kind === "pi.system");
    expect(system).toHaveLength(1);
    await root.compact();
    await expect.poll(() => seen.length).toBe(1);
    const { entries, firstKept } = seen[0]!;
    expect(system[0]!.id).toBeLessThan(firstKept);
    expect(entries.map((e) => e.id)).toEqual(all.filter((e) => e.id < firstKept).map((e) => e.id));
    expect(entries.map((e) => e.kind)).toContain("pi.system");
  });

  test("the summarized entries hold an entry before the cut that contributes no message (draw 37c)", async () => {
    // Spec §8.7: the summarized entries are the non-marker entries before the cut, not only those
    // with messages. Draw 37c: entries with an empty contribution left out of the hook's entries
    // passed every test (every entry before the cut carried a message).
    const seen: BeforeCompactInput[] = [];
    const { root } = await open(echoOrSummary, {
      settings,
      hooks: {
        beforeCompact: [
          (input) => {
            seen.push(input);
            return { decline: true };
          },
        ],
      },
    });
    await chat(root, 1);
    await (await root.submit({ type: "write", entry: { kind: "app.note", data: "no message" } })).wait();
    await chat(root, 3);
    const all = await root.entries();
    const note = all.find((e) => e.kind === "app.note")!;
    await root.compact();
    await expect.poll(() => seen.length).toBe(1);
    const { entries, messages, firstKept } = seen[0]!;
    expect(note.id).toBeLessThan(firstKept);
    expect(entries.map((e) => e.id)).toEqual(all.filter((e) => e.id < firstKept).map((e) => e.id));
    expect(entries.map((e) => e.kind)).toContain("app.note");
    expect(messages).toHaveLength(entries.length - 1);
  });

  test("a supplied summary is placed like the model's, headed at the first kept entry, without a request", async () => {
    const seen: BeforeCompactInput[] = [];
    const { h, root, faux } = await open(echoOrSummary, {
      settings,
      hooks: {
        beforeCompact: [
          (input) => {
            seen.push(input);
            return { summary: `HOOK SUMMARY ${seen.length}` };
          },
        ],
      },
    });
    await chat(root, 4);
    const record = await h.waitForTask(await root.compact());
    expect(record.state).toMatchObject({ outcome: { status: "completed" } });
    expect(faux.requests.filter(isSummary)).toEqual([]);
    const placed = (await root.entries()).at(-1)!;
    expect(placed).toMatchObject({ kind: "pi.compaction", head: 6, data: { reason: "manual" } });
    expect(summaryText(placed)).toBe(
      "The conversation history before this point was compacted into the following summary:\n\n<summary>\nHOOK SUMMARY 1\n</summary>",
    );
    // The next compaction summarizes the earlier summary again: the head marker leads its entries.
    await chat(root, 3);
    await h.waitForTask(await root.compact());
    expect(seen).toHaveLength(2);
    expect(seen[1]!.entries[0]).toMatchObject({ id: placed.id, kind: "pi.compaction" });
    expect(textOf(seen[1]!.messages[0]!)).toContain("HOOK SUMMARY 1");
  });

  test("the first decision wins; a throwing hook is reported and the next one asked", async () => {
    const reports: unknown[] = [];
    const asked: string[] = [];
    // Draw 35b: the report is the very error thrown (a copy with its message passed when reports were
    // read by message), and the hooks that pass and decide are async (a decision not awaited, taken
    // for a malformed one, passed when every hook here was synchronous).
    const broke = new Error("hook broke");
    const { h, root, faux } = await open(echoOrSummary, {
      settings,
      onReport: (error) => reports.push(error),
      hooks: {
        beforeCompact: [
          () => {
            asked.push("throws");
            throw broke;
          },
          async () => {
            asked.push("passes");
            await Promise.resolve();
            return undefined;
          },
          async () => {
            asked.push("decides");
            await new Promise((resolve) => setTimeout(resolve, 1));
            return { summary: "SECOND" };
          },
          () => {
            asked.push("too late");
            return { decline: true };
          },
        ],
      },
    });
    await chat(root, 4);
    await h.waitForTask(await root.compact());
    expect(asked).toEqual(["throws", "passes", "decides"]);
    expect(reports.map((e) => (e as Error).message)).toEqual(["hook broke"]);
    expect(reports).toHaveLength(1);
    expect(reports[0]).toBe(broke);
    expect(summaryText((await root.entries()).at(-1)!)).toContain("<summary>\nSECOND\n</summary>");
    expect(faux.requests.filter(isSummary)).toEqual([]);
  });

  test("a decline that comes first wins over a later summary: nothing is placed and the later hook is not asked", async () => {
    // Break 30J: every named case had a summary as the first decision; a decline passed over for a
    // later summary passed them.
    const asked: string[] = [];
    const { h, root, faux } = await open(echoOrSummary, {
      settings,
      hooks: {
        beforeCompact: [
          () => {
            asked.push("declines");
            return { decline: true };
          },
          () => {
            asked.push("summarizes");
            return { summary: "TOO LATE" };
          },
        ],
      },
    });
    await chat(root, 4);
    const before = await root.entries();
    const record = await h.waitForTask(await root.compact());
    expect(record.state).toMatchObject({ status: "terminal", outcome: { status: "completed", result: {} } });
    expect(asked).toEqual(["declines"]);
    expect(await root.entries()).toEqual(before);
    expect(faux.requests.filter(isSummary)).toEqual([]);
  });

  test("with nothing to compact no hook is asked; without a decision the model summarizes", async () => {
    const asked: number[] = [];
    const { h, root, faux } = await open(echoOrSummary, {
      settings,
      hooks: { beforeCompact: [(input) => void asked.push(input.firstKept)] },
    });
    await chat(root, 1);
    await h.waitForTask(await root.compact());
    expect(asked).toEqual([]);
    await chat(root, 3);
    await h.waitForTask(await root.compact());
    expect(asked).toHaveLength(1);
    expect(faux.requests.filter(isSummary)).toHaveLength(1);
    expect(summaryText((await root.entries()).at(-1)!)).toContain("MODEL SUMMARY");
  });

  test("a declined blocking compaction lets its generation send the request anyway", async () => {
    const reasons: string[] = [];
    const faux = fauxAgentModel(echoOrSummary, { contextWindow: 1200 });
    const h = await AgentHarness.open(await memoryStore(), {
      models: faux.models,
      defaultModel: faux.ref,
      settings: { compaction: { reserveTokens: 100, keepRecentTokens: 150, backgroundTokens: 0 } },
      hooks: {
        beforeCompact: [
          (input) => {
            reasons.push(input.reason);
            return { decline: true };
          },
        ],
      },
    });
    cleanups.push(async () => {
      await h.close().catch(() => undefined);
      faux.unregister();
    });
    const root = await h.root();
    let turn = 0;
    while (reasons.length === 0 && turn < 12) {
      turn++;
      const settled = await (await root.submit({ type: "input", content: big(`q${turn}`) })).wait();
      expect(settled.status).toBe("done");
    }
    expect(reasons).toEqual(["threshold"]);
    const compactions = await h.tasks({ kind: "pi.compaction" });
    expect(compactions.map((t) => t.state)).toEqual([
      { status: "terminal", outcome: { status: "completed", result: {} } },
    ]);
    // The waiting generation's request went out after the decline, and nothing was summarized.
    expect(faux.requests.filter(isSummary)).toEqual([]);
    expect(textOf(faux.requests.at(-1)!.messages.at(-1)!)).toBe(big(`q${turn}`));
    expect((await root.entries()).some((e) => e.kind === "pi.compaction")).toBe(false);
  });

  test("a blocking compaction whose hook supplies the summary appends it directly, completes with {entryId}, and its generation's request starts from it (draw 35c)", async () => {
    // Draw 35c: the hook's summary admitted as a write submission even for a blocking compaction
    // passed every test (the waiting run sent its request uncompacted, the summary queued behind it).
    const faux = fauxAgentModel(echoOrSummary, { contextWindow: 1200 });
    const h = await AgentHarness.open(await memoryStore(), {
      models: faux.models,
      defaultModel: faux.ref,
      settings: { compaction: { reserveTokens: 100, keepRecentTokens: 150, backgroundTokens: 0 } },
      hooks: { beforeCompact: [() => ({ summary: "HOOK SUMMARY" })] },
    });
    cleanups.push(async () => {
      await h.close().catch(() => undefined);
      faux.unregister();
    });
    const root = await h.root();
    let turn = 0;
    while ((await h.tasks({ kind: "pi.compaction" })).length === 0 && turn < 12) {
      turn++;
      const settled = await (await root.submit({ type: "input", content: big(`q${turn}`) })).wait();
      expect(settled.status).toBe("done");
    }
    const [task] = await h.tasks({ kind: "pi.compaction" });
    expect(task!.input).toEqual({ reason: "threshold", blocking: true });
    const compaction = (await root.entries()).find((e) => e.kind === "pi.compaction")!;
    expect(summaryText(compaction)).toContain("<summary>\nHOOK SUMMARY\n</summary>");
    expect(task!.state).toEqual({
      status: "terminal",
      outcome: { status: "completed", result: { entryId: compaction.id } },
    });
    // Appended directly, before the run's request: no summary request, no write submission, and the
    // request that answered the run's input starts from the summary.
    expect(faux.requests.filter(isSummary)).toEqual([]);
    const sent = faux.requests.at(-1)!;
    expect(textOf(sent.messages[0]!)).toContain("<summary>\nHOOK SUMMARY\n</summary>");
    expect(textOf(sent.messages.at(-1)!)).toBe(big(`q${turn}`));
  });
});
