/**
 * `subagent`: delegate a self-contained task to a child conversation and return its final answer
 * (spec §7.3). The child is owned by the call's task and starts as a copy of the parent's agent
 * (model, tools, instructions), with the call's `instructions` and `tools` over it.
 * - Foreground (default): one commit finds the child through the ownership index (the conversations
 *   the call's task owns) or creates it, so a replay-safe rerun after a crash finds it again; the
 *   task text is submitted under a request id derived from the task id, so it is admitted once;
 *   the call waits for the answer. Aborting the call cascades to the child (bottom-up), and the
 *   parent is idle only once the child is. While it waits, the call's output reports the child's
 *   progress (its tool calls and answers).
 * - Background (`background: true`): one commit (kept in a memo, so a rerun does not start another)
 *   creates a background conversation-owned `pi.subagent` task in the parent and the child owned by
 *   it; the call returns at once. The task submits the text to the child, waits for the answer and
 *   posts it to the parent as a follow-up input; both submissions carry request ids derived from its
 *   task id (exactly once each way across restarts). Being background, it and its child survive the
 *   parent's ordinary abort and do not keep the parent busy; `abort({ background: true })` ends them.
 * The child's spend is counted in the child's pi.usage only: the result reports no usage (spec §12).
 */
import type { AssistantMessage } from "@mariozechner/pi-ai";
import { Type } from "typebox";
import { defineTask, type TaskDefinition, type Tx } from "../../../core/define.ts";
import type { ConversationId, EntryRecord, Json, SubmissionRecord } from "../../../core/types.ts";
import { subagentMoveIds } from "../../move-ids.ts";
import { agentDoc, modelMessages } from "../../records.ts";
import type { AgentServices } from "../../services.ts";
import { defineTool, errorResult, type ToolApi, textResult } from "../contract.ts";
import { admitOnce, waitForSettlement } from "../handle.ts";

export const SUBAGENT_TASK = "pi.subagent";

const parameters = Type.Object({
  task: Type.String({ description: "The self-contained task for the subagent, with everything it needs" }),
  instructions: Type.Optional(Type.String({ description: "Instructions for the subagent (its role)" })),
  tools: Type.Optional(
    Type.Array(Type.String(), { description: "The tools the subagent may use (default: the caller's)" }),
  ),
  background: Type.Optional(
    Type.Boolean({ description: "Run in the background: its answer arrives later as a message" }),
  ),
});

type Options = { instructions?: string | undefined; tools?: string[] | undefined };

/** Create the child conversation owned by `taskId`: the parent's agent (the creation hook's copy) with `options` over it. */
function createChild(tx: Tx, taskId: number, options: Options): ConversationId {
  const child = tx.createConversation({ kind: "task", taskId });
  const agent = agentDoc.read(tx, child.id);
  agentDoc.write(tx, child.id, {
    ...agent,
    ...(options.instructions !== undefined ? { instructions: options.instructions } : {}),
    ...(options.tools !== undefined ? { tools: options.tools } : {}),
  });
  return child.id;
}

/** The text of an answer entry. */
export function answerText(entry: EntryRecord | undefined): string {
  const message = entry ? modelMessages(entry).find((m) => m.role === "assistant") : undefined;
  if (!message) return "";
  return (message as AssistantMessage).content.flatMap((b) => (b.type === "text" ? [b.text] : [])).join("\n");
}

/** One progress line per entry the child appends: its tool calls, tool results and answers. */
export function progressLines(entries: readonly EntryRecord[]): string {
  let out = "";
  for (const entry of entries) {
    for (const m of modelMessages(entry)) {
      if (m.role === "assistant") {
        for (const b of m.content) {
          if (b.type === "toolCall") out += `→ ${b.name} ${JSON.stringify(b.arguments).slice(0, 120)}\n`;
          else if (b.type === "text" && b.text.trim() !== "")
            out += `… ${b.text.trim().split("\n")[0]!.slice(0, 160)}\n`;
        }
      } else if (m.role === "toolResult") {
        out += `← ${m.toolName}${m.isError ? " (error)" : ""}\n`;
      }
    }
  }
  return out;
}

