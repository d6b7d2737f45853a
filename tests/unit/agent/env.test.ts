/**
 * The per-conversation environment (spec §2.2 `HarnessOptions.env`, §7.3, §7.4): `AgentHarness.open`
 * takes an `env` builder, called at each use and never inside a commit: once per tool execution
 * (`api.env`, what the built-in file tools use; a throw is the call's ordinary error result; a rerun
 * after recovery builds it again) and once per preparation that renders sections (`input.env`; a
 * throw is reported and the sections render with none). Without a builder there is no environment,
 * whatever workspace (`fs`) the harness holds; `workspaceEnv(fs)` gives every conversation that one.
 */
import { fauxAssistantMessage, fauxToolCall } from "@mariozechner/pi-ai";
import { Type } from "typebox";
import { expect, test } from "vitest";
import {
  builtinToolsExtension,
  createRegistry,
  defineExtension,
  defineTool,
  type EnvBuilder,
  type EnvTarget,
  MemoryFs,
  section,
  textResult,
  type WorkspaceFs,
  workspaceEnv,
} from "../../../worker/index.ts";
import { deferred, fauxError } from "../../../worker/testing.ts";
import { callsThenAnswer, diagnosticsOf, messageOf, open, reopen, textOf, toolResults } from "./fixtures.ts";

/** A section that says whether the environment's workspace holds notes.md. */
const notesSection = defineExtension({
  name: "notes",
  sections: [
    section("notes", async ({ env }) =>
      env ? ((await env.fs.exists("notes.md")) ? await env.fs.read("notes.md") : "none") : "no env",
    ),
  ],
});

function registry() {
  const extensions = createRegistry();
  extensions.install(builtinToolsExtension);
  extensions.install(notesSection);
  return extensions;
}

const resultText = async (c: Parameters<typeof toolResults>[0]) =>
  (await toolResults(c)).map((e) => textOf(messageOf(e)));

test("a builder gives each conversation its own workspace: the file tools and the sections reach it", async () => {
  const workspace = new MemoryFs();
  const own = new Map<number, MemoryFs>();
  const asked: EnvTarget[] = [];
  const env: EnvBuilder = async (target) => {
    asked.push(target);
    if (!own.has(target.conversationId)) own.set(target.conversationId, new MemoryFs());
    return { fs: own.get(target.conversationId)! };
  };
  const write = fauxToolCall("write", { path: "notes.md", content: "mine" }, { id: "w1" });
  const { h, root, faux } = await open(callsThenAnswer(write), {
    extensions: registry(),
    fs: workspace,
    env,
  });
  const other = await h.createConversation({ ownership: { kind: "ownerless" } });
  await (await root.submit({ type: "input", content: "write" })).wait();
  await own.get(root.id)!.write("notes.md", "root's notes");
  await (await root.submit({ type: "input", content: "again" })).wait();
  await (await other.submit({ type: "input", content: "hello" })).wait();
  expect(await own.get(root.id)!.read("notes.md")).toBe("root's notes");
  expect(await own.get(other.id)!.read("notes.md")).toBe("mine");
  expect(await workspace.exists("notes.md")).toBe(false);
  // Each preparation rendered with its conversation's environment.
  expect(faux.requests.map((r) => r.systemPrompt)).toContain("<notes>\nroot's notes\n</notes>");
  expect(faux.requests[0]!.systemPrompt).toBe("<notes>\nnone\n</notes>");
  // The builder read the asking conversation's committed documents.
  expect(asked.every((t) => t.read("pi.agent") !== undefined)).toBe(true);
  expect(new Set(asked.map((t) => t.conversationId))).toEqual(new Set([root.id, other.id]));
});

test("a builder that throws: the call's result is an ordinary error, the preparation reports it and renders with none", async () => {
  const reported: string[] = [];
  const env: EnvBuilder = () => {
    throw new Error("no environment today");
  };
  const ls = fauxToolCall("ls", {}, { id: "l1" });
  const { h, root, faux } = await open(callsThenAnswer(ls), {
    extensions: registry(),
    env,
    onReport: (e) => void reported.push((e as Error).message),
  });
  expect(await (await root.submit({ type: "input", content: "list" })).wait()).toMatchObject({
    status: "done",
  });
  const [result] = await resultText(root);
  expect(result).toMatch(/^Error: no environment today/);
  // Draw 34C: a throw from the builder is one from execute (spec §8.4): a tool_error, and the call's
  // task failed with its result entry (a builder's throw settled completed, without the code, passed).
  const [entry] = await toolResults(root);
  expect(diagnosticsOf(entry!).map((d) => [d.severity, d.code])).toEqual([["error", "tool_error"]]);
  const [task] = await h.tasks({ kind: "pi.tool" });
  expect(task!.state).toMatchObject({
    status: "terminal",
    outcome: { status: "failed", result: { entryId: entry!.id } },
  });
  expect(faux.requests[0]!.systemPrompt).toBe("<notes>\nno env\n</notes>");
  expect(reported).toContain("no environment today");
});

