/** The chat's words for tool approval (src/lib/approvals.ts). */
import { expect, test } from "vitest";
import { answerInWords, waitingCalls } from "../../../src/lib/approvals.ts";
import { toolStatus } from "../../../src/lib/tools.ts";

test("only undecided calls that await approval are listed, in order", () => {
  const slots = [
    {
      callId: "a",
      name: "write",
      taskId: 1,
      status: "awaiting_approval" as const,
      approval: { summary: [], since: 1 },
    },
    { callId: "b", name: "ls", taskId: 2, status: "running" as const },
    {
      callId: "c",
      name: "edit",
      taskId: 3,
      status: "awaiting_approval" as const,
      approval: { summary: [], since: 1, decision: { decision: "approve" as const, requestId: "r", at: 2 } },
    },
  ];
  expect(waitingCalls(slots).map((s) => s.callId)).toEqual(["a"]);
  expect(waitingCalls(undefined)).toEqual([]);
});

test("the engine's answer in words: nothing when taken; who came first otherwise", () => {
  expect(answerInWords({ status: "decided", decision: "deny" })).toBeUndefined();
  expect(answerInWords({ status: "already_decided", decision: "approve", at: 1 })).toContain(
    "approved this call first",
  );
  expect(answerInWords({ status: "not_waiting" })).toContain("no longer waits");
});

test("a call's card says it awaits approval, and a denied result is denied", () => {
  expect(toolStatus(undefined, { status: "awaiting_approval" })).toBe("awaiting approval");
  expect(
    toolStatus(
      { isError: true, diagnostics: [{ severity: "error", message: "m", code: "denied" }] },
      undefined,
    ),
  ).toBe("denied");
});
