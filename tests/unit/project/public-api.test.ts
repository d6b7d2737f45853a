/**
 * The public API and the test kit as an outsider uses them: this file imports only
 * `worker/index.ts` and `worker/testing.ts` (and pi-ai). A tool author writes a tool with
 * `textResult` and a `ReplayPolicy`; a test asks the kit which calls a crash cut, and recognises the
 * `interrupted` result recovery wrote for one with a typed predicate, without reading tables or
 * diagnostic codes inside entry data.
 */
import { fauxAssistantMessage, fauxToolCall } from "@mariozechner/pi-ai";
import { Type } from "typebox";
import { afterEach, describe, expect, test } from "vitest";
import {
  AgentHarness,
  defineTool,
  type EntryRecord,
  isInterruptedResult,
  isToolResultEntry,
  type ReplayPolicy,
  textResult,
} from "../../../worker/index.ts";
import {
  deferred,
  fauxAgentModel,
  memoryStore,
  toolCallsCutByCrash,
  wasToolCallCutByCrash,
} from "../../../worker/testing.ts";

const closers: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});

/** A `launch` tool with the given policy, held in its first execution until released. */
function launchTool(replay: ReplayPolicy) {
  const started = deferred();
  const release = deferred();
  let runs = 0;
  const tool = defineTool({
    name: "launch",
    description: "Launch something",
    parameters: Type.Object({}),
    replay,
    async execute() {
      runs++;
      if (runs === 1) {
        started.resolve();
        await release.promise;
      }
      return textResult("launched");
    },
  });
  return { tool, started, release, runs: () => runs };
}

const resultsOf = (entries: readonly EntryRecord[]) => entries.filter(isToolResultEntry);

describe("public API for tool authors and crash tests", () => {
  test("the kit names the call a crash cut, and recovery's result for it is recognised as interrupted", async () => {
    const faux = fauxAgentModel((request) =>
      request.messages.some((m) => m.role === "assistant")
        ? fauxAssistantMessage("done")
        : fauxAssistantMessage([fauxToolCall("launch", {}, { id: "call-1" })], { stopReason: "toolUse" }),
    );
    closers.push(async () => faux.unregister());
    const launch = launchTool("unsafe");
    const options = { models: faux.models, defaultModel: faux.ref, tools: [launch.tool] };
    const store = await memoryStore();
    const h = await AgentHarness.open(store, options);
    closers.push(() => h.close());
    const root = await h.root();
    const submission = await root.submit({ type: "input", content: "go" });
    await launch.started.promise;

    // The world stops here: what was committed is the crash image.
    const crashed = await memoryStore(store.image());
    expect(await toolCallsCutByCrash(crashed)).toEqual(["call-1"]);
    expect(await wasToolCallCutByCrash(crashed, "call-1")).toBe(true);
    expect(await wasToolCallCutByCrash(crashed, "call-2")).toBe(false);

    const recovered = await AgentHarness.open(crashed, options);
    closers.push(() => recovered.close());
    const after = await recovered.root();
    await after.waitForIdle();
    const [interrupted] = resultsOf(await after.entries());
    expect(interrupted && isInterruptedResult(interrupted)).toBe(true);
    // The typed entry gives its diagnostics without a cast.
    expect(interrupted?.data.diagnostics.map((d) => d.code)).toEqual(["interrupted"]);
    expect(launch.runs()).toBe(1);

    // The engine that was not stopped finishes the call: an ordinary result, and nothing cut.
    launch.release.resolve();
    expect((await submission.wait()).status).toBe("done");
    const [finished] = resultsOf(await root.entries());
    expect(finished && isToolResultEntry(finished)).toBe(true);
    expect(finished && isInterruptedResult(finished)).toBe(false);
    expect(await toolCallsCutByCrash(await memoryStore(store.image()))).toEqual([]);
  });

  test("nothing is cut before a call starts; a safe call the crash cut runs again, and its result is not interrupted", async () => {
    const faux = fauxAgentModel((request) =>
      request.messages.some((m) => m.role === "assistant")
        ? fauxAssistantMessage("done")
        : fauxAssistantMessage([fauxToolCall("launch", {}, { id: "call-1" })], { stopReason: "toolUse" }),
    );
    closers.push(async () => faux.unregister());
    const launch = launchTool("safe");
    const options = { models: faux.models, defaultModel: faux.ref, tools: [launch.tool] };
    const store = await memoryStore();
    const h = await AgentHarness.open(store, options);
    closers.push(async () => {
      launch.release.resolve();
      await h.close();
    });
    expect(await toolCallsCutByCrash(await memoryStore(store.image()))).toEqual([]);
    await (await h.root()).submit({ type: "input", content: "go" });
    await launch.started.promise;
    const crashed = await memoryStore(store.image());
    expect(await toolCallsCutByCrash(crashed)).toEqual(["call-1"]);
    const recovered = await AgentHarness.open(crashed, options);
    closers.push(() => recovered.close());
    const root = await recovered.root();
    await root.waitForIdle();
    const [result] = resultsOf(await root.entries());
    expect(result && isInterruptedResult(result)).toBe(false);
    expect(launch.runs()).toBe(2);
  });
});
