/**
 * Draws a reviewer's random sample of the asserted lines of the specification coverage lists (issue
 * 29's reading; tests/spec-coverage/sample-session20.md is the first drawn with it,
 * sample-session20b.md the second, sample-session20c.md the third, with seed 20261206 and count 20,
 * sample-session22.md the fourth, seed 20261207 and count 20, sample-session22b.md (seeds 20261208 to
 * 20261213) the fifth to tenth, sample-session23.md (seed 20261214 and on) the next; sample-session24.md
 * holds the reviewer draws over the whole population, ALL=1 with seeds 20261217 to 20261219):
 *   node scripts/spec-sample.mjs [seed] [count]        (defaults: 20261205, 30)
 *   EXCLUDED=1 node scripts/spec-sample.mjs ...         also prints the lines left out and why
 *   ALL=1 node scripts/spec-sample.mjs [seed] [count]  draws from every asserted line, none left out
 *                                                       (a reviewer's draw over the whole population;
 *                                                       each drawn line says which earlier sample drew it)
 *
 * Population: every rule line the spec-coverage checker (tests/unit/project/spec-coverage.test.ts)
 * treats as asserted: a `- ` line at the margin with its indented continuation, in sections-0-4.md
 * when its first tag is [A] or [NEW], in sections-5-9.md, section-7.md and sections-10-11.md when
 * its `->` side is not N/A, MISSING, CONTRARY, another issue or in progress. Lines in file order,
 * the files in the order below.
 *
 * Left out, as already read by an earlier sample:
 * - session 19's twenty (sample-session19.md, drawn on main 232dce6), session 20c's twenty
 *   (sample-session20c.md, seed 20261206), session 22's twenty (sample-session22.md, seed 20261207), samples 22b-22g's hundred and twenty (sample-session22b.md), session 20's thirty
 *   (sample-session20.md, seed 20261204) and session 20b's thirty (sample-session20b.md, seed
 *   20261205), found by the start of their rule text, listed below;
 * - session 10's hundred (sample-session10.md) were drawn from the checklist digest, not from these
 *   lists: each row is matched to the line of sections-0-4.md or sections-5-9.md that names one of
 *   the tests the row names and shares the most words with its rule (Jaccard >= 0.25).
 *
 * Draw: a Fisher-Yates shuffle of the remaining lines with mulberry32(seed), the first `count` taken.
 * The same seed on the same lists draws the same lines.
 */
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const LISTS = {
  "sections-0-4": "tags",
  "sections-5-9": "arrow",
  "section-7": "arrow",
  "sections-10-11": "arrow",
};
const read = (name) => fs.readFileSync(path.join(ROOT, "tests/spec-coverage", `${name}.md`), "utf8");

/** One rule: a `- ` line at the margin with its indented continuation lines. */
function rules(markdown) {
  const out = [];
  let current;
  markdown.split("\n").forEach((line, i) => {
    if (line.startsWith("- ")) {
      if (current) out.push(current);
      current = { line: i + 1, text: line };
    } else if (current && /^\s+\S/.test(line)) current.text += `\n${line}`;
    else if (current) {
      out.push(current);
      current = undefined;
    }
  });
  if (current) out.push(current);
  return out;
}

function asserted(rule, style) {
  if (style === "tags") {
    const tag = /\[(A|NEW|N\/A|MISSING|CONTRARY|UNASSERTED|I\d+|WIP[^\]]*)\]/.exec(rule.text);
    return tag?.[1] === "A" || tag?.[1] === "NEW";
  }
  const arrow = rule.text.indexOf(" -> ");
  if (arrow < 0) return false;
  return !/^\**(N\/A|MISSING|CONTRARY|issue \d+|in progress)/i.test(rule.text.slice(arrow + 4).trimStart());
}

/** The rule's own words: the text before its tag or arrow. */
const head = (rule) => rule.text.split(/ -> | \[(?:A|NEW)\] /)[0].slice(2);

