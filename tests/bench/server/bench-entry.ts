/**
 * The server bench's worker (bundled and run in workerd by tests/server/miniflare.ts, driven by
 * tests/bench/server.bench.ts): the server engine's Space (the app's agent, the demo model) with
 * bench routes added, so each timed workload runs inside the Durable Object. Each route names its
 * object in the path (`/space/<name>/<route>`, the server's front door); a sample that needs an
 * empty store takes an object of its own.
 *
 * Who times what: workerd's clock inside an object is not to be trusted for timing (measured here:
 * 100,000 bare `transactionSync` inserts read 0 ms by `performance.now()` and took about 0.7 s; it
 * stands still across synchronous work and moves at some I/O), so nothing here reads it: the bench
 * times whole requests from Node (less an empty request's round trip), and where it needs moments
 * inside a request, the route streams a line at each (`lineStream`) and the bench stamps them as
 * they arrive.
 *
 * Routes (all `POST`; JSON answers unless streamed):
 * - `/empty`: nothing (the round trip the bench subtracts; after a restart, to a new object: the floor);
 * - `/commits?mode=M&n=N`: N commits of one small INSERT into `bench_commit` in this object, one by
 *   one: `store`, through the Durable Object store's line (`DoStore.commit`: `transaction(async)`,
 *   then `sync()`); `bare`, the same INSERT on `ctx.storage.sql` in one `transactionSync` each with
 *   nothing awaited (workerd holds the response until the writes are durable, its output gate);
 *   `bare-sync`, the same with an awaited `sync()` after each (the store's durability per commit);
 * - `/prepare?rounds=R`, `/agent`, `/verify`: the agent bench's loop (tests/bench/agent-scenario.ts:
 *   R tool rounds, instant model and tool) on a fresh Durable Object store: `prepare` opens the
 *   harness and its root conversation, `agent` runs the loop (submit to idle): `{ transactions }`,
 *   `verify` counts the tool results in the transcript and closes the harness: `{ toolResults }`;
 * - `/seed?tasks=T&conversations=C`: fill this space with T terminal tasks (`test.noop`, in one
 *   conversation) and C idle conversations, as the browser's recovery bench does, then start one
 *   live `bench.resume` task (below); `{ tasks, conversations }`;
 * - `/opened`: (the first request after a restart) open the space's harness, recovering its state,
 *   answered as a stream of lines (`open <live tasks>` once the harness is open, `resumed` at the
 *   live task's first commit in this instance), which the bench stamps as they arrive;
 * - `/run?runs=K&text=T`: a demo conversation: K inputs T one after the other in a new conversation,
 *   each awaited, answered as a stream of lines while it runs (`submit` before each input, `step` at
 *   each commit that appends to the conversation, `done <entries>`; see `#run`), which the bench
 *   stamps with its own clock as they arrive.
 * Anything else goes to the space's own routes (worker/server/space.ts).
 */

import type { Conversation } from "../../../worker/agent/conversation/handles.ts";
import { AgentHarness } from "../../../worker/agent/harness.ts";
import { setDemoSpeed } from "../../../worker/app/demo-model.ts";
import { openSpaceHarness } from "../../../worker/app/space-agent.ts";
import { defineTask } from "../../../worker/core/define.ts";
import { errorMessage } from "../../../worker/core/errors.ts";
import { noopTask } from "../../../worker/debug/ticker.ts";
import { type FrontEnv, routeToSpace } from "../../../worker/entry/server.ts"; // also hands the interpreter its module
import { type DoStorage, type DoStore, openDoStore } from "../../../worker/server/do-store.ts";
import { Space, type SpaceEnv, type SpaceState } from "../../../worker/server/space.ts";
import { type DurableModel, durableTool, instantModel } from "../agent-scenario.ts";

/** What the bare loop needs of `ctx.storage` beyond the store's slice. */
interface BenchStorage extends DoStorage {
  transactionSync<T>(closure: () => T): T;
}

/** The table the commit rows write: one small row per commit. */
const BENCH_TABLE = "CREATE TABLE IF NOT EXISTS bench_commit (id INTEGER PRIMARY KEY, v TEXT NOT NULL)";
const INSERT = "INSERT INTO bench_commit (v) VALUES (?)";
const VALUE = "a small write";

/**
 * `bench.resume`: a live task that, each time its phase starts (at its creation, and after each
 * recovery), commits one `bench.resumed` entry, tells `resumed` once that commit is durable, and then
 * waits until it is aborted.
 */
