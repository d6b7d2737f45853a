/**
 * Streaming partials: the answer being streamed is committed to pi.live (throttled); an engine that
 * stops mid-stream leaves that partial, and the next engine converts it into an aborted pi.assistant
 * entry (its spend counted) before it sends the request again. The model never sees the partial.
 */
import { fauxAssistantMessage, type Usage } from "@mariozechner/pi-ai";
import { afterEach, expect, test } from "vitest";
import { addUsage } from "../../worker/agent/records.ts";
import { AgentHarness, DOC, type LiveState, type UsageState } from "../../worker/index.ts";
import { type FauxAgentModel, fauxAgentModel, memoryStore, until } from "../../worker/testing.ts";

let faux: FauxAgentModel | undefined;
afterEach(() => faux?.unregister());

const LONG = "word ".repeat(400).trim();

test("a partial left by a stopped engine becomes an aborted entry, then the request is sent again", async () => {
  faux = fauxAgentModel(() => fauxAssistantMessage(LONG), { tokensPerSecond: 400 });
  const options = { models: faux.models, defaultModel: faux.ref, settings: { partialIntervalMs: 20 } };
  const store = await memoryStore();
  const h = await AgentHarness.open(store, options);
  const root = await h.root();
  const sub = await root.submit({ type: "input", content: "talk", requestId: "q" });
  await until(
    () =>
      (h.doc<LiveState & Record<string, never>>(1, DOC.live)?.generation?.message?.content.length ?? 0) > 0,
  );
  const partial = h.doc<LiveState & Record<string, never>>(1, DOC.live)!.generation!.message!;
  await h.close();

  const h2 = await AgentHarness.open(await memoryStore(store.image()), options);
  const again = await (await h2.root()).submit({ type: "input", content: "talk", requestId: "q" });
  expect(again.id).toBe(sub.id);
  const settled = await again.wait();
  expect(settled.status).toBe("done");
  const assistants = (await (await h2.root()).entries())
    .filter((e) => e.kind === "pi.assistant")
    .map(
      (e) =>
        (
          e.model as unknown as Array<{ stopReason: string; content: Array<{ text?: string }>; usage: Usage }>
        )[0]!,
    );
  expect(assistants.map((a) => a.stopReason)).toEqual(["aborted", "stop"]);
  expect(assistants[0]!.content[0]!.text).toBe((partial.content[0] as { text: string }).text);
  expect(assistants[1]!.content[0]!.text).toBe(LONG);
  // Both requests were sent with the same context: the partial never reaches the model.
  expect(faux.requests).toHaveLength(2);
  expect(faux.requests[1]!.messages).toEqual(faux.requests[0]!.messages.map((m) => ({ ...m })));
  const usage = h2.doc<UsageState & Record<string, never>>(1, DOC.usage)!;
  expect(Object.keys(usage.models)).toEqual([`${faux.ref.provider}/${faux.ref.id}`]);
  // The converted partial's spend is counted with the answer's.
  expect(assistants[0]!.usage.totalTokens).toBeGreaterThan(0);
  expect(usage.models[`${faux.ref.provider}/${faux.ref.id}`]).toEqual(
    addUsage(assistants[0]!.usage, assistants[1]!.usage),
  );
  expect(h2.doc<LiveState & Record<string, never>>(1, DOC.live)?.generation).toBeUndefined();
  await h2.close();
});