const SESSION19 = [
  ["sections-5-9", '"chains selected hooks over durable progress without changing cancellation'],
  ["sections-0-4", "[1.8] An uncertain storage failure makes the session fatal"],
  ["sections-5-9", "Writes first (ID order), then user items; a user item queued before a reset"],
  ["sections-0-4", "Extensions have no creation hook"],
  ["sections-0-4", "Publications and watches converge"],
  ["sections-0-4", "retireDoc()"],
  ["sections-0-4", "Settings never copied; every reader resolves anew"],
  ["sections-5-9", '"reopens a checkout waiting on live payments and finishes it"'],
  ["sections-5-9", '"retries a retryable error after a durable backoff and then answers"'],
  ["sections-0-4", "States/watches hydrate baseline + subscription atomically"],
  ["sections-5-9", "pi.user: [UserMessage] stamped with the Harness clock at admission or placement"],
  ["sections-0-4", "Historical reads never create docs in the past"],
  ["sections-5-9", '"excludes aborted, error, and deferred assistant messages but keeps their raw entries"'],
  ["sections-10-11", "An unknown failure after storage admission is fatal"],
  ["sections-5-9", "A boundary adds placed steering inputs to the run; every terminal path settles"],
  ["sections-0-4", "owner is attribution + abort/idle traversal"],
  ["section-7", "Replaced task definition hands over at the next phase boundary"],
  ["sections-0-4", "createConversation / fork commit atomically"],
  ["section-7", "Scheduler takes one snapshot per phase"],
  ["sections-0-4", "Storage success: adopt, enqueue publication"],
];

const SESSION20 = [
  ["section-7", "`DocumentReader` (`snapshot`): committed documents, any conversation"],
  ["sections-5-9", '"lets a background task wait on the owner of its conversation"'],
  ["sections-0-4", "Harness.submission() reacquires after reopen"],
  ["sections-5-9", "Abort protocol: mark"],
  ["sections-5-9", "Phase throws"],
  ["sections-5-9", "Blocking: appends directly, completes {entryId}"],
  ["section-7", "defineExtension / section / hook / wrapTool / wrapSection / createRegistry"],
  ["sections-0-4", "Migration failure shows only after the scheduler tried it"],
  ["section-7", "beforeTool: argument chain, first block wins, throw blocks"],
  ["sections-5-9", "pi.assistant: any stop reason, by generation"],
  ["sections-5-9", "5.5.2 held outcome final"],
  ["sections-5-9", '"aborts a parallel round with its generation: tools first'],
  ["sections-0-4", "Progress calls enable scheduling"],
  ["sections-5-9", "Every built-in writer of a pi.assistant adds its usage in the same commit"],
  ["sections-5-9", "A terminal owner never cascades; new work in its conversation runs normally"],
  ["sections-0-4", "[2.1.6] Every positional system message and its changes are kept"],
  ["sections-5-9", '"applies the newest edit per target within the active range"'],
  ["sections-0-4", "[1.4] External effects never run inside the transaction"],
  ["sections-0-4", "subscribeCommits sees complete publications after adoption"],
  ["sections-5-9", "Table: stale head write"],
  ["sections-5-9", "Classification: usage added; stop with text"],
  ["sections-0-4", "ConversationWatch = WatchHandle<ConversationView>"],
  ["sections-5-9", "pi.tool v1 starts at call; the call is read from the assistant entry"],
  ["sections-10-11", "One `Storage.commit(writes)` batch is atomic"],
  ["sections-5-9", '"keeps a finished background ancestor a boundary after reopen'],
  ["section-7", "Resolution: hooks of selected extensions in extension order"],
  ["sections-0-4", "Typed access rejects when scope/history/fork disagree"],
  ["sections-5-9", "Conversation-owned: write submission with requestId compaction:<taskId>"],
  ["section-7", "A pinned tool keeps its implementation until its execution ends"],
  ["sections-5-9", "Tx has no task replacement op"],
];

