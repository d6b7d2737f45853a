/**
 * A subagent call across a handover (the browser kill storm's `effect_keyed … not in its answer`):
 * the engine closes with a grace (worker/browser/owner.ts hands over with `close({ graceMs })`) while
 * a foreground subagent waits for its child. The harness is sealed at once, so the wait for the
 * child's settlement rejects with HarnessClosed before the grace ends and before the call's signal
 * fires. That rejection is the engine closing, not the call's result: nothing may be committed for the
 * call, so the next engine on the same store runs it again and the parent hears the child's answer.
 * Before the fix the call committed "Error: harness is closed" during the grace and the parent
 * answered that, while the child answered on its own after the handover.
 */
import { fauxAssistantMessage, fauxToolCall, type Message } from "@mariozechner/pi-ai";
import { Type } from "typebox";
import { afterAll, expect, test } from "vitest";
import { AgentHarness, createSubagentTool, defineTool, textResult } from "../../../worker/index.ts";
import { deferred, type FauxRequest, fauxAgentModel, memoryStore } from "../../../worker/testing.ts";

const INPUT = { type: "input", content: "delegate it", requestId: "client-1" } as const;

const firstUser = (req: FauxRequest) => {
  const m = req.messages.find((x) => x.role === "user");
  return m?.role === "user" && typeof m.content === "string" ? m.content : "";
};

const faux = fauxAgentModel((req) => {
  const last = req.messages.at(-1);
  const heard = last?.role === "toolResult" ? last.content.map((c) => (c.type === "text" ? c.text : "")) : [];
  if (firstUser(req).startsWith("CHILD:"))
    return last?.role === "toolResult"
      ? fauxAssistantMessage(`child: ${heard.join("")}`)
      : fauxAssistantMessage([fauxToolCall("gate", {}, { id: "call-gate" })], { stopReason: "toolUse" });
  if (last?.role === "toolResult") return fauxAssistantMessage(`parent heard: ${heard.join("")}`);
  return fauxAssistantMessage(
    [fauxToolCall("subagent", { task: "CHILD: pass the gate" }, { id: "call-sub" })],
    {
      stopReason: "toolUse",
    },
  );
});
afterAll(() => faux.unregister());

/** A replay-safe tool that waits until its signal fires (`hold`), or passes at once. */
function gate(options: { hold: boolean }) {
  const started = deferred();
  const tool = defineTool({
    name: "gate",
    description: "Wait at the gate",
    parameters: Type.Object({}),
    replay: "safe",
    async execute(_args, api) {
      started.resolve();
      if (options.hold)
        await new Promise<void>((_resolve, reject) => {
          api.signal.addEventListener("abort", () => reject(api.signal.reason), { once: true });
        });
      return textResult("gate passed");
    },
  });
  return { tool, started };
}

const open = (store: Awaited<ReturnType<typeof memoryStore>>, tool: ReturnType<typeof gate>["tool"]) =>
  AgentHarness.open(store, {
    models: faux.models,
    defaultModel: faux.ref,
    tools: [createSubagentTool({ progress: false }), tool],
  });

const texts = (entries: Array<{ model?: unknown }>) =>
  entries.flatMap((e) =>
    ((e.model as Message[] | undefined) ?? []).flatMap((m) =>
      m.role === "assistant" || m.role === "toolResult"
        ? m.content.flatMap((b) => (b.type === "text" ? [`${m.role}: ${b.text}`] : []))
        : [],
    ),
  );

test("a subagent call waiting for its child when the engine hands over commits nothing: the next engine's rerun hears the child's answer", async () => {
  const store = await memoryStore();
  const held = gate({ hold: true });
  const first = await open(store, held.tool);
  await (await first.root()).submit(INPUT);
  await held.started.promise;
  // The handover's close: the running calls get a grace to reach a commit, then their signals fire.
  await first.close({ graceMs: 400 });

  const second = await open(await memoryStore(store.image()), gate({ hold: false }).tool);
  const root = await second.root();
  const settled = await (await root.submit(INPUT)).wait();
  expect(settled.status).toBe("done");
  await second.waitForIdle();
  const parent = texts(await root.entries());
  expect(parent).toEqual(["toolResult: child: gate passed", "assistant: parent heard: child: gate passed"]);
  await second.close();
});
