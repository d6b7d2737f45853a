/**
 * The crash sweep across an MCP call (issue 31 part 2): input "launch it" -> the model calls
 * `docs_launch`, a tool of a real MCP server on loopback that the server does not mark read-only or
 * idempotent (replay "unsafe") -> the server launches -> an answer. The kit's `crashSweep` crashes
 * after every commit in every mode; the reopened engine installs the cached tool list from the store
 * (the server is never asked for it again) and the client resends the input under the same request
 * id. Every run ends with the uncrashed transcript, or, when the crash cut the call, with its
 * `interrupted` result; the server never launches twice.
 */
import { fauxToolCall } from "@mariozechner/pi-ai";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { createRegistry } from "../../../worker/agent/extensions/registry.ts";
import { AgentHarness } from "../../../worker/agent/harness.ts";
import { addMcpServer, installStoredMcpServers } from "../../../worker/app/mcp/store.ts";
import { type EntryRecord, isInterruptedResult } from "../../../worker/index.ts";
import type { MemoryImage } from "../../../worker/store/open.ts";
import {
  CRASH_MODES,
  CRASH_SWEEP_TEST_TIMEOUT_MS,
  comparableEntry,
  crashSweep,
  fauxAgentModel,
  memoryStore,
  toolCallsCutByCrash,
} from "../../../worker/testing.ts";
import { callsThenAnswer } from "../agent/fixtures.ts";
import { startMcpServer, type TestMcpServer } from "./mcp-server.ts";

let server: TestMcpServer;
let image: MemoryImage;
const faux = fauxAgentModel(
  callsThenAnswer(fauxToolCall("docs_launch", { item: "rocket" }, { id: "call-launch" })),
);

beforeAll(async () => {
  server = await startMcpServer();
  const store = await memoryStore();
  const h = await AgentHarness.open(store, { extensions: createRegistry(), paused: true });
  await addMcpServer(h, { name: "docs", url: server.url, token: null });
  await h.close();
  image = store.image();
  server.calls.length = 0;
});

afterAll(async () => {
  faux.unregister();
  await server.stop();
});

interface Run {
  interrupted: boolean;
}

const isResult = (e: EntryRecord) => e.kind === "pi.tool-result";

describe("MCP call crash sweep", () => {
  for (const mode of CRASH_MODES)
    test(`input -> an unsafe MCP call -> answer (${mode.name})`, {
      timeout: CRASH_SWEEP_TEST_TIMEOUT_MS,
    }, async () => {
      const report = await crashSweep<
        AgentHarness,
        Run,
        { transcript: unknown[]; entries: EntryRecord[]; launches: string[] }
      >(
        {
          name: "an unsafe MCP call",
          image,
          services: () => {
            // Each run starts with a server that launched nothing.
            server.launches.length = 0;
            return { interrupted: false };
          },
          open: async (store, _run, engine) => {
            const h = await AgentHarness.open(store, {
              ...engine,
              extensions: createRegistry(),
              models: faux.models,
              defaultModel: faux.ref,
              paused: true,
            });
            // As the app's engine does: the cached tools are installed before work resumes.
            await installStoredMcpServers(h);
            h.resume();
            return h;
          },
          afterCrash: async (committed, run) => {
            run.interrupted = (await toolCallsCutByCrash(committed)).includes("call-launch");
          },
          finish: async (h) => {
            const root = await h.root();
            await (await root.submit({ type: "input", content: "launch it", requestId: "client-1" })).wait();
            await root.waitForIdle();
            const entries = await root.entries();
            return { transcript: entries.map(comparableEntry), entries, launches: [...server.launches] };
          },
        },
        {
          mode,
          atLeast: 5,
          baseline: ({ result }) => {
            expect(result.launches).toEqual(["rocket"]);
            const launched = result.entries.find(isResult)!;
            expect(JSON.stringify(launched.model)).toContain("launched rocket (launch #1)");
          },
          check: ({ result, services, label }, baseline) => {
            if (services.interrupted)
              expect(isInterruptedResult(result.entries.find(isResult)!), label).toBe(true);
            else expect(result.transcript, label).toEqual(baseline.result.transcript);
            // Never a silent repeat: the server launched at most once in any run.
            expect(server.launches.length, label).toBeLessThanOrEqual(1);
          },
        },
      );
      const cut = report.runs.filter((r) => r.services.interrupted).length;
      expect(cut, "crash points inside the call").toBeGreaterThan(0);
    });
});