const SESSION20B = [
  ["section-7", "Conversation.agent() for UIs"],
  ["sections-5-9", "select: no model"],
  ["sections-5-9", "watchEvents(harness, conversationId) from the pack"],
  ["section-7", "A user tool (name, description, JSON-schema parame"],
  ["sections-5-9", "Aborting a blocked task"],
  ["sections-5-9", "A terminal receipt guarantees ordinary owned work"],
  ["sections-5-9", "defineTask(definition)"],
  ["sections-0-4", "abortTask on a terminal task"],
  ["sections-5-9", "Tool task: slot running in its intent commit; term"],
  ["section-7", "Tool metadata never enters the transcript (toToolD"],
  ["sections-5-9", "5.5.3 held non-completed = cancellation intent; he"],
  ["sections-0-4", "ContextView {head, entries, contributions, message"],
  ["sections-0-4", "HarnessSettings read at every resolution, synchron"],
  ["sections-5-9", "A crash loses only the uncommitted throttle window"],
  ["sections-5-9", '"reads settings through getters at every decision"'],
  ["sections-0-4", "Only committed state is observable; a commit write"],
  ["sections-5-9", "pi.tool-result: by tool tasks, and by generation f"],
  ["sections-0-4", "env(target, ctx) called per use (tool execution, s"],
  ["sections-5-9", "A postTools boundary selecting a reset behaves as"],
  ["sections-0-4", "Conversation API: submit, agent, configure, commit"],
  ["sections-0-4", "The retry policy is read when generation classifie"],
  ["sections-0-4", "abortTask commits the mark, signals and joins the"],
  ["section-7", "Aborted (and interrupted) results are built from t"],
  ["sections-5-9", "Every live non-background task below a cancelled o"],
  ["sections-0-4", "stored == token use; older migrate; newer reject;"],
  ["sections-5-9", '"rejects new owned work below an owner that is com'],
  ["sections-5-9", "The step before every phase runs on the Session li"],
  ["sections-5-9", "Cancelling a caller's signal cancels only that cal"],
  ["sections-5-9", "Checkpoint and memos absent from the terminal reco"],
  ["sections-0-4", "initial() and migrate() must return JSON objects"],
];

const SESSION20C = [
  ["sections-0-4", "[2.1.7] Tool results move right after their assistant"],
  ["sections-5-9", '"keeps holding for ordinary work created during the hold"'],
  ["sections-0-4", "Task docs and tasks never copied"],
  ["sections-0-4", "Fork traversal: child entries then parent entries"],
  ["sections-0-4", "SystemMessage: sections patch by name"],
  ["sections-5-9", "Every task names its owner; child in its owner's conversation"],
  ["section-7", "Registry is app-owned, may outlive a harness"],
  ["sections-0-4", "Versions must be positive integers"],
  ["sections-0-4", "snapshot never creates or persists a migration"],
  ["section-7", "Hot reload: a running call finishes on the old version"],
  ["sections-5-9", '"fails fast on a held failure before the failing child drains"'],
  ["sections-0-4", 'fork "asOf" requires rewindable'],
  ["section-7", "Section order, same key in place, instructions last"],
  ["sections-5-9", "A tool task whose owned conversations still work holds completing"],
  ["sections-0-4", "Conversation handles are stateless, compared by id"],
  ["sections-0-4", "Reopen finds the same root by id 1"],
  ["sections-5-9", "Acquisition context cancel / session_closed / listener_error"],
  ["sections-5-9", "Abort handler: aborted result from the durable partial"],
  ["sections-5-9", "Abort invocation runs the handler once"],
  ["sections-0-4", "ConversationInit(tx, id) runs in the creating commit"],
];

const SESSION22 = [
  ["sections-0-4", "Active transcript from the newest head on"],
  ["sections-5-9", "5.5.4 writes split at the hold"],
  ["sections-5-9", "Step rule 6: checkpoint unchanged"],
  ["sections-5-9", "Retryable error within maxRetries"],
  ["sections-0-4", "CommonDocDefinition {kind, version"],
  ["sections-5-9", "Summarized entries = head marker + entries before the cut"],
  ["sections-0-4", "A called tool is resolved when its tool task runs"],
  ["sections-5-9", "steeringMode/followUpMode read at each boundary"],
  ["sections-5-9", "A final boundary without user triggers leaves the conversation idle"],
  ["sections-0-4", "configure() neither starts generation nor appends a system entry"],
  ["sections-0-4", "Conversation idle / Harness idle by ordinary traversal"],
  ["section-7", "New phases and tool tasks use the new extension"],
  ["sections-5-9", "Never terminalized for missing code"],
  ["sections-5-9", '"cancels a deferred response when aborted during polling"'],
  ["sections-5-9", "HookRunner.each"],
  ["sections-0-4", "ConversationCreateOptions {ownership (required)"],
  ["sections-5-9", "pi.live.run names the run's task and inputs"],
  ["sections-5-9", "The hook runs in the commit that makes a scheduler-written outcome terminal"],
  ["sections-0-4", "A child task naming another conversation than its owner's rejects"],
  ["sections-5-9", "Compaction summaries are head writes ordered by cut position"],
];