test("a builder that gives no environment: a file tool's call is an ordinary error naming it", async () => {
  const ls = fauxToolCall("ls", {}, { id: "l1" });
  const { root, faux } = await open(callsThenAnswer(ls), { extensions: registry(), env: () => undefined });
  expect(await (await root.submit({ type: "input", content: "list" })).wait()).toMatchObject({
    status: "done",
  });
  const [result] = await resultText(root);
  expect(result).toMatch(/^Error: this conversation has no environment: no workspace to reach/);
  // The sections too render with none (reading 23b).
  expect(faux.requests[0]!.systemPrompt).toBe("<notes>\nno env\n</notes>");
});

test("without an env option there is no environment, even with a workspace given: a file tool's call is an ordinary error, the sections render with none; the workspace builder gives it back", async () => {
  const workspace = new MemoryFs();
  await workspace.write("notes.md", "in the workspace");
  const ls = fauxToolCall("ls", {}, { id: "l1" });
  const bare = await open(callsThenAnswer(ls), { extensions: registry(), fs: workspace });
  expect(await (await bare.root.submit({ type: "input", content: "list" })).wait()).toMatchObject({
    status: "done",
  });
  expect((await resultText(bare.root))[0]).toMatch(/^Error: this conversation has no environment/);
  expect(bare.faux.requests[0]!.systemPrompt).toBe("<notes>\nno env\n</notes>");
  // The app passes its workspace explicitly (app-harness.ts): every conversation then reaches it.
  const given = await open(callsThenAnswer(fauxToolCall("ls", {}, { id: "l2" })), {
    extensions: registry(),
    fs: workspace,
    env: workspaceEnv(workspace),
  });
  await (await given.root.submit({ type: "input", content: "list" })).wait();
  expect((await resultText(given.root))[0]).toContain("notes.md");
  expect(given.faux.requests[0]!.systemPrompt).toBe("<notes>\nin the workspace\n</notes>");
});

test("without an env option a nested call has no environment either: a file tool a tool calls through api.executeTool gets the ordinary error, and the caller's api has no env and no workspace", async () => {
  // Sweep 42, 32: every test above reached the environment through a call the model made; a nested
  // call (its own tool task, owned by the calling one) given the harness's workspace when there is
  // no env option passed them all.
  const workspace = new MemoryFs();
  await workspace.write("notes.md", "in the workspace");
  const seen: string[] = [];
  const wrap = defineTool({
    name: "wrap",
    description: "lists the workspace through ls",
    parameters: Type.Object({}),
    replay: "safe",
    async execute(_args, api) {
      seen.push(api.env === undefined ? "no env" : "an env");
      // Nor the harness's workspace beside it (sweep 42: the api carried it as `fs`).
      seen.push("fs" in api ? "a workspace" : "no workspace");
      const inner = await api.executeTool("ls", {});
      const text = inner.content.map((c) => (c.type === "text" ? c.text : "")).join("");
      return textResult(`${inner.isError ? "error" : "ok"}: ${text}`);
    },
  });
  const extensions = registry();
  extensions.install(defineExtension({ name: "wrapper", tools: [wrap] }));
  const { root } = await open(callsThenAnswer(fauxToolCall("wrap", {}, { id: "w1" })), {
    extensions,
    fs: workspace,
  });
  expect(await (await root.submit({ type: "input", content: "list" })).wait()).toMatchObject({
    status: "done",
  });
  expect(seen).toEqual(["no env", "no workspace"]);
  const [result] = await resultText(root);
  expect(result).toMatch(/^error: .*this conversation has no environment/s);
  expect(result).not.toContain("notes.md");
});

