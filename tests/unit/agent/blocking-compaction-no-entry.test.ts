/**
 * A blocking compaction that ends without an `entryId` (spec §8.7, §8.3): whether it failed, faulted
 * or was aborted directly, a threshold generation sends its request anyway and an overflow
 * generation fails with `model_error` and the overflow text. (Declined: `compaction-hooks` and
 * `compaction`; nothing to compact cannot follow a threshold or an overflow check, which both need a
 * cut.)
 */
import { fauxAssistantMessage } from "@mariozechner/pi-ai";
import { expect, test } from "vitest";
import { SUMMARY_SYSTEM_PROMPT } from "../../../worker/agent/compaction/task.ts";
import { AgentHarness, type Submission } from "../../../worker/index.ts";
import {
  deferred,
  type FauxRequest,
  type FauxResponder,
  fauxAgentModel,
  fauxError,
  memoryStore,
  until,
} from "../../../worker/testing.ts";
import { cleanups, faultingHook, liveOf, textOf } from "./fixtures.ts";

const big = (label: string) => `${label} ${"x".repeat(400)}`; // about 100 tokens
const isSummary = (r: FauxRequest) => r.systemPrompt === SUMMARY_SYSTEM_PROMPT;
const OVERFLOW = "prompt is too long: 210000 tokens";

for (const trigger of ["threshold", "overflow"] as const)
  for (const how of ["failed", "faulted", "aborted"] as const)
    test(`a ${trigger} generation whose blocking compaction ${how} ${trigger === "threshold" ? "sends its request anyway" : "fails with model_error"}`, async () => {
      const asked = deferred();
      const gate = deferred();
      let overflows = 0;
      const responder: FauxResponder = async (req) => {
        if (isSummary(req)) {
          asked.resolve();
          if (how === "aborted") await gate.promise;
          return how === "failed"
            ? fauxError("400 bad request: summarizer refused")
            : fauxAssistantMessage("SUMMARY");
        }
        const last = textOf([...req.messages].reverse().find((m) => m.role === "user")!);
        // Only the first q4 request overflows: were it sent again, it would be answered.
        if (trigger === "overflow" && last.startsWith("q4") && ++overflows === 1) return fauxError(OVERFLOW);
        return fauxAssistantMessage(big("answer"));
      };
      const faux = fauxAgentModel(responder, { contextWindow: trigger === "threshold" ? 1200 : 1_000_000 });
      const h = await AgentHarness.open(await memoryStore(), {
        models: faux.models,
        defaultModel: faux.ref,
        settings: {
          compaction: { reserveTokens: 100, keepRecentTokens: 150, backgroundTokens: 0 },
          retry: { enabled: false },
        },
        ...(how === "faulted" ? faultingHook("beforeCompact", "compaction bug") : {}),
      });
      cleanups.push(async () => {
        await h.close().catch(() => undefined);
        faux.unregister();
      });
      const root = await h.root();
      let input: Submission | undefined;
      let settled: ReturnType<Submission["wait"]> | undefined;
      let turn = 0;
      while ((await h.tasks({ kind: "pi.compaction" })).length === 0 && turn < 12) {
        turn++;
        input = await root.submit({ type: "input", content: big(`q${turn}`) });
        settled = input.wait();
        await Promise.race([settled, asked.promise]);
      }
      const [compaction] = await h.tasks({ kind: "pi.compaction" });
      expect(compaction, "a blocking compaction started").toMatchObject({
        input: { reason: trigger },
        owner: expect.any(Number),
      });
      if (how === "aborted") {
        // The faux provider does not watch the signal while its responder waits: release it once marked.
        const aborting = h.abortTask(compaction!.id);
        await until(
          () => h.inspect().tasks.some((t) => t.record.id === compaction!.id && t.record.abortRequested),
          {
            what: "marked",
          },
        );
        gate.resolve();
        expect(await aborting).toBe("marked");
      }
      const result = await settled!;
      expect((await h.waitForTask(compaction!.id)).state).toMatchObject({
        status: "terminal",
        outcome: { status: how },
      });
      // Its status leaves pi.live with its outcome, a blocking one's too (draw 34b: only manual
      // compactions were ever faulted with the status read, so a cleanup skipping blocking ones passed).
      expect(liveOf(h).compactions).toBeUndefined();
      expect((await root.entries()).some((e) => e.kind === "pi.compaction")).toBe(false);
      if (trigger === "threshold") {
        // The request went out after the compaction ended, from the unchanged transcript.
        expect(result.status).toBe("done");
        const sent = faux.requests.filter((r) => !isSummary(r)).at(-1)!;
        expect(textOf(sent.messages.at(-1)!)).toBe(big(`q${turn}`));
      } else {
        expect(result).toEqual({ status: "unanswered", reason: "model_error", detail: OVERFLOW });
        expect(
          faux.requests.filter((r) => !isSummary(r) && textOf(r.messages.at(-1)!).startsWith("q4")),
        ).toHaveLength(1);
      }
    });