const SESSION22B = [
  ["sections-5-9", "Table: input, idle, empty inbox"],
  ["sections-0-4", "reset(handoff?) admits a pi.reset write"],
  ["sections-0-4", "Terminal candidate task rejects task-document access"],
  ["sections-0-4", "Preparation/validation failures roll back before storage"],
  ["sections-5-9", "Table: run answers"],
  ["section-7", "settings.extensions as the default base"],
  ["sections-5-9", "5.5.5 waiters, idle waits, inspection, traversal"],
  ["sections-5-9", "Conversation abort withdraws queued inputs, keeps writes"],
  ["sections-5-9", "Missing / older-than-stored / failing migration"],
  ["sections-5-9", "Every runtime operation rejects after the invocation ends"],
  ["sections-0-4", "Once admitted, caller cancellation does not undo the commit"],
  ["sections-5-9", "inbox_update, usage_changed"],
  ["sections-5-9", "Compaction status added with the task"],
  ["sections-0-4", "AgentState field semantics"],
  ["sections-5-9", '"stores partials as deltas and a complete base once nothing is in flight"'],
  ["sections-5-9", '"treats a held task as live: outcomes() rejects'],
  ["sections-0-4", "Conversation creation needs explicit ownership"],
  ["sections-5-9", "pi.tool faulted/orphaned"],
  ["sections-0-4", "Session docs current-only, survive close/reopen"],
  ["sections-0-4", "EntryRecord shape"],
];

const SESSION22C = [
  ["section-7", "Resolution: extensions default = all installed"],
  ["sections-5-9", "Conversation-owned task may be background; a child may not"],
  ["sections-0-4", "DocumentSemantics: session | latest | rewindable | task"],
  ["sections-5-9", "entry absent when the tool task faulted or was orphaned"],
  ["sections-5-9", '"commits no partial for a response that turns deferred after an empty start event"'],
  ["sections-0-4", "tx.doc() stages a migration; a failing callback persists nothing"],
  ["sections-0-4", "Agent (resolved: thinkingLevel always set"],
  ["sections-5-9", "Step rule 2: closing"],
  ["sections-5-9", "Appended entry splices at the end"],
  ["sections-5-9", "Example Checkout"],
  [
    "sections-5-9",
    '"resumes once every awaited task is terminal and reads their outcomes in order (allSettled)"',
  ],
  ["sections-5-9", '"shows an abort-marked owner waiting for work in its owned conversation'],
  ["sections-5-9", "Held failed/faulted/orphaned/aborted = cancellation intent"],
  ["sections-5-9", "Overflow (isContextOverflow"],
  ["section-7", "Invalid install throws, publishes nothing"],
  ["sections-0-4", "An agent without a model fails generation durably"],
  ["section-7", "`getTask()` / `waitForTask()`"],
  ["sections-5-9", "Placement entry shape and wrapped text"],
  ["sections-5-9", "pi.live.run naming the task: partial"],
  ["sections-5-9", "One publication touching the conversation = one batch"],
];

const SESSION22D = [
  ["sections-5-9", "Manual compaction aborted by Conversation.abort"],
  ["sections-5-9", "A terminating or handoff round uses final behaviour"],
  ["sections-0-4", "The owner may be created earlier in the same tx"],
  ["sections-0-4", "Only typed tx.doc() is get-or-create"],
  ["sections-5-9", "Head write stale rules"],
  ["sections-5-9", "[7.3] output() throws after the call ends"],
  ["section-7", "Snapshot is an immutable value"],
  ["section-7", "Replaced extension keeps its install position"],
  ["sections-0-4", "Migration callbacks never receive a live revision"],
  ["sections-5-9", '"faults an abort handler that tries to wait"'],
  ["sections-0-4", "Tx API (conversation, entry, task"],
  ["sections-5-9", "At final: current inputs settle first"],
  ["sections-0-4", "Storage failure: poison the session, publish nothing"],
  ["sections-5-9", "Table: boundary places a write"],
  ["sections-5-9", '"stops a cascade at an unmarked background task'],
  ["section-7", "Task names unique across built-ins"],
  ["sections-5-9", "Table: run fails / task aborts"],
  ["sections-0-4", "TaskInspection states"],
  ["sections-5-9", "waitForTask waits regardless of the background flag"],
  ["sections-5-9", "pending is never returned by tasks"],
];

