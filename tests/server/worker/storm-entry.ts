/**
 * The worker of the SIGKILL storm (tests/server/kill-storm.test.ts), run in workerd by
 * tests/server/miniflare.ts: the server engine's Space (worker/server/space.ts) running an agent
 * whose model is scripted for a long task of many tool rounds, so a run is long, exact and checkable.
 *
 * The model ("storm", pi-ai's faux provider, streaming its answers at 60 tokens a second so a kill
 * can land in the middle of one): the last user message says `storm <R>`; while fewer than R tool
 * results follow it, it answers "Round k of R: one more step of the long task." with a call of the
 * `sleep` tool (0.6 s in 3 steps; a safe tool, so recovery runs again a call a crash cut), id
 * `storm-<n>` (n counts every tool result in the conversation, so ids never repeat); then "All R
 * rounds done." The same context always gets the same answer, so a request sent again after a crash
 * answers as the first would have.
 *
 * Routes: those of worker/server/space.ts under `/space/<name>/`, and `GET /space/<name>/tasks`:
 * every stored task of the space (terminal ones too) with its conversation, status and outcome, and
 * every submission with its conversation and status (read from the store's `submissions` table).
 */
import {
  type Context,
  type FauxResponseFactory,
  fauxAssistantMessage,
  fauxText,
  fauxToolCall,
  type Model,
  registerFauxProvider,
} from "@mariozechner/pi-ai";
import { AgentHarness } from "../../../worker/agent/harness.ts";
import { createModelResolver } from "../../../worker/agent/models/resolver.ts";
import { createSleepTool } from "../../../worker/agent/tools/builtin/sleep.ts";
import { type FrontEnv, routeToSpace } from "../../../worker/entry/server.ts";
import { Space, type SpaceEnv, type SpaceState } from "../../../worker/server/space.ts";

/** The tool round's sleep: long enough that kills land inside tools as well as inside answers. */
const SLEEP = { seconds: 0.6, steps: 3 };

const stormProvider = registerFauxProvider({
  provider: "storm",
  models: [{ id: "storm-1" }],
  tokensPerSecond: 60,
});
const stormModel = stormProvider.getModel() as Model<string>;

/** The scripted answer to `context` (see the module header). */
const answer: FauxResponseFactory = (context: Context) => {
  stormProvider.appendResponses([answer]);
  const messages = context.messages;
  let lastUser = -1;
  for (let i = messages.length - 1; i >= 0; i--)
    if (messages[i]!.role === "user") {
      lastUser = i;
      break;
    }
  const said = messages[lastUser];
  const content = said?.role === "user" ? said.content : "";
  const text =
    typeof content === "string" ? content : content.map((c) => (c.type === "text" ? c.text : "")).join("");
  const rounds = Number(/\bstorm (\d+)\b/.exec(text)?.[1] ?? 0);
  const done = messages.slice(lastUser + 1).filter((m) => m.role === "toolResult").length;
  if (done >= rounds) return fauxAssistantMessage(`All ${rounds} rounds done.`);
  const all = messages.filter((m) => m.role === "toolResult").length;
  return fauxAssistantMessage(
    [
      fauxText(`Round ${done + 1} of ${rounds}: one more step of the long task.`),
      fauxToolCall("sleep", SLEEP, { id: `storm-${all + 1}` }),
    ],
    { stopReason: "toolUse" },
  );
};
// Each answer queues the next; the depth is how many requests may be in flight at once.
stormProvider.setResponses(Array.from({ length: 16 }, () => answer));

export class StormSpace extends Space {
  constructor(state: SpaceState, env: SpaceEnv) {
    super(state, env, (store, ports) =>
      AgentHarness.open(store, {
        models: createModelResolver({ extra: [stormModel as Model<never>] }),
        defaultModel: { provider: stormModel.provider, modelId: stormModel.id },
        tools: [createSleepTool()],
        apiKey: ports.apiKey,
        wakeAt: ports.wakeAt,
        onReport: ports.onReport,
        onFatal: ports.onFatal,
      }),
    );
  }

  override async fetch(request: Request): Promise<Response> {
    if (request.method !== "GET" || !new URL(request.url).pathname.endsWith("/tasks"))
      return super.fetch(request);
    const harness = await this.harness();
    const tasks = (await harness.tasks()).map((t) => ({
      id: t.id,
      kind: t.kind,
      conversationId: t.conversationId,
      status: t.state.status,
      outcome: t.state.status === "terminal" ? t.state.outcome.status : undefined,
    }));
    // Submissions straight from the store (tests may reach in): each one's conversation and status.
    const submissions = await harness.store.read(async (sql) =>
      (await sql.all("SELECT id, conversation_id, body FROM submissions ORDER BY id")).map((row) => ({
        id: Number(row["id"]),
        conversationId: Number(row["conversation_id"]),
        status: (JSON.parse(String(row["body"])) as { status?: string }).status,
      })),
    );
    return Response.json({ tasks, submissions });
  }
}

export default {
  fetch(request: Request, env: FrontEnv) {
    return routeToSpace(request, env);
  },
};