async function foreground(args: { task: string } & Options, api: ToolApi, tool: SubagentToolOptions) {
  const childId = await api.commit((tx) => {
    const existing = tx.ownedConversations(api.taskId)[0];
    return existing ?? createChild(tx, api.taskId, args);
  });
  const child = api.conversation(childId)!;
  let stop = () => {};
  if (tool.progress !== false) {
    api.output(`subagent in conversation ${childId}\n`);
    stop = child.onEntries((entries) => {
      const lines = progressLines(entries);
      if (lines !== "") api.output(lines);
    });
  }
  try {
    const submission = await child.submit({ content: args.task, requestId: `subagent:${api.taskId}` });
    const settled = await submission.wait();
    const details: Json = { conversationId: childId };
    if (settled.status !== "done")
      return errorResult(`the subagent did not answer: ${settled.reason}`, {
        ...details,
        reason: settled.reason,
      });
    return textResult(
      answerText(await api.entry(settled.answer)) || "(the subagent answered nothing)",
      details,
    );
  } finally {
    stop();
  }
}

async function background(args: { task: string } & Options, api: ToolApi) {
  const definition = api.taskDefinition(SUBAGENT_TASK);
  if (!definition)
    return errorResult(`background subagents need the ${SUBAGENT_TASK} task, which is not registered`);
  const started = await api.memo<{ taskId: number; conversationId: number }>("subagent", (tx) => {
    const taskId = tx.createTask(
      definition,
      { task: args.task, parent: api.conversationId } satisfies SubagentTaskInput,
      { ownership: { kind: "conversation" }, conversationId: api.conversationId, background: true },
    );
    return { taskId, conversationId: createChild(tx, taskId, args) };
  });
  return textResult(
    `Started a background subagent in conversation ${started.conversationId}; its answer will arrive as a message.`,
    { ...started, background: true },
  );
}

export interface SubagentToolOptions {
  /**
   * Report the child's progress in the call's output (default true). Those are presentation-only
   * commits timed by the child's pace; a test that counts transactions turns them off.
   */
  progress?: boolean;
}

/** The `subagent` tool. */
export function createSubagentTool(options: SubagentToolOptions = {}) {
  return defineTool({
    name: "subagent",
    label: "Delegate to a subagent",
    description:
      "Delegate a self-contained task to a subagent (a fresh conversation with your model and tools) and get its final answer back.",
    parameters,
    replay: "safe",
    async execute(args, api) {
      const call = { task: args.task, instructions: args.instructions, tools: args.tools };
      return args.background ? background(call, api) : foreground(call, api, options);
    },
  });
}

export type SubagentTaskInput = { task: string; parent: ConversationId };
type Checkpoint = { phase: "run" };
type Result = { conversationId: ConversationId; answered: boolean };

/**
 * `pi.subagent`: a background subagent's driver, conversation-owned in the parent and owner of the
 * child. Submits the task to the child, waits for its settlement, posts the answer to the parent as
 * a follow-up input; each submission under a request id derived from its task id.
 */
export function createSubagentTask(
  services: AgentServices,
): TaskDefinition<SubagentTaskInput, Checkpoint, Result> {
  return defineTask<SubagentTaskInput, Checkpoint, Result>({
    name: SUBAGENT_TASK,
    version: 1,
    moveIds: subagentMoveIds,
    initial: () => ({ phase: "run" }),
    phases: {
      run: async (task, runtime, signal) => {
        // Owned by this live task: in memory (the open loads what live tasks own).
        const child = services.core.conversationsOwnedBy(task.id)[0];
        if (child === undefined) {
          await runtime.commit(() => ({
            status: "terminal",
            outcome: { status: "failed", error: { message: "the subagent's conversation is missing" } },
          }));
          return;
        }
        const submitted = await admitOnce(
          services,
          child,
          { content: task.input.task, requestId: `subagent:${task.id}` },
          async (admitIn) => {
            let record: SubmissionRecord | undefined;
            await runtime.commit((tx) => {
              record = admitIn(tx);
              return undefined;
            });
            return record!;
          },
        );
        const settled = await waitForSettlement(services, submitted.id, signal);
        const answerRequest = `subagent-answer:${task.id}`;
        const posted = await services.core.submissionByRequest(task.input.parent, answerRequest);
        const text =
          settled.status === "done"
            ? answerText(await services.core.entry(settled.answer))
            : `(no answer: ${settled.reason})`;
        await runtime.commit((tx) => {
          if (!posted)
            services.admit(tx, task.input.parent, {
              type: "input",
              content: `The background subagent in conversation ${child} answered:\n\n${text}`,
              whenBusy: "followUp",
              requestId: answerRequest,
            });
          return {
            status: "terminal",
            outcome: {
              status: "completed",
              result: { conversationId: child, answered: settled.status === "done" },
            },
          };
        });
      },
    },
    abort: async (_task, runtime) => {
      await runtime.commit(() => ({
        status: "terminal",
        outcome: { status: "aborted", reason: "the background subagent was aborted" },
      }));
    },
  });
}
