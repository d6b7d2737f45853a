/**
 * The test and bench endpoints (`debug.*`): start and read a `test.ticker`, seed a store with
 * finished tasks, count transactions and watches, run the in-worker bench. They are no part of the
 * production API: a worker entry adds them (`withTestEndpoints`) only when its page asked for them
 * with `?debug=1` (the e2e and bench pages do), which the tab passes on in the worker's name. Such a
 * page gets a worker of its own (a SharedWorker is keyed by its name), so a normal page never
 * reaches them.
 */

import type { AgentHarness } from "../agent/harness.ts";
import { DOC, ENTRY, type LiveState, zeroUsage } from "../agent/records.ts";
import { TITLE_DOC } from "../app/conversation-list.ts";
import { type EngineHost, engineInternals } from "../app/engine-host.ts";
import { storeLenders } from "../browser/store-lenders.ts";
import { tabScriptWorkers } from "../browser/tab-script-workers.ts";
import { bulkSeed, SEED_MARKER } from "../core/bulk-seed.ts";
import type { Json } from "../core/types.ts";
import { type ConversationId, ROOT_CONVERSATION_ID } from "../core/types.ts";
import {
  type DebugApi,
  type EngineStats,
  type PartialStamp,
  type TickData,
  type TickerRequest,
  type TickerStatus,
  tickEntry,
} from "../protocol/index.ts";
import { runScriptInThread } from "../sandbox/in-thread.ts";
import { DEFAULT_SANDBOX_LIMITS, runScript, type ScriptHost } from "../sandbox/run.ts";
import { wasmMemoryBytes } from "../store/browser.ts";
import { runBrowserBench } from "./bench.ts";
import { noopTask, tickerTask } from "./ticker.ts";

export function withTestEndpoints(host: EngineHost): EngineHost & { readonly debug: DebugApi } {
  return Object.assign(host, { debug: testEndpoints(host) });
}