const SESSION22E = [
  ["sections-5-9", '"keeps running phases after spawning and waits on subsets in sequence"'],
  ["sections-0-4", 'EntryDraft head may be "self"'],
  ["sections-5-9", "Every response becomes a pi.assistant entry"],
  ["sections-5-9", "TaskOptions: ownership required"],
  ["section-7", "Tool names / section keys unique within one extension"],
  ["sections-5-9", '"keeps positional system messages and orders tool results by call order"'],
  ["sections-0-4", "resume() idempotent, only enables scheduling"],
  ["sections-5-9", '"keeps run control with a faulted generation until its owned work drains'],
  ["section-7", "Section key regex; `instructions` reserved"],
  ["sections-5-9", "Admission internal; boundaries place queued submissions"],
  ["sections-5-9", "stop() idempotent, unregisters"],
  ["sections-5-9", "[12] A queued summary's user message is stamped"],
  ["sections-10-11", "The Session owns the mutation line"],
  ["sections-0-4", "Settings are synchronous"],
  ["sections-5-9", '"never migrates a held outcome'],
  ["sections-5-9", '"fails with no_model when no model is configured or the model is unknown"'],
  ["sections-5-9", '"rejects the wait that closes a cycle through a held owner"'],
  ["sections-5-9", "Intent"],
  ["section-7", "A throwing section keeps its shown text"],
  ["sections-5-9", "Abort handler: cancelDeferred in poll"],
];

const SESSION22F = [
  ["sections-5-9", '"fails the Harness on a failed finalization, which reopening applies"'],
  ["section-7", "`createTask(task, input, { ownership, background? })`"],
  ["sections-5-9", "TaskState pending/running/waiting/completing/terminal"],
  ["section-7", "Async render and env in PromptInput"],
  ["sections-0-4", "A changed settings getter takes effect at the next resolution"],
  ["sections-5-9", "Conversation.waitForIdle / Harness idle by traversal"],
  ["section-7", "A task asks only hooks of extensions its conversation selects"],
  ["sections-0-4", "fork asOf / current / initial"],
  ["sections-0-4", "Handles reacquired after reopen"],
  ["sections-5-9", "tool_execution_update carries the slot's current details"],
  ["sections-5-9", "Three kinds: pi.generation, pi.tool, pi.compaction"],
  ["section-7", "`models`: `HarnessOptions.models`"],
  ["section-7", "No change"],
  ["sections-5-9", "Document creation/retirement sets/deletes the docs key"],
  ["sections-5-9", "Submission.abort: only queued"],
  ["sections-5-9", "retry sleeps until `until`"],
  ["sections-0-4", "Generation and compaction summarization pass it as options.sessionId"],
  ["sections-0-4", "configure replaces whole fields"],
  ["section-7", "Per-conversation selection through pi.agent `extensions`"],
  ["sections-0-4", "fork() requires a visible entry and explicit ownership"],
];

const SESSION22G = [
  ["sections-5-9", "Returning from one phase does not end an invocation"],
  ["sections-5-9", "Memos survive checkpoints, vanish at terminal"],
  ["sections-5-9", "Conversations stay usable after their owner finished"],
  ["sections-5-9", "runtime.getTask / waitForTask / outcomes(ids)"],
  ["sections-5-9", '"keeps background work through Conversation.abort()'],
  ["sections-5-9", "abortTask settles orphaned in the marking commit"],
  ["sections-5-9", "failFast: the others are marked in the next reconcile commit"],
  ["sections-0-4", "abortTask returns marked after the join"],
  ["sections-0-4", "abortTask does not await terminal"],
  ["sections-5-9", '"marks failFast siblings a crash left unmarked"'],
  ["sections-0-4", "Conversation.abort withdraws queued inputs, marks ordinary traversal"],
  ["sections-5-9", "Cascade marks derived in a later reconcile commit"],
  ["sections-5-9", "RunningTask = record in running state"],
  ["sections-5-9", "execute reached only by recovery"],
  ["sections-5-9", "Above contextWindow - reserveTokens"],
  ["sections-5-9", '"marks a held completed task with Conversation.abort()'],
  ["sections-5-9", '"reports a failed deferred cancellation and still ends the run aborted"'],
  ["sections-0-4", "forkConversation validates a visible entry"],
  ["sections-5-9", "Before classifying: stop the partial throttle"],
  ["sections-5-9", "The next generation after a head marker without later pi.system"],
];

