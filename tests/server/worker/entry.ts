/**
 * The worker the server tests run in workerd (bundled by tests/server/miniflare.ts). One Durable
 * Object class, `ConformanceObject`, on SQLite storage; each request names an object, so scenarios
 * and restart probes never share a database. Routes (all answer JSON):
 * - `GET /scenarios`: the conformance scenarios' names;
 * - `POST /scenario?name=N`: run scenario N on the Durable Object store (in the object named N):
 *   `{ ok, error?, log, ms }`;
 * - `POST /commit?object=O&from=A&count=C`: commit rows A..A+C-1 of table `probe`, one transaction
 *   each, answering once every commit's promise settled;
 * - `POST /hold?object=O&rows=C`: open a transaction, write C rows, and answer while it stays open
 *   (it never ends: the test kills workerd);
 * - `GET /rows?object=O`: the rows of `probe`;
 * - `POST /park?object=O&tasks=C`: open the core's harness, start C tasks that park, answer once all
 *   are running (the test then kills workerd);
 * - `POST /resume?object=O`: open the harness on what the dead process committed, let the parked
 *   tasks finish (each appends one entry as it completes), answer their outcomes and the entries.
 */
import { defineTask } from "../../../worker/core/define.ts";
import { Harness } from "../../../worker/core/harness.ts";
import type { Json } from "../../../worker/core/types.ts";
import { type DoStore, openDoStore } from "../../../worker/server/do-store.ts";
import { errorMessage } from "../../../worker/store/errors.ts";
import { until } from "../../../worker/testing/wait.ts";
import { scenarioNamed, scenarios } from "../../conformance/store-suite.ts";
import { doKit, type KitStorage } from "./do-kit.ts";

interface ObjectState {
  readonly storage: KitStorage;
}
interface ObjectNamespace {
  idFromName(name: string): unknown;
  get(id: unknown): { fetch(request: Request): Promise<Response> };
}
interface Env {
  OBJECTS: ObjectNamespace;
}

type Go = { phase: "go" };
/** Parks until its invocation is signalled; the resumed run completes with its input. */
const parkedTask = (resume: boolean) =>
  defineTask<Json, Go, Json>({
    name: "parked",
    version: 1,
    initial: () => ({ phase: "go" }),
    phases: {
      go: async (task, runtime, signal) => {
        if (resume) {
          await runtime.commit((tx) => {
            tx.appendEntry(1, { kind: "resumed", data: task.input });
            return {
              status: "terminal",
              outcome: { status: "completed", result: { input: task.input, resumed: runtime.resumed } },
            };
          });
          return;
        }
        await new Promise<never>((_, reject) =>
          signal.addEventListener("abort", () => reject(signal.reason)),
        );
      },
    },
    abort: async (_t, runtime) =>
      void (await runtime.commit(() => ({ status: "terminal", outcome: { status: "aborted" } }))),
  });

export class ConformanceObject {
  readonly #storage: KitStorage;
  /** Kept alive between requests: the harness of `/park`, the store of `/hold`. */
  #kept: Array<Harness | DoStore> = [];

  constructor(state: ObjectState) {
    this.#storage = state.storage;
  }

  async fetch(request: Request): Promise<Response> {
    const url = new URL(request.url);
    const number = (name: string) => Number(url.searchParams.get(name) ?? 0);
    try {
      switch (url.pathname) {
        case "/scenario":
          return Response.json(await this.#scenario(url.searchParams.get("name") ?? ""));
        case "/commit": {
          const store = await this.#probeStore();
          for (let i = number("from"); i < number("from") + number("count"); i++)
            await store.commit((sql) => sql.run("INSERT INTO probe (n) VALUES (?)", [i]));
          await store.close();
          return Response.json({ committed: number("count") });
        }
        case "/hold": {
          const store = await this.#probeStore();
          this.#kept.push(store);
          let written!: () => void;
          const ready = new Promise<void>((r) => {
            written = r;
          });
          void store
            .commit(async (sql) => {
              for (let i = 0; i < number("rows"); i++)
                await sql.run("INSERT INTO probe (n) VALUES (?)", [-1 - i]);
              written();
              await new Promise(() => undefined);
            })
            .catch(() => undefined);
          await ready;
          return Response.json({ holding: number("rows") });
        }
        case "/rows": {
          const store = await this.#probeStore();
          const rows = await store.read((sql) => sql.all("SELECT n FROM probe ORDER BY rowid"));
          await store.close();
          return Response.json(rows.map((r) => r["n"]));
        }
        case "/park": {
          const store = await openDoStore({ storage: this.#storage });
          const h = await Harness.open(store, { tasks: [parkedTask(false)] });
          this.#kept.push(h);
          for (let i = 0; i < number("tasks"); i++)
            await h.createTask(parkedTask(false), { n: i }, { ownership: { kind: "conversation" } });
          await until(
            () => h.inspect().tasks.filter((t) => t.state.kind === "running").length === number("tasks"),
            {
              what: "parked tasks running",
            },
          );
          return Response.json({ parked: number("tasks") });
        }
        case "/resume": {
          const store = await openDoStore({ storage: this.#storage });
          const h = await Harness.open(store, { tasks: [parkedTask(true)] });
          const outcomes = [];
          for (const task of await h.tasks({ kind: "parked" })) {
            const record = await h.waitForTask(task.id);
            outcomes.push(record.state.status === "terminal" ? record.state.outcome : record.state.status);
          }
          const entries = await h.transaction((tx) => tx.lastEntryId());
          await h.close();
          return Response.json({ outcomes, entries });
        }
        default:
          return new Response("no such route", { status: 404 });
      }
    } catch (error) {
      return Response.json(
        { error: errorMessage(error), name: error instanceof Error ? error.name : "" },
        { status: 500 },
      );
    }
  }

  async #probeStore(): Promise<DoStore> {
    const store = await openDoStore({ storage: this.#storage });
    // A schema of its own (the probe's one table); a Durable Object needs no owner epoch.
    await store.migrate({
      migrations: ["CREATE TABLE probe (n INTEGER NOT NULL);"],
      epoch: { read: "SELECT 1", bump: "SELECT 1" },
    });
    return store;
  }

  async #scenario(name: string): Promise<{ ok: boolean; error?: string; log: string[]; ms: number }> {
    const scenario = scenarioNamed(name);
    const log: string[] = [];
    const started = Date.now();
    try {
      await scenario.run(doKit(this.#storage), (line) => log.push(line));
      return { ok: true, log, ms: Date.now() - started };
    } catch (error) {
      const stack = error instanceof Error && error.stack ? `\n${error.stack}` : "";
      return { ok: false, error: `${errorMessage(error)}${stack}`, log, ms: Date.now() - started };
    }
  }
}

export default {
  async fetch(request: Request, env: Env): Promise<Response> {
    const url = new URL(request.url);
    if (url.pathname === "/scenarios") return Response.json(scenarios.map((s) => s.name));
    const object =
      url.pathname === "/scenario" ? url.searchParams.get("name") : url.searchParams.get("object");
    if (!object) return new Response("name the object", { status: 400 });
    return env.OBJECTS.get(env.OBJECTS.idFromName(object)).fetch(request);
  },
};