function testEndpoints(host: EngineHost): DebugApi {
  const engine = host[engineInternals]();
  // The recovery bench times navigation -> the first tick this engine commits (after COMMIT).
  let firstTickAt: number | undefined;
  void engine.harness().then(
    (h) => {
      const unsubscribe = h.subscribe((change) => {
        if (!change.entries.some((e) => tickEntry.is(e))) return;
        firstTickAt = Date.now();
        unsubscribe();
      });
    },
    () => undefined,
  );

  // The second-tab latency bench: each committed partial answer, stamped when its change set (which
  // the harness publishes after COMMIT) reaches this subscriber, the same moment tabs' watches hear.
  let partials: PartialStamp[] | undefined;
  void engine.harness().then(
    (h) =>
      h.subscribe((change) => {
        if (!partials) return;
        for (const doc of change.docs) {
          if (doc.name !== DOC.live) continue;
          const message = (doc.value as LiveState | undefined)?.generation?.message;
          if (!message) continue;
          const text = message.content.map((c) => (c.type === "text" ? c.text : "")).join("");
          if (partials.length < 10_000)
            partials.push({ at: performance.timeOrigin + performance.now(), text });
        }
      }),
    () => undefined,
  );

  return {
    async recordPartials() {
      partials = [];
    },

    async partials() {
      return partials ?? [];
    },

    async startTicker(request: TickerRequest) {
      const h = await engine.harness();
      const phases = Math.max(1, Math.min(10_000, Math.floor(request.phases)));
      const delayMs = Math.max(0, Math.min(60_000, Math.floor(request.delayMs)));
      return h.createTask(
        tickerTask,
        { phases, delayMs },
        {
          ownership: { kind: "conversation" },
          conversationId: request.conversationId ?? ROOT_CONVERSATION_ID,
        },
      );
    },

    async ticker(taskId): Promise<TickerStatus> {
      const h = await engine.harness();
      const record = await h.getTask(taskId);
      const entries = record
        ? await (await h.requireLoadedConversation(record.conversationId)).entries()
        : [];
      const trail = entries
        .filter((e) => tickEntry.is(e) && e.data.taskId === taskId)
        .map((e) => (e.data as TickData).n);
      const status = !record
        ? "missing"
        : record.state.status === "terminal"
          ? record.state.outcome.status
          : record.state.status;
      return { taskId, status, trail };
    },

    async stats(): Promise<EngineStats> {
      const h = await engine.harness();
      return {
        transactions: h.store.stats.transactions,
        commits: h.store.stats.commits,
        build: engine.platform.build,
        ...engine.watchStats(),
        timeline: { ...engine.timeline, ...(firstTickAt !== undefined ? { firstTickAt } : {}) },
        ...(engine.platform.storeKind === "opfs-lent" ? { lentStore: storeLenders.stats() } : {}),
      };
    },

    bench: (options) => runBrowserBench(engine.platform, options),

    async runScript(request) {
      const limits = {
        ...DEFAULT_SANDBOX_LIMITS,
        ...(request.sliceMs === undefined ? {} : { sliceMs: request.sliceMs }),
        ...(request.cpuMs === undefined ? {} : { cpuMs: request.cpuMs }),
      };
      const host: ScriptHost = {
        start: Date.now(),
        seed: 1,
        functions: [],
        call: async () => ({ isError: true, text: "no tools here" }),
        print: () => undefined,
      };
      // The engine thread's longest stall: the widest gap between two 10 ms timer callbacks.
      let last = performance.now();
      let maxStallMs = 0;
      const sampler = setInterval(() => {
        const now = performance.now();
        maxStallMs = Math.max(maxStallMs, now - last);
        last = now;
      }, 10);
      const started = performance.now();
      let outcome: string;
      try {
        const run = await (request.inThread ? runScriptInThread : runScript)(request.code, host, limits);
        outcome = JSON.stringify(run.value) ?? "undefined";
      } catch (error) {
        outcome = error instanceof Error ? error.name : String(error);
      }
      const ms = performance.now() - started;
      clearInterval(sampler);
      maxStallMs = Math.max(maxStallMs, performance.now() - last);
      return { outcome, ms, maxStallMs };
    },

    scriptWorkers: async () => tabScriptWorkers.stats(),

    async seedChat(options) {
      return seedChat(await engine.harness(), options.entries);
    },

    async seedGrowth(options) {
      const h = await engine.harness();
      const started = performance.now();
      const whole = (n: number, most: number) => Math.max(0, Math.min(most, Math.floor(n)));
      const chatId = await seedChat(h, options.chatEntries);
      // The templates the bulk copy clones: a conversation made by the agent (its documents), a
      // question and an answer whose text is the marker, a finished task.
      const template = await h.createConversation({ ownership: { kind: "ownerless" } });
      const [question, answer] = await h.transaction((tx) => {
        tx.writeDoc(template.id, TITLE_DOC, { title: "Seed template" });
        return [
          tx.appendEntry(template.id, seededMessage(0, false, SEED_MARKER)).id,
          tx.appendEntry(template.id, seededMessage(1, false, SEED_MARKER)).id,
        ];
      });
      const templateTask = await h.createTask(noopTask, null, {
        ownership: { kind: "conversation" },
        conversationId: template.id,
      });
      await h.waitForTask(templateTask);
      const { firstConversation } = await bulkSeed(h.store, {
        templateConversation: template.id,
        titleDoc: TITLE_DOC,
        templateQuestion: question!,
        templateAnswer: answer!,
        templateTask,
        conversations: Math.max(1, whole(options.conversations, 1_000_000)),
        entries: whole(options.entries, 10_000_000),
        tasks: whole(options.tasks, 10_000_000),
        now: Date.now(),
      });
      // Rows were written past this harness: it must never commit again. Nothing of it runs now
      // (the templates' tasks are finished); the caller closes the page and the next engine opens.
      return { chatId, firstConversation, ms: performance.now() - started };
    },

    async memory() {
      // An opfs-lent store's wasm lives in its lent worker: asked over its port.
      return { wasmBytes: wasmMemoryBytes() + (await storeLenders.wasmMemoryBytes()) };
    },

    async commitLatency(options) {
      const h = await engine.harness();
      const count = Math.max(1, Math.min(1000, Math.floor(options.commits)));
      const times: number[] = [];
      for (let i = 0; i < count; i++) {
        const started = performance.now();
        await h.transaction((tx) => tx.writeDoc(options.conversationId, "bench.probe", { n: i }));
        times.push(performance.now() - started);
      }
      return times;
    },

    async seed(
      options,
    ): Promise<{ conversationId: ConversationId; tasks: number; conversations: number; ms: number }> {
      const h = await engine.harness();
      const started = performance.now();
      const total = Math.max(0, Math.floor(options.tasks));
      const batch = Math.max(1, Math.min(2000, Math.floor(options.batch ?? 500)));
      const conversation = await h.createConversation({ ownership: { kind: "ownerless" } });
      await h.transaction((tx) => tx.writeDoc(conversation.id, "app.title", { title: "Seeded tasks" }));
      for (let done = 0; done < total; ) {
        const n = Math.min(batch, total - done);
        const ids = await h.transaction((tx) =>
          Array.from({ length: n }, () =>
            tx.createTask(noopTask, null, {
              ownership: { kind: "conversation" },
              conversationId: conversation.id,
            }),
          ),
        );
        await Promise.all(ids.map((id) => h.waitForTask(id)));
        done += n;
      }
      // Idle conversations with their documents (the built-in ones, a title) and a short exchange.
      const conversations = Math.max(0, Math.floor(options.conversations ?? 0));
      for (let done = 0; done < conversations; ) {
        const n = Math.min(100, conversations - done);
        await h.transaction((tx) => {
          for (let i = 0; i < n; i++) {
            const c = tx.createConversation({ kind: "ownerless" });
            tx.writeDoc(c.id, "app.title", { title: `Seeded conversation ${done + i + 1}` });
            tx.appendEntry(c.id, { kind: "test.seed", data: { role: "user", text: "a question" } });
            tx.appendEntry(c.id, { kind: "test.seed", data: { role: "assistant", text: "an answer" } });
          }
        });
        done += n;
      }
      return {
        conversationId: conversation.id,
        tasks: total,
        conversations,
        ms: performance.now() - started,
      };
    },
  };
}