test("a rerun after recovery builds the environment again", async () => {
  const started = deferred();
  const seen: WorkspaceFs[] = [];
  const probe = defineTool({
    name: "probe",
    description: "reads the environment",
    parameters: Type.Object({}),
    replay: "safe",
    async execute(_args, api) {
      seen.push(api.env!.fs);
      if (seen.length === 1) {
        started.resolve();
        await new Promise((_, reject) =>
          api.signal.addEventListener("abort", () => reject(api.signal.reason), { once: true }),
        );
      }
      return textResult("probed");
    },
  });
  const before = new MemoryFs();
  const after = new MemoryFs();
  const call = callsThenAnswer(fauxToolCall("probe", {}, { id: "p1" }));
  const first = await open(call, { tools: [probe], env: () => ({ fs: before }) });
  await first.root.submit({ type: "input", content: "probe" });
  await started.promise;
  const again = await reopen(first.store, {
    tools: [probe],
    env: () => ({ fs: after }),
    models: first.h.services.models,
    defaultModel: first.h.services.defaultModel!,
  });
  await again.waitForIdle();
  expect(seen).toHaveLength(2);
  expect(seen[0]).toBe(before);
  expect(seen[1]).toBe(after);
  expect(await resultText(await again.root())).toEqual(["probed"]);
});

test("the builder is called at each use, off the commit line: once per preparation and once per tool execution, never cached", async () => {
  const fs = new MemoryFs();
  let calls = 0;
  let h: Awaited<ReturnType<typeof open>>["h"] | undefined;
  const env: EnvBuilder = async () => {
    calls++;
    // Off the line: a builder may wait for a commit (on the line this would never return).
    await h?.transaction(() => undefined);
    return { fs };
  };
  const ls = (id: string) => fauxToolCall("ls", {}, { id });
  const opened = await open(callsThenAnswer(ls("l1"), ls("l2")), { extensions: registry(), env });
  h = opened.h;
  await (await opened.root.submit({ type: "input", content: "list twice" })).wait();
  // Two preparations (the calls' request and the answer's) and two executions.
  expect(opened.faux.requests).toHaveLength(2);
  expect(calls).toBe(4);
  // The next input is answered at once: one more preparation, one more build.
  await (await opened.root.submit({ type: "input", content: "again" })).wait();
  expect(opened.faux.requests).toHaveLength(3);
  expect(calls).toBe(5);
});

test("a retried request's preparation builds the environment again: each attempt is a use", async () => {
  // Draw 36eA: every per-use test counted preparations of distinct requests; a preparation that
  // kept the environment built for its task's earlier attempt (a retry after a 503) passed them.
  let calls = 0;
  const env: EnvBuilder = () => {
    calls++;
    return { fs: new MemoryFs() };
  };
  let requests = 0;
  const { root, faux } = await open(
    () => (++requests === 1 ? fauxError("503 Service Unavailable") : fauxAssistantMessage("ok")),
    { extensions: registry(), env, settings: { retry: { baseDelayMs: 1, maxDelayMs: 5 } } },
  );
  expect((await (await root.submit({ type: "input", content: "go" })).wait()).status).toBe("done");
  expect(faux.requests).toHaveLength(2);
  expect(calls).toBe(2);
});

test("the builder's target reads the asking conversation's committed documents as they are at that use: a document written between two uses is seen by the second, another conversation's by neither", async () => {
  // Break 31B: a reader that kept the first value it read per conversation and document passed every
  // test above (they read pi.agent once, never a document that changes).
  const images: Array<{ c: number; image: unknown }> = [];
  const env: EnvBuilder = (target) => {
    images.push({ c: target.conversationId, image: target.read("app.container") });
    return { fs: new MemoryFs() };
  };
  const { h, root } = await open(callsThenAnswer(), { extensions: registry(), env });
  const other = await h.createConversation({ ownership: { kind: "ownerless" } });
  const setImage = (image: string) => h.transaction((tx) => tx.writeDoc(root.id, "app.container", { image }));
  await setImage("node:20");
  await (await root.submit({ type: "input", content: "one" })).wait();
  await setImage("node:22");
  await (await root.submit({ type: "input", content: "two" })).wait();
  await (await other.submit({ type: "input", content: "three" })).wait();
  expect(images).toEqual([
    { c: root.id, image: { image: "node:20" } },
    { c: root.id, image: { image: "node:22" } },
    { c: other.id, image: undefined },
  ]);
});

