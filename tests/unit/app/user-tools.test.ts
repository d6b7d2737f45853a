/**
 * User tools (issue 14 item 6): a tool written in JavaScript from the settings is checked in the
 * sandbox and stored in the store's settings conversation, installed as its own extension
 * (`user:<name>`), hot-reloaded on each save (a running call finishes on the old code), selected or
 * dropped per conversation through pi.agent `extensions`; the demo model calls one through
 * `codemode`. Export and import: `user-tools-import.test.ts`.
 */
import { fauxAssistantMessage, fauxToolCall } from "@mariozechner/pi-ai";
import { Type } from "typebox";
import { describe, expect, test, vi } from "vitest";
import { createRegistry, type ExtensionRegistry } from "../../../worker/agent/extensions/registry.ts";
import { AgentHarness } from "../../../worker/agent/harness.ts";
import { SETTINGS_CONVERSATION } from "../../../worker/agent/models/keys.ts";
import { toPiTool } from "../../../worker/agent/tools/contract.ts";
import { planDemoReply, useToolScript } from "../../../worker/app/demo-model.ts";
import {
  conversationExtensions,
  saveUserToolDraft,
  setExtensionEnabled,
} from "../../../worker/app/extensions.ts";
import {
  removeUserTool,
  saveUserTool,
  storedUserTools,
  USER_TOOLS_DOC,
  userToolStatuses,
} from "../../../worker/app/user-tools/store.ts";
import { UserToolInvalid, userToolExtension } from "../../../worker/app/user-tools/tool.ts";
import { DEFAULT_SANDBOX_LIMITS, defineExtension, defineTool, textResult } from "../../../worker/index.ts";
import { setScriptWorkers } from "../../../worker/sandbox/workers.ts";
import {
  deferred,
  type FauxResponder,
  fauxAgentModel,
  memoryStore,
  nodeScriptWorkers,
} from "../../../worker/testing.ts";
import { appEngines, ask, GREET } from "./user-tools-fixtures.ts";

const { openApp, closeLater } = appEngines();

const userExtensions = (registry: ExtensionRegistry) =>
  registry
    .snapshot()
    .installed()
    .map((e) => e.name)
    .filter((n) => n.startsWith("user:"));

