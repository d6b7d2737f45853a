/**
 * The worker the space tests run in workerd (bundled by tests/server/miniflare.ts): the server
 * engine's own front door (the token check included) and Space class (worker/entry/server.ts), with
 * one test task more. Routes: those of worker/server/space.ts under `/space/<name>/`, and
 * - `POST /space/<name>/delay?ms=M`: create a `test.delayed` task in the root conversation that
 *   waits until M ms from now (announcing the deadline through the space's `wakeAt`, as the agent's
 *   backoffs do), then appends one `test.woke` entry with the time it woke, and completes;
 * - `POST /space/<name>/schedule?ms=M`: a one-off schedule (worker/app/schedules.ts) in the root
 *   conversation, due M ms from now, sending "scheduled hello";
 * - `POST /space/<name>/runaway`: run `while (true) {}` in the sandbox (in the object's thread, as
 *   code mode does here) and answer how it ended and how long it held the thread.
 * Tool approval (worker/app/tool-policies.ts): every tool runs freely here, as on the browser's test
 * pages, unless the binding `SPACE_TEST_APPROVAL` is `ask` (the product's defaults: the server's
 * approval tests). MCP servers' tokens come from `MCP_<NAME>_TOKEN` bindings, as on the real server.
 */

import {
  type Api,
  type Context,
  type FauxResponseFactory,
  fauxAssistantMessage,
  type Model,
  registerFauxProvider,
} from "@mariozechner/pi-ai";
import { sleepUntil } from "../../../worker/agent/services.ts";
import { createSchedule } from "../../../worker/app/schedules.ts";
import { mcpTokenFromEnv, openSpaceHarness, spaceEngine } from "../../../worker/app/space-agent.ts";
import { defineTask } from "../../../worker/core/define.ts";
import { errorMessage } from "../../../worker/core/errors.ts";
import { type FrontEnv, routeToSpace } from "../../../worker/entry/server.ts"; // also hands the interpreter its module
import { runScript } from "../../../worker/sandbox/run.ts";
import { Space, type SpaceEnv, type SpaceState } from "../../../worker/server/space.ts";

type Wait = { phase: "wait" };

/** FNV-1a (32 bits) of a string's UTF-16 units, in hex: a fingerprint of what the model was sent. */
function fingerprint(text: string): string {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193) >>> 0;
  return h.toString(16).padStart(8, "0");
}

/**
 * A model that takes images ("vision-1", keyless, tests only): it answers with what its request's
 * last user message held, "saw <n> images: <mimeType> <base64 length> <fingerprint>, ...; text
 * <characters>", so a test reads in the transcript exactly what reached the model.
 */
const visionProvider = registerFauxProvider({
  provider: "vision",
  models: [{ id: "vision-1", input: ["text", "image"] }],
});
const seen: FauxResponseFactory = (context: Context) => {
  visionProvider.appendResponses([seen]);
  const last = [...context.messages].reverse().find((m) => m.role === "user");
  const content = last?.role === "user" && typeof last.content !== "string" ? last.content : [];
  const images = content.flatMap((c) =>
    c.type === "image" ? [`${c.mimeType} ${c.data.length} ${fingerprint(c.data)}`] : [],
  );
  const text = content.reduce((n, c) => n + (c.type === "text" ? c.text.length : 0), 0);
  return fauxAssistantMessage(`saw ${images.length} images: ${images.join(", ")}; text ${text}`);
};
visionProvider.setResponses(Array.from({ length: 4 }, () => seen));
const visionModel = visionProvider.getModel() as unknown as Model<Api>;

const delayedTask = (wakeAt: (at: number) => void) =>
  defineTask<{ at: number }, Wait, { woke: number }>({
    name: "test.delayed",
    version: 1,
    initial: () => ({ phase: "wait" }),
    phases: {
      wait: async (task, runtime, signal) => {
        wakeAt(task.input.at);
        await sleepUntil(task.input.at, () => runtime.now(), signal);
        await runtime.commit((tx) => {
          const woke = runtime.now();
          tx.appendEntry(task.conversationId, { kind: "test.woke", data: { at: task.input.at, woke } });
          return { status: "terminal", outcome: { status: "completed", result: { woke } } };
        });
      },
    },
    abort: async (_t, runtime) =>
      void (await runtime.commit(() => ({ status: "terminal", outcome: { status: "aborted" } }))),
  });

export class TestSpace extends Space {
  constructor(state: SpaceState, env: SpaceEnv) {
    const agent = {
      codemode: true,
      approval: { defaults: env["SPACE_TEST_APPROVAL"] === "ask" ? ("ask" as const) : ("allow" as const) },
      mcpToken: (name: string) => mcpTokenFromEnv(env, name),
      models: [visionModel],
    };
    super(
      state,
      env,
      (store, ports) => openSpaceHarness(store, ports, { ...agent, tasks: [delayedTask(ports.wakeAt)] }),
      { engine: spaceEngine(agent) },
    );
  }

  override async fetch(request: Request): Promise<Response> {
    const url = new URL(request.url);
    if (url.pathname.endsWith("/runaway")) {
      const started = performance.now();
      const host = { start: 0, seed: 1, functions: [], call: async () => ({ ok: true }), print() {} };
      const ended = await runScript("while (true) {}", host as never).then(
        () => "completed",
        (error: unknown) => `${(error as Error).name}: ${errorMessage(error)}`,
      );
      return Response.json({ ended, heldMs: performance.now() - started });
    }
    if (url.pathname.endsWith("/schedule")) {
      const harness = await this.harness();
      const at = harness.now() + Number(url.searchParams.get("ms"));
      const schedule = await createSchedule(harness, 1, {
        text: "scheduled hello",
        when: { kind: "once", at },
        timeZone: "UTC",
        catchUp: "run",
      });
      return Response.json({ id: schedule.id, at });
    }
    if (!url.pathname.endsWith("/delay")) return super.fetch(request);
    const harness = await this.harness();
    const at = harness.now() + Number(url.searchParams.get("ms"));
    const definition = harness.registry.get("test.delayed");
    if (!definition) return Response.json({ error: "test.delayed is not registered" }, { status: 500 });
    const task = await harness.createTask(definition, { at }, { ownership: { kind: "conversation" } });
    return Response.json({ task, at });
  }
}

export default {
  fetch(request: Request, env: FrontEnv) {
    return routeToSpace(request, env);
  },
};