const resumeTask = (resumed: () => void) =>
  defineTask<null, { phase: "wait" }, null>({
    name: "bench.resume",
    version: 1,
    initial: () => ({ phase: "wait" }),
    phases: {
      wait: async (_task, runtime, signal) => {
        await runtime.commit((tx, current) => {
          tx.appendEntry(current.conversationId, {
            kind: "bench.resumed",
            data: { resumed: runtime.resumed },
          });
          return undefined;
        });
        resumed();
        await new Promise<never>((_, reject) =>
          signal.addEventListener("abort", () => reject(signal.reason)),
        );
      },
    },
    abort: async (_t, runtime) =>
      void (await runtime.commit(() => ({ status: "terminal", outcome: { status: "aborted" } }))),
  });

/** The bench's demo conversations stream as fast as the event loop allows: the engine is what is timed. */
setDemoSpeed({ chunkDelayMs: 0 });

const int = (url: URL, name: string, fallback: number) => {
  const value = Number(url.searchParams.get(name) ?? fallback);
  if (!Number.isSafeInteger(value) || value < 0) throw new Error(`${name}: a whole number`);
  return value;
};

export class BenchSpace extends Space {
  readonly #storage: BenchStorage;
  /** The store `/commits?mode=store` commits through. */
  #store: DoStore | undefined;
  /** The agent loop `/prepare` opened. */
  #loop:
    | { chat: DurableModel; harness: AgentHarness; root: Conversation; transactions: () => number }
    | undefined;
  /** This instance's `bench.resume` definition (telling `#resumed`). */
  readonly #resumeTask: ReturnType<typeof resumeTask>;
  /** Settles at this instance's first `bench.resumed` commit. */
  readonly #resumed: Promise<void>;

  constructor(state: SpaceState, env: SpaceEnv) {
    let resumed!: () => void;
    const first = new Promise<void>((resolve) => {
      resumed = resolve;
    });
    const task = resumeTask(() => resumed());
    super(state, env, (store, ports) =>
      // Every tool runs freely (the bench times runs, not a person's approval).
      openSpaceHarness(store, ports, {
        codemode: true,
        tasks: [noopTask, task],
        approval: { defaults: "allow" },
      }),
    );
    this.#resumed = first;
    this.#resumeTask = task;
    this.#storage = state.storage as unknown as BenchStorage;
  }