/** A new conversation holding `entries` (at most 50,000) committed messages, 500 a transaction. */
async function seedChat(h: AgentHarness, entries: number): Promise<ConversationId> {
  const total = Math.max(0, Math.min(50_000, Math.floor(entries)));
  const conversation = await h.createConversation({ ownership: { kind: "ownerless" } });
  await h.transaction((tx) => tx.writeDoc(conversation.id, "app.title", { title: "Seeded long chat" }));
  for (let done = 0; done < total; ) {
    const n = Math.min(500, total - done);
    await h.transaction((tx) => {
      for (let i = done; i < done + n; i++)
        tx.appendEntry(conversation.id, seededMessage(i, i === total - 1));
    });
    done += n;
  }
  return conversation.id;
}

/**
 * Message `i` of a seeded chat: even ones are questions, odd ones answers (markdown, varied lengths).
 * With `text`, that is the whole of the message's text (the bulk seed's templates).
 */
function seededMessage(i: number, last: boolean, text?: string): { kind: string; model: Json } {
  const timestamp = Date.now();
  if (i % 2 === 0 && !last)
    return {
      kind: ENTRY.user,
      model: [{ role: "user", content: text ?? `Question ${i + 1}: what comes next?`, timestamp }],
    };
  const lines = 1 + (i % 7);
  const markdown = [
    last ? `The newest answer, number ${i + 1}.` : `Answer ${i + 1}, with **markdown**:`,
    ...Array.from(
      { length: lines },
      (_, k) => `- point ${k + 1} of this answer, long enough to wrap on a phone screen`,
    ),
    ...(i % 5 === 1 ? ["```js", `const n = ${i};`, "```"] : []),
  ].join("\n");
  const message = {
    role: "assistant",
    content: [{ type: "text", text: text ?? markdown }],
    api: "demo",
    provider: "demo",
    model: "demo-1",
    usage: zeroUsage(),
    stopReason: "stop",
    timestamp,
  };
  return { kind: ENTRY.assistant, model: [message as unknown as Json] };
}