describe("saving a user tool", () => {
  test("a saved tool is stored as version 1, installed as user:greet, and the demo model calls it through codemode", async () => {
    const { h, extensions } = await openApp();
    const saved = await saveUserTool(h, GREET);
    expect(saved).toMatchObject({ name: "greet", version: 1, activeVersion: 1, body: GREET.body });
    expect(storedUserTools(h).map((t) => t.name)).toEqual(["greet"]);
    expect(userExtensions(extensions)).toEqual(["user:greet"]);
    // Installed as saved: its description and JSON-schema parameters are what the model is told (break 30I).
    expect(extensions.snapshot().extension("user:greet")?.tools).toMatchObject([
      { name: "greet", description: GREET.description, parameters: GREET.parameters },
    ]);
    const root = await h.root();
    const answer = await ask(h, root.id, 'use my tool greet with {"name":"Ada"}');
    expect(answer).toContain("My script ran");
    expect(answer).toContain("greet answered: Hello, Ada!");
    // The nested call of greet ran as its own tool task under the codemode call.
    const nested = (await h.tasks({ kind: "pi.tool" })).filter((t) =>
      JSON.stringify(t.input).includes('"greet"'),
    );
    expect(nested.length).toBeGreaterThanOrEqual(1);
  });

  test("the stored tools are installed again when the store is opened again", async () => {
    const first = await openApp();
    await saveUserTool(first.h, GREET);
    await saveUserTool(first.h, { ...GREET, body: 'async (args) => "Hi " + args.name' });
    // The store as it is now, opened by another engine (a reload).
    const again = await openApp({ store: await memoryStore(first.store.image()) });
    expect(userToolStatuses(again.h)).toMatchObject([{ name: "greet", version: 2, activeVersion: 2 }]);
    expect(await ask(again.h, (await again.h.root()).id, 'use my tool greet with {"name":"Bo"}')).toContain(
      "greet answered: Hi Bo",
    );
  });

  const refused: Array<[string, Record<string, unknown>, string, RegExp]> = [
    [
      "a syntax error",
      { body: "async (args) => {" },
      "invalid_body",
      /does not compile to a function: SyntaxError/,
    ],
    ["a body that is not a function", { body: "42" }, "invalid_body", /must be a function/],
    ["two statements", { body: "async () => 1; globalThis.x = 1" }, "invalid_body", /SyntaxError/],
    [
      "a body that runs forever when defined",
      { body: "(() => { while (true) {} })()" },
      "invalid_body",
      /does not compile to a function: .*(time|slice)/i,
    ],
    [
      "a schema that is not an object schema",
      { parameters: { type: "string" } },
      "invalid_schema",
      /"type": "object"/,
    ],
    [
      "a required property the schema lacks",
      { parameters: { type: "object", properties: {}, required: ["name"] } },
      "invalid_schema",
      /required property "name"/,
    ],
    [
      "a property of an unknown type",
      { parameters: { type: "object", properties: { n: { type: "float" } } } },
      "invalid_schema",
      /unknown type "float"/,
    ],
    // Draw 39e D: a schema whose property is not an object schema, and a required that is not a
    // list, were stored by an engine that skipped either check (every schema row above was caught
    // by another check).
    [
      "a property whose schema is not an object",
      { parameters: { type: "object", properties: { n: "string" } } },
      "invalid_schema",
      /schema of property "n" must be an object/,
    ],
    [
      "a required that is not a list of names",
      { parameters: { type: "object", properties: { n: { type: "string" } }, required: "n" } },
      "invalid_schema",
      /"required" must be a list of property names/,
    ],
    [
      "the name of a built-in tool",
      { name: "ls" },
      "name_taken",
      /a tool named ls already exists \(from workspace-tools\)/,
    ],
    ["the codemode tool's name", { name: "codemode" }, "name_taken", /codemode already exists/],
    ["a name scripts cannot call", { name: "my tool" }, "invalid_name", /letters, digits or _/],
    ["no description", { description: " " }, "invalid_description", /needs a description/],
  ];
  test.each(refused)(
    "%s is refused with a clear error and nothing is stored",
    async (_, change, code, message) => {
      const { h, extensions } = await openApp();
      const error = await saveUserTool(h, { ...GREET, ...change }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(UserToolInvalid);
      expect((error as UserToolInvalid).code).toBe(code);
      expect((error as Error).message).toMatch(message);
      expect(h.docNow(SETTINGS_CONVERSATION, USER_TOOLS_DOC)).toBeUndefined();
      expect(userExtensions(extensions)).toEqual([]);
    },
  );

  test("parameters that are not JSON text are refused like a bad schema", async () => {
    const { h } = await openApp();
    const error = await saveUserToolDraft(h, { ...GREET, parameters: "{ type: object" }).catch(
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(UserToolInvalid);
    expect((error as Error).message).toMatch(/the parameters are not JSON/);
    expect(storedUserTools(h)).toEqual([]);
  });

  test("a refused edit leaves the stored version and the running one as they were", async () => {
    const { h } = await openApp();
    await saveUserTool(h, GREET);
    await expect(saveUserTool(h, { ...GREET, body: "async (" })).rejects.toThrow(UserToolInvalid);
    expect(userToolStatuses(h)).toMatchObject([{ version: 1, activeVersion: 1, body: GREET.body }]);
  });

  test("an edit is checked like a first save: a stored tool whose name another extension's tool took since is refused (name_taken), its stored version kept", async () => {
    // Break 28P: every name row saves a new tool; a name check skipped for a tool already stored passed them.
    const { h, extensions } = await openApp();
    await saveUserTool(h, GREET);
    extensions.install(
      defineExtension({
        name: "greeter",
        tools: [
          defineTool({
            name: "greet",
            description: "Greets",
            parameters: Type.Object({}),
            execute: async () => textResult("hi"),
          }),
        ],
      }),
    );
    const error = await saveUserTool(h, { ...GREET, body: 'async (args) => "Hi " + args.name' }).catch(
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(UserToolInvalid);
    expect((error as UserToolInvalid).code).toBe("name_taken");
    expect((error as Error).message).toMatch(/a tool named greet already exists \(from greeter\)/);
    expect(storedUserTools(h)).toMatchObject([{ name: "greet", version: 1, body: GREET.body }]);
  });

  test("a name another extension's tool takes while the body is being checked is refused too (name_taken): nothing stored, nothing installed (draw 32c)", async () => {
    // Draw 32c: the name was checked before the body's compile (an await) and not again; every name
    // row had the name taken before the save began.
    const { h, extensions } = await openApp();
    const saving = saveUserTool(h, GREET).catch((e: unknown) => e);
    extensions.install(
      defineExtension({
        name: "greeter",
        tools: [
          defineTool({
            name: "greet",
            description: "Greets",
            parameters: Type.Object({}),
            execute: async () => textResult("hi"),
          }),
        ],
      }),
    );
    const error = await saving;
    expect(error).toBeInstanceOf(UserToolInvalid);
    expect((error as UserToolInvalid).code).toBe("name_taken");
    expect((error as Error).message).toMatch(/a tool named greet already exists \(from greeter\)/);
    expect(storedUserTools(h)).toEqual([]);
    expect(userExtensions(extensions)).toEqual([]);
  });

  test("a runaway body is stopped by the sandbox's limits and the call reports it", async () => {
    const { h } = await openApp();
    await saveUserTool(h, {
      ...GREET,
      name: "spin",
      parameters: { type: "object", properties: {} },
      body: "async () => { while (true) {} }",
    });
    const answer = await ask(h, (await h.root()).id, "use my tool spin");
    expect(answer).toMatch(/The `codemode` tool reported a problem: .*(slice|CPU)/i);
    // Stopped by codemode's own time slice, not a longer one (break 28K).
    expect(answer).toContain(`ran ${DEFAULT_SANDBOX_LIMITS.sliceMs} ms without yielding`);
  });

  test("a user tool's body runs under codemode's own output, result and call limits (DEFAULT_SANDBOX_LIMITS), not looser ones", async () => {
    const { h } = await openApp();
    const { outputBytes, calls } = DEFAULT_SANDBOX_LIMITS;
    const resultBytes = DEFAULT_SANDBOX_LIMITS.resultBytes!;
    const tools = {
      chatty: `async () => { console.log("z".repeat(${outputBytes + 1024})); return 1; }`,
      bulky: `async () => "r".repeat(${resultBytes + 1024})`,
      busy: `async (args, tools) => { for (let i = 0; i <= ${calls}; i++) await tools.ls({ path: "." }).catch(() => null); return 1; }`,
    };
    for (const [name, body] of Object.entries(tools))
      await saveUserTool(h, { ...GREET, name, parameters: { type: "object", properties: {} }, body });
    const root = (await h.root()).id;
    expect(await ask(h, root, "use my tool chatty")).toContain(
      `printed more than ${outputBytes} bytes of console output`,
    );
    expect(await ask(h, root, "use my tool bulky")).toContain(`more than its limit of ${resultBytes}`);
    expect(await ask(h, root, "use my tool busy")).toContain(`made more than ${calls} tool calls`);
  });

  test("a user tool's body runs under codemode's own memory limit (DEFAULT_SANDBOX_LIMITS), not a looser one", async () => {
    const { h } = await openApp();
    await saveUserTool(h, {
      ...GREET,
      name: "hoard",
      parameters: { type: "object", properties: {} },
      body: "async () => { const kept = []; for (let i = 0; i < 100; i++) kept.push('y'.repeat(1024 * 1024) + i); return kept.length; }",
    });
    const answer = await ask(h, (await h.root()).id, "use my tool hoard");
    expect(answer).toContain(
      `ran out of memory (limit ${DEFAULT_SANDBOX_LIMITS.memoryBytes / 1024 / 1024} MiB)`,
    );
  });

  test("a body checked at save runs under codemode's own memory limit and time slice (DEFAULT_SANDBOX_LIMITS), not looser ones (draw 39b D)", async () => {
    // Draw 39b D: what a body runs when it is defined runs at the save's check, a second sandbox run
    // besides the call's; the named tests read the limits of calls only, and the refused rows read
    // the check's stop as any time or slice, so a check under a 1 GiB memory limit or a 1 s slice passed.
    const { h } = await openApp();
    const hoard = await saveUserTool(h, {
      ...GREET,
      name: "hoard",
      body: "(() => { const kept = []; for (let i = 0; i < 100; i++) kept.push('y'.repeat(1024 * 1024) + i); return kept.length; })()",
    }).catch((e: unknown) => e);
    expect(hoard).toBeInstanceOf(UserToolInvalid);
    expect((hoard as Error).message).toContain(
      `ran out of memory (limit ${DEFAULT_SANDBOX_LIMITS.memoryBytes / 1024 / 1024} MiB)`,
    );
    const spin = await saveUserTool(h, {
      ...GREET,
      name: "spin",
      body: "(() => { while (true) {} })()",
    }).catch((e: unknown) => e);
    expect(spin).toBeInstanceOf(UserToolInvalid);
    expect((spin as Error).message).toContain(`ran ${DEFAULT_SANDBOX_LIMITS.sliceMs} ms without yielding`);
    expect(storedUserTools(h)).toEqual([]);
  });

  test("a user tool's body runs under codemode's own stack limit (DEFAULT_SANDBOX_LIMITS), not a looser one", async () => {
    // Draw 33c: the stack limit was the one sandbox limit no test read; a user tool under a 4 MiB
    // stack passed. In script workers (the browser's page engine): in the engine's own thread, the
    // host's stack can run out before the sandbox's 512 KiB (see the report of draw 33cD).
    setScriptWorkers(nodeScriptWorkers());
    try {
      const { h } = await openApp();
      await saveUserTool(h, {
        ...GREET,
        name: "deep",
        parameters: { type: "object", properties: {} },
        body: "async () => { function down(n) { return down(n + 1) + 1; } return down(0); }",
      });
      const answer = await ask(h, (await h.root()).id, "use my tool deep");
      expect(answer).toContain(
        `call stack overflowed (limit ${DEFAULT_SANDBOX_LIMITS.stackBytes / 1024} KiB)`,
      );
    } finally {
      setScriptWorkers(undefined);
    }
  });

  test("a user tool's body runs under codemode's own CPU budget (DEFAULT_SANDBOX_LIMITS), not a looser one (draw 35D)", async () => {
    // Draw 35D: the CPU budget was the one limit still unread (a test of it would run 10 s of CPU); a
    // user tool under a 60 s budget passed. The sandbox's clock is made to advance 80 ms at each
    // reading, so every short stretch between two tool calls counts as 160 ms and codemode's budget is
    // spent after about 63 calls, well before the call limit; a looser budget meets the call limit first.
    const { h } = await openApp();
    await saveUserTool(h, {
      ...GREET,
      name: "grind",
      parameters: { type: "object", properties: {} },
      body: `async (args, tools) => { for (let i = 0; i <= ${DEFAULT_SANDBOX_LIMITS.calls}; i++) await tools.ls({ path: "." }).catch(() => null); return 1; }`,
    });
    const root = (await h.root()).id;
    let fake = performance.now();
    const now = vi.spyOn(performance, "now").mockImplementation(() => (fake += 80));
    let answer: string;
    try {
      answer = await ask(h, root, "use my tool grind");
    } finally {
      now.mockRestore();
    }
    expect(answer).toContain(`used more than ${DEFAULT_SANDBOX_LIMITS.cpuMs} ms of CPU time in total`);
  });
});

/** A model that answers each user message with a call of `greet` for Ada, and anything else with "done". */
const callGreet: FauxResponder = (req, n) =>
  req.messages.at(-1)!.role === "user"
    ? fauxAssistantMessage([fauxToolCall("greet", { name: "Ada" }, { id: `call-${n}` })], {
        stopReason: "toolUse",
      })
    : fauxAssistantMessage("done");

/**
 * A harness whose user tool `greet` (version 1) calls the extension tool `gate` before it answers
 * "v1 <name>", and a run in the root whose call of it is held at the gate: `release` opens it.
 */
async function greetHeldAtGate() {
  const started = deferred();
  const release = deferred();
  const gate = defineTool({
    name: "gate",
    description: "waits for the test",
    parameters: Type.Object({}),
    replay: "safe",
    async execute() {
      started.resolve();
      await release.promise;
      return textResult("open");
    },
  });
  const extensions = createRegistry();
  extensions.install(defineExtension({ name: "test-gate", tools: [gate] }));
  const faux = fauxAgentModel(callGreet);
  closeLater(async () => faux.unregister());
  const h = await AgentHarness.open(await memoryStore(), {
    extensions,
    models: faux.models,
    defaultModel: faux.ref,
  });
  closeLater(() => h.close());
  await saveUserTool(h, {
    ...GREET,
    body: 'async (args, tools) => { await tools.gate({}); return "v1 " + args.name; }',
  });
  const root = await h.root();
  const one = await root.submit({ type: "input", content: "one" });
  await started.promise;
  return { h, root, one, release };
}

describe("hot reload", () => {
  test("an edit while a call runs: that call finishes on the old version, the next call runs the new one", async () => {
    const { h, root, one, release } = await greetHeldAtGate();
    const v2 = await saveUserTool(h, { ...GREET, body: 'async (args) => "v2 " + args.name' });
    // The app shows the reload took effect: the registry runs version 2.
    expect(v2).toMatchObject({ version: 2, activeVersion: 2 });
    release.resolve();
    expect(await one.wait()).toMatchObject({ status: "done" });
    await (await root.submit({ type: "input", content: "two" })).wait();
    const results = (await root.entries())
      .filter((e) => e.kind === "pi.tool-result")
      .map((e) => (e.model as Array<{ details?: { result?: unknown; version?: number } }>)[0]!.details);
    expect(results).toEqual([
      { result: "v1 Ada", version: 1, calls: 1 },
      { result: "v2 Ada", version: 2, calls: 0 },
    ]);
  });

  test("a removal while a call runs: that call finishes on its version, the next call finds no tool, and the registry runs none (draw 35d)", async () => {
    // Draw 35d: every named reload was an edit; a removal that left user:greet installed (the sync's
    // uninstall skipped) passed every user-tools test: the next call still ran the removed tool.
    const { h, root, one, release } = await greetHeldAtGate();
    await removeUserTool(h, "greet");
    release.resolve();
    expect(userToolStatuses(h)).toEqual([]);
    expect(userExtensions(h.extensions)).toEqual([]);
    expect(await one.wait()).toMatchObject({ status: "done" });
    await (await root.submit({ type: "input", content: "two" })).wait();
    const results = (await root.entries())
      .filter((e) => e.kind === "pi.tool-result")
      .map((e) => (e.model as Array<{ details?: unknown; content: Array<{ text?: string }> }>)[0]!);
    expect(results).toHaveLength(2);
    expect(results[0]!.details).toEqual({ result: "v1 Ada", version: 1, calls: 1 });
    expect(results[1]!.details).toBeUndefined();
    expect(JSON.stringify(results[1]!.content)).toContain("tool greet is not available");
  });

  test("an edit while a call is still in its beforeTool hook: that call runs the version its phase resolved, the next call the new one", async () => {
    // Break 30E: the tool resolved again after the intent commit (spec §7.3: one handler resolves,
    // runs beforeTool, records intent and executes with that implementation) passed the test above,
    // whose edit lands while execute() already runs.
    const inHook = deferred();
    const release = deferred();
    let hooked = 0;
    const faux = fauxAgentModel(callGreet);
    closeLater(async () => faux.unregister());
    const h = await AgentHarness.open(await memoryStore(), {
      extensions: createRegistry(),
      models: faux.models,
      defaultModel: faux.ref,
      hooks: {
        beforeTool: [
          async () => {
            if (hooked++ > 0) return undefined;
            inHook.resolve();
            await release.promise;
            return undefined;
          },
        ],
      },
    });
    closeLater(() => h.close());
    await saveUserTool(h, { ...GREET, body: 'async (args) => "v1 " + args.name' });
    const root = await h.root();
    const one = await root.submit({ type: "input", content: "one" });
    await inHook.promise;
    expect(await saveUserTool(h, { ...GREET, body: 'async (args) => "v2 " + args.name' })).toMatchObject({
      version: 2,
      activeVersion: 2,
    });
    release.resolve();
    expect(await one.wait()).toMatchObject({ status: "done" });
    await (await root.submit({ type: "input", content: "two" })).wait();
    const results = (await root.entries())
      .filter((e) => e.kind === "pi.tool-result")
      .map((e) => (e.model as Array<{ details?: { result?: unknown; version?: number } }>)[0]!.details);
    expect(results).toEqual([
      { result: "v1 Ada", version: 1, calls: 0 },
      { result: "v2 Ada", version: 2, calls: 0 },
    ]);
  });

  test("an edit that keeps the body and changes only the description and parameters is the next version all the same: installed, shown active, offered as edited, run by the next call (draw 34b-D)", async () => {
    // Every edit above changes the body; a reload that compared bodies only (a new version with the
    // same code left the registry on the old one) passed them all.
    const faux = fauxAgentModel(callGreet);
    closeLater(async () => faux.unregister());
    const extensions = createRegistry();
    const h = await AgentHarness.open(await memoryStore(), {
      extensions,
      models: faux.models,
      defaultModel: faux.ref,
    });
    closeLater(() => h.close());
    const body = 'async (args) => "hi " + args.name';
    await saveUserTool(h, { ...GREET, body });
    const root = await h.root();
    await (await root.submit({ type: "input", content: "one" })).wait();
    const description = "Greets someone by name, politely";
    const parameters = {
      type: "object",
      properties: { name: { type: "string", description: "who is greeted" } },
      required: ["name"],
    };
    expect(await saveUserTool(h, { ...GREET, body, description, parameters })).toMatchObject({
      version: 2,
      activeVersion: 2,
    });
    expect(extensions.snapshot().extension("user:greet")?.tools).toMatchObject([
      { name: "greet", description, parameters },
    ]);
    const sent = faux.requests.length;
    await (await root.submit({ type: "input", content: "two" })).wait();
    expect(faux.requests[sent]!.declarations.find((t) => t.name === "greet")).toMatchObject({
      description,
      parameters,
    });
    const results = (await root.entries())
      .filter((e) => e.kind === "pi.tool-result")
      .map((e) => (e.model as Array<{ details?: { result?: unknown; version?: number } }>)[0]!.details);
    expect(results).toEqual([
      { result: "hi Ada", version: 1, calls: 0 },
      { result: "hi Ada", version: 2, calls: 0 },
    ]);
  });

  test("the app sees the version the registry runs, not the stored one: a stored tool the registry lacks shows none", async () => {
    // Sample 25: every check had the stored and the active version equal, so statuses that echoed the
    // stored version as the active one passed them all.
    const { h, extensions } = await openApp();
    await saveUserTool(h, GREET);
    expect(userToolStatuses(h)).toMatchObject([{ version: 1, activeVersion: 1 }]);
    extensions.uninstall("user:greet");
    const [status] = userToolStatuses(h);
    expect(status).toMatchObject({ name: "greet", version: 1 });
    expect(status?.activeVersion).toBeUndefined();
    // A registry that runs an older version than the stored one shows that older one (draw 34b-D:
    // statuses echoing the stored version whenever some version was installed passed the case above).
    const [v1] = storedUserTools(h);
    await saveUserTool(h, { ...GREET, body: 'async (args) => "v2 " + args.name' });
    extensions.install(userToolExtension(v1!));
    expect(userToolStatuses(h)).toMatchObject([{ name: "greet", version: 2, activeVersion: 1 }]);
  });
});

describe("per conversation", () => {
  test("a conversation drops a user tool through pi.agent extensions (names only); another keeps it", async () => {
    const { h } = await openApp();
    await saveUserTool(h, GREET);
    const a = (await h.root()).id;
    const b = (await h.createConversation({ ownership: { kind: "ownerless" } })).id;
    await setExtensionEnabled(h, a, "user:greet", false);
    expect((await h.requireConversation(a).agentState()).extensions).toEqual({ remove: ["user:greet"] });
    expect(await conversationExtensions(h, a)).toEqual([
      {
        name: "workspace-tools",
        user: false,
        tools: expect.arrayContaining(["ls", "codemode"]),
        enabled: true,
      },
      { name: "user:greet", user: true, tools: ["greet"], enabled: false },
    ]);
    expect((await conversationExtensions(h, b)).find((e) => e.name === "user:greet")?.enabled).toBe(true);
    expect(await ask(h, a, 'use my tool greet with {"name":"Ada"}')).toContain(
      "I don't see a tool named `greet` in this conversation",
    );
    expect(await ask(h, b, 'use my tool greet with {"name":"Ada"}')).toContain("Hello, Ada!");
    await setExtensionEnabled(h, a, "user:greet", true);
    expect((await h.requireConversation(a).agentState()).extensions).toBeUndefined();
    expect(await ask(h, a, 'use my tool greet with {"name":"Cy"}')).toContain("Hello, Cy!");
  });

  test("an exact list gains and loses the name", async () => {
    const { h } = await openApp();
    await saveUserTool(h, GREET);
    const root = await h.root();
    await root.configure({ extensions: ["workspace-tools"] });
    await setExtensionEnabled(h, root.id, "user:greet", true);
    expect((await root.agentState()).extensions).toEqual(["workspace-tools", "user:greet"]);
    await setExtensionEnabled(h, root.id, "workspace-tools", false);
    expect((await root.agentState()).extensions).toEqual(["user:greet"]);
    // Break 28G: the list is the selection exactly (not added to the base): this conversation is
    // offered greet alone, another (no list) the whole base.
    const enabled = async (id: number) =>
      (await conversationExtensions(h, id)).filter((e) => e.enabled).map((e) => e.name);
    expect(await enabled(root.id)).toEqual(["user:greet"]);
    expect([...h.services.agent(root.id).tools.keys()]).toEqual(["greet"]);
    const other = (await h.createConversation({ ownership: { kind: "ownerless" } })).id;
    expect(await enabled(other)).toEqual(["workspace-tools", "user:greet"]);
    expect(h.services.agent(other).tools.has("ls")).toBe(true);
  });

  test("an exact list that loses its last name stays an empty list: the conversation is offered nothing, not the base (sweep 42c)", async () => {
    // Sweep 42c, 161: the exact list never lost its last name, so a switch that wrote the empty
    // list as unset (the conversation back on the whole base) passed.
    const { h } = await openApp();
    await saveUserTool(h, GREET);
    const root = await h.root();
    await root.configure({ extensions: ["user:greet"] });
    await setExtensionEnabled(h, root.id, "user:greet", false);
    expect((await root.agentState()).extensions).toEqual([]);
    expect((await conversationExtensions(h, root.id)).filter((e) => e.enabled)).toEqual([]);
    expect([...h.services.agent(root.id).tools.keys()]).toEqual([]);
    const other = (await h.createConversation({ ownership: { kind: "ownerless" } })).id;
    expect(h.services.agent(other).tools.has("greet")).toBe(true);
  });
});

describe("the demo model", () => {
  const tools = [toPiTool(GREET as never), { name: "codemode", description: "", parameters: {} as never }];
  const user = (text: string) => ({ role: "user" as const, content: text, timestamp: 0 });

  test('"use my tool NAME with {json}" writes a codemode script calling that tool with those arguments', () => {
    const reply = planDemoReply({ messages: [user('Use my tool greet with {"name": "Ada"}')], tools });
    expect(reply.toolCalls.map((c) => c.name)).toEqual(["codemode"]);
    expect(reply.toolCalls[0]!.arguments).toEqual({ script: useToolScript("greet", { name: "Ada" }) });
  });

  test("a tool the conversation does not offer is named, and nothing is called", () => {
    const reply = planDemoReply({ messages: [user("use my tool nope")], tools });
    expect(reply.toolCalls).toEqual([]);
    expect(reply.text).toContain("I don't see a tool named `nope`");
  });
});