  override async fetch(request: Request): Promise<Response> {
    const url = new URL(request.url);
    const route = url.pathname.replace(/^.*\/([a-z]+)$/, "$1");
    if (request.method !== "POST") return super.fetch(request);
    try {
      switch (route) {
        case "empty":
          return Response.json({});
        case "commits":
          return Response.json(await this.#commits(url.searchParams.get("mode") ?? "", int(url, "n", 100)));
        case "prepare":
          return Response.json(await this.#prepare(int(url, "rounds", 50)));
        case "agent":
          return Response.json(await this.#agent());
        case "verify":
          return Response.json(await this.#verify());
        case "seed":
          return Response.json(await this.#seed(int(url, "tasks", 0), int(url, "conversations", 0)));
        case "opened":
          return this.#opened();
        case "run":
          return this.#run(int(url, "runs", 1), url.searchParams.get("text") ?? "");
        default:
          return super.fetch(request);
      }
    } catch (error) {
      return Response.json({ error: errorMessage(error), route }, { status: 500 });
    }
  }

  async #commits(mode: string, n: number): Promise<{ n: number }> {
    const storage = this.#storage;
    storage.sql.exec(BENCH_TABLE);
    if (mode === "store") {
      const store = (this.#store ??= await openDoStore({ storage, name: "bench" }));
      for (let i = 0; i < n; i++) await store.commit((sql) => sql.run(INSERT, [VALUE]));
    } else if (mode === "bare") {
      for (let i = 0; i < n; i++) storage.transactionSync(() => storage.sql.exec(INSERT, VALUE));
    } else if (mode === "bare-sync") {
      for (let i = 0; i < n; i++) {
        storage.transactionSync(() => storage.sql.exec(INSERT, VALUE));
        await storage.sync();
      }
    } else throw new Error(`mode: store, bare or bare-sync, not ${JSON.stringify(mode)}`);
    return { n };
  }

  async #prepare(rounds: number): Promise<{ rounds: number }> {
    if (this.#loop) throw new Error("this object ran its loop already: take a new one");
    const chat = instantModel(rounds);
    const store = await openDoStore({ storage: this.#storage, name: "agent" });
    const harness = await AgentHarness.open(store, {
      models: chat.models,
      defaultModel: chat.ref,
      tools: [durableTool],
    });
    this.#loop = { chat, harness, root: await harness.root(), transactions: () => store.stats.transactions };
    return { rounds };
  }

  async #agent(): Promise<{ transactions: number }> {
    const loop = this.#loop;
    if (!loop) throw new Error("ask /prepare first");
    const before = loop.transactions();
    const settled = await (await loop.root.submit({ type: "input", content: "go" })).wait();
    if (settled.status !== "done") throw new Error(`the run ended ${JSON.stringify(settled)}`);
    await loop.root.waitForIdle();
    return { transactions: loop.transactions() - before };
  }

  /** After `/agent`: the tool results in the transcript (checking it is not part of the run); closes the harness. */
  async #verify(): Promise<{ toolResults: number }> {
    const loop = this.#loop;
    if (!loop) throw new Error("ask /prepare first");
    const toolResults = (await loop.root.entries()).filter((e) => e.kind === "pi.tool-result").length;
    await loop.harness.close();
    loop.chat.unregister();
    return { toolResults };
  }

  async #seed(tasks: number, conversations: number) {
    const h = await this.harness();
    const conversation = await h.createConversation({ ownership: { kind: "ownerless" } });
    for (let done = 0; done < tasks; ) {
      const n = Math.min(500, tasks - done);
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
    const live = await h.createConversation({ ownership: { kind: "ownerless" } });
    await h.createTask(this.#resumeTask, null, {
      ownership: { kind: "conversation" },
      conversationId: live.id,
    });
    await this.#resumed;
    return { tasks, conversations };
  }

  /** The space opened (and recovered), as lines: `open <live tasks>`, then `resumed` (see `/opened`). */
  #opened(): Response {
    return lineStream(async (line) => {
      const h = await this.harness();
      await line(`open ${Object.keys(h.taskGraph().tasks).length}`);
      await this.#resumed;
      await line("resumed");
    });
  }

  /**
   * The demo conversation, as lines streamed while it runs: `submit` as each input is about to be
   * submitted, `step` at each commit that appends to the conversation (written from the harness's
   * publication, after COMMIT), `done <entries>` at the end, or `error <message>`. The reader stamps
   * each line with its own clock as it arrives.
   */
  #run(runs: number, text: string): Response {
    if (text === "") throw new Error("text: what to say");
    return lineStream(async (line) => {
      const h = await this.harness();
      const conversation = await h.createConversation({ ownership: { kind: "ownerless" } });
      const stop = h.subscribe((change) => {
        if (change.entries.some((e) => e.conversationId === conversation.id)) void line("step");
      });
      try {
        for (let i = 0; i < runs; i++) {
          await line("submit");
          const settled = await (await conversation.submit({ type: "input", content: text })).wait();
          if (settled.status !== "done") throw new Error(`run ${i + 1} ended ${JSON.stringify(settled)}`);
          await conversation.waitForIdle();
        }
      } finally {
        stop();
      }
      await line(`done ${(await conversation.entries()).length}`);
    });
  }
}

/**
 * A response streamed as lines while `work` runs: each `line` call sends one at once (its promise
 * settles once the reader took it), an error sends `error <message>`, and the stream ends with `work`.
 */
function lineStream(work: (line: (text: string) => Promise<void>) => Promise<void>): Response {
  const { readable, writable } = new TransformStream<Uint8Array, Uint8Array>();
  const writer = writable.getWriter();
  const encoder = new TextEncoder();
  // A reader that went away leaves the work to finish unheard.
  const line = (text: string) => writer.write(encoder.encode(`${text}\n`)).catch(() => undefined);
  void (async () => {
    try {
      await work(line);
    } catch (error) {
      await line(`error ${errorMessage(error)}`);
    } finally {
      await writer.close().catch(() => undefined);
    }
  })();
  // As an event stream: miniflare 3 hands a response of another type over whole, at its end.
  return new Response(readable, { headers: { "content-type": "text/event-stream" } });
}

export default {
  fetch(request: Request, env: FrontEnv) {
    return routeToSpace(request, env);
  },
};
