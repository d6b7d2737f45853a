/**
 * The `ToolApi` one execution of a tool gets (spec §7.3): its call's identity, the workspace and
 * environment, the phase's registry snapshot and agent resolution, the harness's models, streamed
 * output, details and diagnostics, commits, tasks (create, read, wait), committed documents and
 * conversations, all bound to the calling task's invocation (refused once the tool's `execute`
 * settled), memos, and nested calls. A nested call (`executeTool`) is a tool task owned by
 * the calling one, keyed by its position among the execution's calls (or the caller's own key), so a
 * rerun after a crash reattaches to the task the first run created and gets its recorded result.
 */
import type { ToolCall } from "@mariozechner/pi-ai";
import { InvalidTransition } from "../../../core/errors.ts";
import type { ConversationId, Json, TaskRecord } from "../../../core/types.ts";
import type { ExecutionEnv } from "../../env.ts";
import { agentView } from "../../extensions/resolve.ts";
import { type DocToken, refuseOtherSemantics } from "../../records.ts";
import type { AgentServices } from "../../services.ts";
import { NestedCallMismatch, type ToolApi, type ToolResult } from "../contract.ts";
import { type Binding, check, toolCommit, toolConversation } from "../handle.ts";
import type { OutputBuffer } from "../results.ts";
import type {
  ToolTaskContext,
  ToolTaskInput,
  ToolTaskRecord,
  ToolTaskResult,
  ToolTaskRuntime,
} from "./types.ts";

/** What one execution binds its api to. */
export interface ExecutionParts {
  readonly runtime: ToolTaskRuntime;
  readonly task: ToolTaskRecord;
  readonly call: ToolCall;
  readonly env: ExecutionEnv | undefined;
  readonly output: OutputBuffer;
  /** True once the tool's execute settled. */
  readonly ended: () => boolean;
  /** The services as the call's phase took them: its registry snapshot and agent resolution. */
  readonly phase: AgentServices;
}

export function toolApi(ctx: ToolTaskContext, parts: ExecutionParts): ToolApi {
  const { services } = ctx;
  const { runtime, task, call, output } = parts;
  const c = task.conversationId;
  let position = 0;
  const binding: Binding = { services, runtime, ended: parts.ended };
  const { phase } = parts;
  const phaseAgent = phase.phaseAgent ?? { state: services.readAgent(c), resolved: phase.agent(c) };
  // The view of the phase's agent is made when the tool first asks for it (most never do), from the
  // resolution the phase took at its start, so it is the same whenever it is made.
  let view: ReturnType<typeof agentView> | undefined;
  /** Rejects (instead of throwing) once the call ended. */
  const bound = async <T>(work: () => Promise<T>): Promise<T> => {
    check(binding);
    return work();
  };
  return {
    // Made when the tool first reads it (TaskRuntime.signal).
    get signal() {
      return runtime.signal;
    },
    toolCallId: call.id,
    taskId: task.id,
    conversationId: c,
    env: parts.env,
    output: (chunk) => output.append(chunk),
    commit: (change) => toolCommit(binding, change),
    conversation: (id) => toolConversation(binding, id),
    entry: (id) => services.core.entry(id),
    memo: async (name, candidate) => {
      check(binding);
      return (await runtime.memo(`tool:${name}`, candidate as never, runtime.signal)) as never;
    },
    taskDefinition: (name) => services.taskDefinition(name),
    executeTool: (name, nestedArgs, options) =>
      executeNested(ctx, parts, options?.key ?? `#${position++}`, name, nestedArgs, options?.sameAsRecorded),
    recordedCall: async (key) => {
      const childId = await runtime.memo<number>(`nested:${key}`);
      return childId === undefined ? undefined : recordedCallOf(await runtime.getTask(childId));
    },
    tools: () => services.tools(c),
    registry: phase.registry(),
    agent: () =>
      bound(async () => (view ??= agentView(phaseAgent.resolved, phaseAgent.state, services.defaultModel))),
    models: services.models,
    diagnostic: (diagnostic) => {
      check(binding);
      output.diagnostic(diagnostic);
    },
    details: (value) => bound(() => output.setDetails(value)),
    createTask: (definition, input, options) =>
      bound(() => {
        if (!options || typeof options !== "object" || "conversationId" in options)
          throw new InvalidTransition(
            "a tool's tasks live in its conversation: createTask takes { ownership, background? } only",
          );
        return toolCommit(binding, (tx) =>
          tx.createTask(definition, input, {
            ownership: options.ownership,
            ...(options.background !== undefined ? { background: options.background } : {}),
            conversationId: c,
          }),
        );
      }),
    getTask: (id) => bound(() => runtime.getTask(id, runtime.signal)),
    waitForTask: (id) => bound(() => runtime.waitForTask(id, runtime.signal)),
    snapshot: <T extends Json>(doc: string | DocToken<T>, conversationId: ConversationId = c) =>
      bound(async () => {
        if (typeof doc === "string") return services.core.doc<T>(conversationId, doc);
        const stored = await services.core.docVersioned(conversationId, doc.name);
        if (stored.value === undefined) return undefined;
        // Typed access refuses a token whose rules are not the incarnation's (spec §3.1), as snapshot does.
        refuseOtherSemantics(doc.name, doc, await services.core.docRecord(conversationId, doc.name));
        return doc.view(stored);
      }),
  };
}

/** Run (or reattach to) the nested call recorded under `key` and hand back its result. */
async function executeNested(
  ctx: ToolTaskContext,
  parts: ExecutionParts,
  key: string,
  name: string,
  nestedArgs: unknown,
  sameAsRecorded: boolean | undefined,
): Promise<ToolResult> {
  const { runtime, task, call } = parts;
  let created = false;
  const childId = await runtime.memo<number>(`nested:${key}`, (tx) => {
    created = true;
    return tx.createTask(
      ctx.definition(),
      { nested: { name, arguments: nestedArgs as Json, callId: `${call.id}/${key}` } },
      { ownership: { kind: "task", taskId: task.id } },
    );
  });
  if (sameAsRecorded && !created) await checkRecorded(runtime, childId!, key, name, nestedArgs);
  const child = await runtime.waitForTask(childId!, runtime.signal);
  const outcome = child.state.status === "terminal" ? child.state.outcome : undefined;
  const result =
    outcome && "result" in outcome ? (outcome.result as ToolTaskResult | undefined)?.result : undefined;
  return (
    result ?? {
      content: [{ type: "text", text: `nested call ${name} ended ${outcome?.status ?? "without a result"}` }],
      isError: true,
    }
  );
}

function recordedCallOf(child: TaskRecord | undefined): { name: string; arguments: Json } | undefined {
  const input = child?.input as ToolTaskInput | undefined;
  if (!input || !("nested" in input)) return undefined;
  return { name: input.nested.name, arguments: input.nested.arguments };
}

/** Rejects with `NestedCallMismatch` when the task recorded under `key` is another call. */
async function checkRecorded(
  runtime: ToolTaskRuntime,
  childId: number,
  key: string,
  name: string,
  args: unknown,
): Promise<void> {
  const recorded = recordedCallOf(await runtime.getTask(childId));
  if (!recorded) return;
  if (recorded.name !== name || JSON.stringify(recorded.arguments) !== JSON.stringify(args ?? null))
    throw new NestedCallMismatch(
      key,
      { name: recorded.name, arguments: recorded.arguments },
      { name, arguments: args },
    );
}