test("a call's environment is built right before it executes: after its intent commit, and never for a blocked call", async () => {
  // Spec §8.4: "it builds api.env with HarnessOptions.env right before executing"; "a block commits
  // the corresponding error result instead, without intent". (Reading 23d: only counted, never placed.)
  const fs = new MemoryFs();
  let h: Awaited<ReturnType<typeof open>>["h"] | undefined;
  // At each build: the round's slots as committed (none while preparing).
  const builds: unknown[] = [];
  const env: EnvBuilder = () => {
    const slots = (h?.docNow(1, "pi.live") as { tools?: { callId: string; status: string }[] } | undefined)
      ?.tools;
    builds.push(slots?.map((s) => `${s.callId} ${s.status}`) ?? "preparing");
    return { fs };
  };
  const ls = (id: string) => fauxToolCall("ls", {}, { id });
  let asked = 0;
  const opened = await open(callsThenAnswer(ls("l1"), ls("l2")), {
    extensions: registry(),
    env,
    settings: { toolExecution: "sequential" },
    // The second call asked about (l2: the round is sequential) is blocked.
    hooks: { beforeTool: [() => (++asked === 2 ? { block: "not this one" } : undefined)] },
  });
  h = opened.h;
  await (await opened.root.submit({ type: "input", content: "list twice" })).wait();
  const codes = (await toolResults(opened.root)).map((e) =>
    (e.data as { diagnostics: { code?: string }[] }).diagnostics.map((d) => d.code),
  );
  expect(codes).toEqual([[], ["blocked"]]);
  // Two preparations and one execution, l1's, whose slot its intent commit had set running.
  expect(builds).toEqual(["preparing", ["l1 running", "l2 pending"], "preparing"]);
});

test("without an env option a synchronous section, rendered inside the preparation, sees no environment either, also in a request prepared by the creating commit", async () => {
  const workspace = new MemoryFs();
  await workspace.write("notes.md", "in the workspace");
  const extensions = createRegistry();
  extensions.install(
    defineExtension({
      name: "sync-notes",
      sections: [section("notes", ({ env }) => (env ? "an env" : "no env"))],
    }),
  );
  const { root, faux } = await open(callsThenAnswer(), { extensions, fs: workspace });
  // The second input finds the transcript cached: its request is prepared in the creating commit.
  await (await root.submit({ type: "input", content: "hello" })).wait();
  await (await root.submit({ type: "input", content: "again" })).wait();
  expect(faux.requests.map((r) => r.systemPrompt)).toEqual([
    "<notes>\nno env\n</notes>",
    "<notes>\nno env\n</notes>",
  ]);
});

test("the builder's context carries the use's signal: aborting the conversation while a tool execution's build or a preparation's build waits aborts that build", async () => {
  // Draw 32A: no test read the builder's second argument, so a builder handed a signal of its own
  // (never aborted) passed every test above. The second build (the call's execution) and the fourth
  // (the next input's preparation) wait for their signal; a short fallback, reached only when the
  // signal never fires, keeps a broken engine from hanging the test.
  const seen: Array<{ build: number; aborted: boolean }> = [];
  const waiting = new Map([
    [2, deferred()],
    [4, deferred()],
  ]);
  let builds = 0;
  const env: EnvBuilder = async (_target, { signal }) => {
    const build = ++builds;
    const wait = waiting.get(build);
    if (wait) {
      wait.resolve();
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, 300);
        const onAbort = () => {
          clearTimeout(timer);
          resolve();
        };
        signal.addEventListener("abort", onAbort, { once: true });
      });
      seen.push({ build, aborted: signal.aborted });
    }
    return { fs: new MemoryFs() };
  };
  const ls = fauxToolCall("ls", {}, { id: "l1" });
  const { root, faux } = await open(callsThenAnswer(ls), { extensions: registry(), env });
  // Build 1 prepares the call's request; build 2, the call's execution, waits.
  const first = await root.submit({ type: "input", content: "list" });
  await waiting.get(2)!.promise;
  expect(faux.requests).toHaveLength(1);
  await root.abort();
  expect((await first.wait()).status).toBe("unanswered");
  expect(await toolResults(root)).toHaveLength(1);
  // A run after the abort: build 3 prepares it (a reference pass), build 4 is the next input's.
  await (await root.submit({ type: "input", content: "between" })).wait();
  const second = await root.submit({ type: "input", content: "again" });
  await waiting.get(4)!.promise;
  await root.abort();
  expect((await second.wait()).status).toBe("unanswered");
  expect(seen).toEqual([
    { build: 2, aborted: true },
    { build: 4, aborted: true },
  ]);
});