// Session 23's draw (sample-session23.md, seed 20261214), after the second reading of every line above.
const SESSION23 = [
  ["sections-5-9", "compaction_start/compaction_end; the queued summary"],
  ["sections-5-9", "A reopened Session resumes from durable checkpoints"],
  ["sections-5-9", "start() installs the sole listener, never inline"],
  ["sections-5-9", "GenerationCheckpoint phases prepare/request/retry/poll/tools"],
  ["sections-5-9", '"emits one turn_end per generation, also for a stream attached while it holds"'],
  ["sections-5-9", "tool_execution_update output replacements"],
  ["section-7", "`details()`: replaces (no merge)"],
  ["sections-0-4", "No install check; uninstalled names skipped"],
  ["sections-0-4", "Creation and version transitions write a base"],
  ["section-7", "Head rebaseline with ContextEdit omissions"],
  ["sections-5-9", "Abort flows down; background is a boundary"],
  ["sections-0-4", "Open migrates only built-in docs recovery touches"],
  ["sections-10-11", "Live task transitions replace one row"],
  ["sections-5-9", "Attachment snapshot includes every commit before attach"],
  ["sections-5-9", "At most one mount per conversation"],
  ["section-7", "Hook signatures `(input, api, ctx)`"],
  ["sections-0-4", "ModelRef {provider, modelId}; UserInput"],
  ["sections-0-4", "CompactionPolicy {enabled, reserveTokens"],
  ["sections-5-9", "beforeRequest replaces messages for this request only"],
  ["sections-5-9", "CompactionReason, CompactionInput, SummaryRequest"],
  // seed 20261215
  ["sections-0-4", "Preparation resolves the agent once per request"],
  ["sections-5-9", "The run's inputs live in pi.live.run"],
  ["sections-5-9", '"owns its tool tasks, waits for them, and hands the run'],
  ["section-7", "afterTools: all observers"],
  ["sections-0-4", "Existing owner edges stay valid after owners finish"],
  ["sections-5-9", "run present exactly while busy"],
  ["sections-5-9", "A watch bound to one incarnation closes"],
  ["section-7", "Resolution: sections same-key in place"],
  ["sections-0-4", "Settings defaults"],
  ["sections-5-9", "A fork starts pi.usage at zero"],
  ["sections-5-9", '"resumes a bottom-up abort a crash interrupted before the cascade"'],
  ["sections-0-4", "A fork tx may not also write a parent's"],
  ["sections-0-4", "Task-scoped tx.doc()"],
  ["sections-5-9", '"keeps a waiting task blocked without its definition'],
  ["sections-5-9", "Publication touching nothing mounted"],
  ["sections-5-9", '"resolves settings over the built-in defaults"'],
  ["sections-0-4", "Every new / task-owned / raw-created / forked conversation gets its own id"],
  ["sections-0-4", "AgentState fields model, thinkingLevel"],
  ["sections-0-4", "Ordinary definitions not registered"],
  ["sections-5-9", "message_start at the first committed partial"],
  // seed 20261216
  ["sections-5-9", "A reset at a final boundary follows the answer"],
  ["sections-0-4", "SubmissionRecord statuses per type"],
  ["sections-5-9", "summarize: serialization [User]/[Assistant]"],
  ["sections-5-9", "retry sleeps, then summarize with the same pinned request"],
  ["section-7", "Publication synchronous; reinstall replaces in place"],
  ["sections-0-4", "States running / completing / waiting / ready{migrates} / blocked"],
  ["sections-5-9", '"rejects the wait that closes a cycle"'],
  ["sections-0-4", "Operations queued at the seal"],
  ["sections-0-4", "AgentChange objects are handles for names"],
  ["sections-5-9", "toolUse with calls starts a round and waits"],
  ["sections-0-4", "Unaccessed or definition-less docs keep their stored instances"],
  ["sections-0-4", "Entry ids are session-global and ordered"],
  ["section-7", "`registry`: the tool task's phase snapshot"],
  ["sections-5-9", '"returns the whole transcript without a head'],
  ["sections-5-9", "Abort handler removes the status, aborted, no entry"],
  ["sections-5-9", "On open: running"],
  ["sections-5-9", "Unanswered reasons no_model, model_error"],
  ["sections-5-9", "Abort handler after the tools are terminal"],
  ["sections-5-9", "pi.live definition: conversation scope"],
  ["sections-5-9", "No free-standing dependencies"],
];

const words = (s) => new Set(s.toLowerCase().match(/[a-z0-9.]+/g) ?? []);
function jaccard(a, b) {
  let shared = 0;
  for (const w of a) if (b.has(w)) shared++;
  return shared / (a.size + b.size - shared || 1);
}

const population = [];
for (const [list, style] of Object.entries(LISTS))
  for (const rule of rules(read(list)))
    if (asserted(rule, style)) population.push({ list, line: rule.line, text: rule.text, head: head(rule) });

const excluded = new Map();
for (const [why, lines] of [
  ["session 19", SESSION19],
  ["session 20", SESSION20],
  ["session 20b", SESSION20B],
  ["session 20c", SESSION20C],
  ["session 22", SESSION22],
  ["session 22b", SESSION22B],
  ["session 22c", SESSION22C],
  ["session 22d", SESSION22D],
  ["session 22e", SESSION22E],
  ["session 22f", SESSION22F],
  ["session 22g", SESSION22G],
  ["session 23", SESSION23],
])
  for (const [list, start] of lines) {
    const hits = population.filter((p) => p.list === list && p.head.startsWith(start));
    if (hits.length !== 1) throw new Error(`${why}: ${hits.length} lines start with ${start}`);
    excluded.set(hits[0], why);
  }
const session10 = read("sample-session10")
  .split("\n")
  .filter((l) => /^\| \d+ /.test(l))
  .map((l) => l.split(" | ").map((cell) => cell.trim()));
for (const [, , , rule = "", , tests = ""] of session10) {
  const names = [...tests.matchAll(/"([^"]{12,}?)"/g)].map((m) => m[1].slice(0, 40));
  let best;
  let score = 0;
  for (const p of population) {
    if (!p.list.startsWith("sections-") || !names.some((n) => p.text.includes(n))) continue;
    const s = jaccard(words(rule), words(p.head));
    if (s > score) [best, score] = [p, s];
  }
  if (best && score >= 0.25 && !excluded.has(best)) excluded.set(best, "session 10");
}

const seed = Number(process.argv[2] ?? 20261205);
const count = Number(process.argv[3] ?? 30);
let state = seed >>> 0;
/** mulberry32: a small seeded generator of floats in [0, 1). */
function random() {
  state = (state + 0x6d2b79f5) >>> 0;
  let t = state;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}
const drawAll = Boolean(process.env.ALL);
const rest = drawAll ? [...population] : population.filter((p) => !excluded.has(p));
for (let i = rest.length - 1; i > 0; i--) {
  const j = Math.floor(random() * (i + 1));
  [rest[i], rest[j]] = [rest[j], rest[i]];
}
const by = (why) => [...excluded.values()].filter((v) => v === why).length;
if (drawAll) console.log(`population ${population.length}; none left out; drawn ${count} with seed ${seed}`);
else
  console.log(
    `population ${population.length}; left out ${excluded.size} (session 19: ${by("session 19")}, session 20: ${by("session 20")}, session 20b: ${by("session 20b")}, session 20c: ${by("session 20c")}, session 22: ${by("session 22")}, session 22b: ${by("session 22b")}, session 22c: ${by("session 22c")}, session 22d: ${by("session 22d")}, session 22e: ${by("session 22e")}, session 22f: ${by("session 22f")}, session 22g: ${by("session 22g")}, session 23: ${by("session 23")}, session 10: ${by("session 10")}); drawn ${count} of ${rest.length} with seed ${seed}`,
  );
rest.slice(0, count).forEach((p, i) => {
  const earlier = drawAll && excluded.has(p) ? `\t(drawn before: ${excluded.get(p)})` : "";
  console.log(`${i + 1}\t${p.list}:${p.line}\t${p.head.slice(0, 130)}${earlier}`);
});
if (process.env.EXCLUDED)
  for (const [p, why] of excluded)
    console.log(`left out (${why})\t${p.list}:${p.line}\t${p.head.slice(0, 100)}`);
