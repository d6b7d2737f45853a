/**
 * The import direction of the engine and the tab, checked on the source itself (an arrow points from a
 * room to one it may import):
 *   entry -> debug -> app -> {browser, server, agent, protocol} -> core -> store;  agent -> sandbox
 * - `store/` imports nothing of the engine; `core/` only `store/`; `agent/` only `core/`, `store/`
 *   and `sandbox/`; none of them imports `app/`, `browser/`, `debug/`, `entry/`, the protocol,
 *   `index.ts` or `testing.ts`; `app/` never imports `debug/` or `entry/` (the test tasks and
 *   endpoints reach an engine only through its entry, on a `?debug=1` page);
 * - nothing in `worker/` imports `src/`, and `src/` imports from `worker/` only `protocol/`;
 * - the tab never loads the engine-only part of the protocol (its door and schemas, and TypeBox):
 *   no value import from `src/`, static or dynamic, reaches them, so the tab's bundle stays small;
 * - `core/` uses no browser global (window, document, navigator, storage, IndexedDB, OPFS handles);
 * - the core's internals (a harness's session with its records, and its scheduler) stay in `core/`:
 *   nothing outside it imports `core/internals.ts` or reads a property named `session`, `records` or
 *   `scheduler` (the agent and the host use the harness's public operations; tests may reach in);
 * - `worker/` has no import cycle (four type-only ones that predate this test are listed below);
 * - what the tab and the engine load before their first line (the static value imports reachable from
 *   their entry modules) never includes pi-ai: its index evaluates the whole model catalogue, so the
 *   engine imports it on demand (worker/agent/models/pi-ai.ts) and the tab never; nor the MCP SDK
 *   (worker/app/mcp/client.ts imports it when a server is first asked).
 * Imports are read with the TypeScript parser (static, dynamic and type-only ones; `.svelte` files
 * through their `<script>` blocks). The rules are a pure function of that graph, so the tests below
 * also feed it a graph with each kind of violation and expect it to be reported.
 */
import fs from "node:fs";
import path from "node:path";
import ts from "typescript";
import { describe, expect, test } from "vitest";

interface Import {
  /** Repository-relative path of the imported file, or the bare package name. */
  readonly to: string;
  /** `import type` / `export type` only: erased at run time. */
  readonly typeOnly: boolean;
  /** `import("...")`: loaded when the call runs, not before the importer's first line. */
  readonly dynamic?: boolean;
}
type Graph = ReadonlyMap<string, readonly Import[]>;
interface Source {
  readonly imports: readonly Import[];
  /** Browser globals the file refers to (not a local binding, not a property name). */
  readonly browserGlobals: readonly string[];
  /** Properties named like the core's internals that the file reads (`x.session`, `{ records } = x`). */
  readonly internalReads: readonly string[];
}

/** The harness's internal parts, by the names the core gives them. */
const CORE_INTERNALS = new Set(["session", "records", "scheduler"]);
const INTERNALS_MODULE = "worker/core/internals.ts";

const BROWSER_GLOBALS = new Set([
  "window",
  "document",
  "navigator",
  "localStorage",
  "sessionStorage",
  "indexedDB",
  "IDBFactory",
  "IDBDatabase",
  "FileSystemHandle",
  "FileSystemDirectoryHandle",
  "FileSystemFileHandle",
  "FileSystemSyncAccessHandle",
  "location",
]);

function repoRoot(): string {
  let dir = path.dirname(new URL(import.meta.url).pathname);
  while (!fs.existsSync(path.join(dir, "package.json"))) {
    const up = path.dirname(dir);
    if (up === dir) throw new Error("no package.json above the test");
    dir = up;
  }
  return dir;
}

function sourceFiles(root: string, dir: string): string[] {
  const out: string[] = [];
  for (const entry of fs.readdirSync(path.join(root, dir), { withFileTypes: true })) {
    const rel = path.posix.join(dir, entry.name);
    if (entry.isDirectory()) out.push(...sourceFiles(root, rel));
    else if (/\.(ts|svelte)$/.test(entry.name) && !entry.name.endsWith(".d.ts")) out.push(rel);
  }
  return out;
}

/** The TypeScript of a file (a `.svelte` file's script blocks, joined). */
function scriptOf(file: string, text: string): string {
  if (!file.endsWith(".svelte")) return text;
  return [...text.matchAll(/<script\b[^>]*>([\s\S]*?)<\/script>/g)].map((m) => m[1]).join("\n");
}

function parse(file: string, text: string): Source {
  const sf = ts.createSourceFile(file, scriptOf(file, text), ts.ScriptTarget.Latest, true, ts.ScriptKind.TS);
  const imports: Import[] = [];
  const declared = new Set<string>();
  const used = new Set<string>();
  const internalReads = new Set<string>();
  const add = (spec: string, typeOnly: boolean, dynamic = false) => {
    const to = spec.startsWith(".")
      ? path.posix.normalize(path.posix.join(path.posix.dirname(file), spec))
      : spec;
    imports.push({ to, typeOnly, ...(dynamic ? { dynamic } : {}) });
  };
  const visit = (node: ts.Node): void => {
    if (ts.isImportDeclaration(node) && ts.isStringLiteral(node.moduleSpecifier)) {
      const clause = node.importClause;
      const typeOnly =
        clause !== undefined &&
        (clause.isTypeOnly ||
          (clause.name === undefined &&
            clause.namedBindings !== undefined &&
            ts.isNamedImports(clause.namedBindings) &&
            clause.namedBindings.elements.length > 0 &&
            clause.namedBindings.elements.every((e) => e.isTypeOnly)));
      add(node.moduleSpecifier.text, typeOnly);
    } else if (node.kind === ts.SyntaxKind.ExportDeclaration) {
      const exp = node as ts.ExportDeclaration;
      if (exp.moduleSpecifier && ts.isStringLiteral(exp.moduleSpecifier)) {
        const typeOnly =
          exp.isTypeOnly ||
          (exp.exportClause !== undefined &&
            ts.isNamedExports(exp.exportClause) &&
            exp.exportClause.elements.length > 0 &&
            exp.exportClause.elements.every((e) => e.isTypeOnly));
        add(exp.moduleSpecifier.text, typeOnly);
      }
    } else if (
      ts.isCallExpression(node) &&
      node.expression.kind === ts.SyntaxKind.ImportKeyword &&
      node.arguments[0] &&
      ts.isStringLiteral(node.arguments[0])
    ) {
      add(node.arguments[0].text, false, true);
    } else if (ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument)) {
      const literal = node.argument.literal;
      if (ts.isStringLiteral(literal)) add(literal.text, true);
    }
    if (ts.isPropertyAccessExpression(node) && CORE_INTERNALS.has(node.name.text))
      internalReads.add(node.name.text);
    else if (
      ts.isElementAccessExpression(node) &&
      ts.isStringLiteralLike(node.argumentExpression) &&
      CORE_INTERNALS.has(node.argumentExpression.text)
    )
      internalReads.add(node.argumentExpression.text);
    else if (ts.isBindingElement(node) && ts.isObjectBindingPattern(node.parent)) {
      const key = node.propertyName ?? node.name;
      if ((ts.isIdentifier(key) || ts.isStringLiteralLike(key)) && CORE_INTERNALS.has(key.text))
        internalReads.add(key.text);
    }
    if (ts.isIdentifier(node) && BROWSER_GLOBALS.has(node.text)) {
      const parent = node.parent;
      const isName =
        (ts.isPropertyAccessExpression(parent) && parent.name === node) ||
        (ts.isQualifiedName(parent) && parent.right === node) ||
        ((ts.isPropertyAssignment(parent) ||
          ts.isPropertyDeclaration(parent) ||
          ts.isPropertySignature(parent) ||
          ts.isMethodDeclaration(parent) ||
          ts.isMethodSignature(parent)) &&
          parent.name === node);
      const isDeclaration =
        (ts.isParameter(parent) ||
          ts.isVariableDeclaration(parent) ||
          ts.isFunctionDeclaration(parent) ||
          ts.isClassDeclaration(parent) ||
          ts.isBindingElement(parent) ||
          ts.isImportSpecifier(parent)) &&
        (parent as { name?: ts.Node }).name === node;
      if (isDeclaration) declared.add(node.text);
      else if (!isName) used.add(node.text);
    }
    ts.forEachChild(node, visit);
  };
  visit(sf);
  return {
    imports,
    browserGlobals: [...used].filter((name) => !declared.has(name)),
    internalReads: [...internalReads],
  };
}

/** Which part of the project a file belongs to ("other": a package or a file outside both trees). */
function partOf(file: string): string {
  const m = /^worker\/(store|core|agent|sandbox|protocol|browser|server|app|debug|entry|testing)\//.exec(
    file,
  );
  if (m) return m[1]!;
  if (file === "worker/testing.ts") return "testing";
  if (file === "worker/index.ts") return "index";
  if (file.startsWith("worker/")) return "worker";
  if (file.startsWith("src/")) return "src";
  return "other";
}

/**
 * For each room, the rooms it may import (packages are not restricted here). The direction:
 *   entry -> debug -> app -> {browser, server, agent, protocol} -> core -> store;  agent -> sandbox;
 *   src -> protocol.
 * The platform adapters (browser/, server/) implement the agent's ports (workspace files, network)
 * and speak the protocol; the protocol carries the agent's and the core's types.
 */
const MAY_IMPORT: Record<string, readonly string[]> = {
  store: ["store"],
  core: ["store", "core"],
  /** QuickJS code mode: used by the agent only, and imports nothing of the engine. */
  sandbox: ["sandbox"],
  agent: ["store", "core", "agent", "sandbox"],
  protocol: ["store", "core", "agent", "protocol"],
  browser: ["store", "core", "agent", "sandbox", "protocol", "browser"],
  server: ["store", "core", "agent", "sandbox", "protocol", "server"],
  app: ["store", "core", "agent", "sandbox", "protocol", "browser", "server", "app"],
  debug: ["store", "core", "agent", "sandbox", "protocol", "browser", "server", "app", "debug"],
  entry: ["store", "core", "agent", "sandbox", "protocol", "browser", "server", "app", "debug", "entry"],
  /**
   * The public API (worker/index.ts): the portable engine, the browser's workspace adapter and the
   * app's demo model.
   */
  index: ["store", "core", "agent", "protocol", "browser", "app"],
  /** The test kit (worker/testing.ts and worker/testing/) builds on the public API. */
  testing: ["store", "core", "agent", "sandbox", "protocol", "browser", "app", "debug", "index", "testing"],
  worker: ["store", "core", "agent", "protocol"],
  src: ["src", "protocol"],
};

/**
 * Cycles known when this test was written, each only through type-only imports (erased at run
 * time, so no module sees another half-initialised). They may be broken; no new one may appear.
 */
const KNOWN_TYPE_CYCLES: readonly (readonly string[])[] = [
  ["worker/core/session.ts", "worker/core/tx.ts"],
  ["worker/core/runtime.ts", "worker/core/scheduler.ts"],
  ["worker/agent/conversation/handles.ts", "worker/agent/harness.ts"],
  ["worker/debug/bench.ts", "worker/app/engine-host.ts"],
];

/**
 * The modules the tab and the engine start from (the SharedWorker, and its dedicated-worker fallback),
 * and the two the engine loads at once while its store opens (worker/entry/boot.ts): the API module and
 * the harness's configuration. What they load statically is what a recovery waits for.
 */
const ENTRIES = [
  "src/main.ts",
  "worker/entry/shared-worker.ts",
  "worker/entry/dedicated-worker.ts",
  "worker/app/engine-host.ts",
  "worker/app/app-agent.ts",
];
/** The protocol's engine-only modules and what only they use: never loaded by the tab, even on demand. */
const ENGINE_ONLY = new Set([
  "worker/protocol/door.ts",
  "worker/protocol/schema.ts",
  "typebox",
  "typebox/value",
]);

/** The chain of value imports (static or dynamic) from a file of `src/` to an engine-only module. */
function tabPathToEngineOnly(graph: Graph): string[] | undefined {
  const starts = [...graph.keys()].filter((f) => f.startsWith("src/"));
  const cameFrom = new Map<string, string>(starts.map((f) => [f, ""]));
  const queue = [...starts];
  while (queue.length > 0) {
    const file = queue.shift()!;
    for (const i of graph.get(file) ?? []) {
      if (i.typeOnly || cameFrom.has(i.to)) continue;
      cameFrom.set(i.to, file);
      if (ENGINE_ONLY.has(i.to)) {
        const chain = [i.to];
        for (let at = file; at !== ""; at = cameFrom.get(at)!) chain.unshift(at);
        return chain;
      }
      queue.push(i.to);
    }
  }
  return undefined;
}

/** Packages an entry may load only on demand, through a dynamic import. */
const ON_DEMAND = new Set(["@mariozechner/pi-ai", "@modelcontextprotocol/sdk"]);
/** Whether `to` is an on-demand package or one of its subpaths. */
const onDemand = (to: string) => [...ON_DEMAND].some((p) => to === p || to.startsWith(`${p}/`));

/** The chain of static value imports from `entry` to an on-demand package, or undefined. */
function staticPathToOnDemand(graph: Graph, entry: string): string[] | undefined {
  const cameFrom = new Map<string, string>([[entry, ""]]);
  const queue = [entry];
  while (queue.length > 0) {
    const file = queue.shift()!;
    for (const i of graph.get(file) ?? []) {
      if (i.typeOnly || i.dynamic || cameFrom.has(i.to)) continue;
      cameFrom.set(i.to, file);
      if (onDemand(i.to)) {
        const chain = [i.to];
        for (let at = file; at !== ""; at = cameFrom.get(at)!) chain.unshift(at);
        return chain;
      }
      queue.push(i.to);
    }
  }
  return undefined;
}

/** Strongly connected components of more than one file (or a file importing itself). */
function cycles(graph: Graph, follow: (i: Import) => boolean): string[][] {
  let next = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const connect = (v: string): void => {
    index.set(v, next);
    low.set(v, next++);
    stack.push(v);
    onStack.add(v);
    for (const i of graph.get(v) ?? []) {
      if (!follow(i) || !graph.has(i.to)) continue;
      if (!index.has(i.to)) {
        connect(i.to);
        low.set(v, Math.min(low.get(v)!, low.get(i.to)!));
      } else if (onStack.has(i.to)) low.set(v, Math.min(low.get(v)!, index.get(i.to)!));
    }
    if (low.get(v) === index.get(v)) {
      const component: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        onStack.delete(w);
        component.push(w);
      } while (w !== v);
      const selfLoop = (graph.get(v) ?? []).some((i) => i.to === v && follow(i));
      if (component.length > 1 || selfLoop) found.push(component.sort());
    }
  };
  for (const v of graph.keys()) if (!index.has(v)) connect(v);
  return found;
}

/** Every broken rule, one line each. */
function violations(
  graph: Graph,
  browserGlobals: ReadonlyMap<string, readonly string[]>,
  internalReads: ReadonlyMap<string, readonly string[]> = new Map(),
): string[] {
  const out: string[] = [];
  for (const [file, imports] of graph) {
    const from = partOf(file);
    const allowed = MAY_IMPORT[from];
    if (!allowed) continue;
    for (const i of imports) {
      const to = partOf(i.to);
      if (to === "other") continue; // a package
      if (!allowed.includes(to)) out.push(`${file} (${from}) imports ${i.to} (${to})`);
      else if (i.to === INTERNALS_MODULE && from !== "core")
        out.push(`${file} (${from}) imports the core's internals ${i.to}`);
    }
  }
  for (const [file, names] of browserGlobals)
    if (partOf(file) === "core" && names.length > 0)
      out.push(`${file} uses browser globals: ${names.join(", ")}`);
  for (const [file, names] of internalReads)
    if (partOf(file) !== "core" && partOf(file) !== "store" && partOf(file) !== "other" && names.length > 0)
      out.push(`${file} reads the core's internals: ${names.join(", ")}`);
  for (const entry of ENTRIES) {
    const chain = graph.has(entry) ? staticPathToOnDemand(graph, entry) : undefined;
    if (chain) out.push(`${entry} loads ${chain.at(-1)} before its first line: ${chain.join(" -> ")}`);
  }
  const engineOnly = tabPathToEngineOnly(graph);
  if (engineOnly) out.push(`the tab loads the engine-only ${engineOnly.at(-1)}: ${engineOnly.join(" -> ")}`);
  const inWorker = new Map([...graph].filter(([f]) => f.startsWith("worker/")));
  for (const c of cycles(inWorker, (i) => !i.typeOnly)) out.push(`import cycle among: ${c.join(", ")}`);
  const known = new Set(KNOWN_TYPE_CYCLES.map((c) => [...c].sort().join(" ")));
  for (const c of cycles(inWorker, () => true))
    if (
      !known.has(c.join(" ")) &&
      !cycles(inWorker, (i) => !i.typeOnly).some((v) => v.join(" ") === c.join(" "))
    )
      out.push(`import cycle (type imports included) among: ${c.join(", ")}`);
  return out;
}

function load(): {
  graph: Map<string, Import[]>;
  globals: Map<string, readonly string[]>;
  reads: Map<string, readonly string[]>;
} {
  const root = repoRoot();
  const graph = new Map<string, Import[]>();
  const globals = new Map<string, readonly string[]>();
  const reads = new Map<string, readonly string[]>();
  for (const file of [...sourceFiles(root, "worker"), ...sourceFiles(root, "src")]) {
    const source = parse(file, fs.readFileSync(path.join(root, file), "utf8"));
    graph.set(file, [...source.imports]);
    globals.set(file, source.browserGlobals);
    reads.set(file, source.internalReads);
  }
  return { graph, globals, reads };
}

describe("import direction", () => {
  const { graph, globals, reads } = load();

  test("the project follows every rule", () => {
    expect(graph.size).toBeGreaterThan(50);
    expect(violations(graph, globals, reads)).toEqual([]);
  });

  test("core/ names no built-in agent document or entry kind: the generic mechanism special-cases no model, tool or inbox state", () => {
    // Every built-in name is `pi.<something>` (worker/agent/records.ts); the core may not test for one,
    // in a string, a template's head or a regular expression (break 28F: `/^pi\.live$/.test(name)`
    // passed the string check), nor name a model message's role: those are the agent's state.
    const root = repoRoot();
    const named: string[] = [];
    const roles = new Set(["user", "assistant", "toolResult", "toolCall", "system"]);
    // Draw 34A: a built-in name inside a longer string (SQL's `kind LIKE 'pi.%'`, a template's middle
    // or tail), the bare namespace (`name.split(".")[0] === "pi"`) or a role quoted in SQL passed the
    // check above, which read a string's start only; core/bulk-seed.ts named 'pi.user' so.
    const quotedRole = new RegExp(`['"\`](${[...roles].join("|")})['"\`]`);
    for (const file of sourceFiles(root, "worker/core")) {
      const source = ts.createSourceFile(
        file,
        fs.readFileSync(path.join(root, file), "utf8"),
        ts.ScriptTarget.Latest,
      );
      const visit = (node: ts.Node): void => {
        if (
          (ts.isStringLiteral(node) ||
            ts.isNoSubstitutionTemplateLiteral(node) ||
            ts.isTemplateHead(node) ||
            ts.isTemplateMiddle(node) ||
            ts.isTemplateTail(node)) &&
          (/(^|[^\w$])pi\./.test(node.text) ||
            node.text === "pi" ||
            roles.has(node.text) ||
            quotedRole.test(node.text))
        )
          named.push(`${file}: ${node.text}`);
        if (ts.isRegularExpressionLiteral(node) && /pi\\\./.test(node.text))
          named.push(`${file}: ${node.text}`);
        ts.forEachChild(node, visit);
      };
      visit(source);
    }
    expect(named).toEqual([]);
  });

  describe("each rule reports a violation", () => {
    const withImport = (file: string, to: string, typeOnly = false) => {
      const copy = new Map(graph);
      copy.set(file, [...(copy.get(file) ?? []), { to, typeOnly }]);
      return violations(copy, globals);
    };
    test.each([
      ["worker/core/tx.ts", "worker/agent/records.ts"],
      ["worker/core/tx.ts", "worker/app/engine-host.ts"],
      ["worker/store/line.ts", "worker/core/types.ts"],
      ["worker/agent/records.ts", "worker/app/engine-host.ts"],
      ["worker/agent/records.ts", "worker/protocol/index.ts"],
      ["worker/app/engine-host.ts", "src/lib/engine.svelte.ts"],
      ["src/lib/engine.svelte.ts", "worker/core/types.ts"],
      // The rooms: nothing imports upward.
      ["worker/app/engine-host.ts", "worker/debug/endpoints.ts"],
      ["worker/app/app-agent.ts", "worker/entry/boot.ts"],
      ["worker/debug/endpoints.ts", "worker/entry/boot.ts"],
      ["worker/browser/owner.ts", "worker/app/engine-host.ts"],
      ["worker/browser/owner.ts", "worker/debug/ticker.ts"],
      ["worker/agent/harness.ts", "worker/app/demo-model.ts"],
      ["worker/agent/harness.ts", "worker/browser/opfs-fs.ts"],
      ["worker/agent/harness.ts", "worker/debug/ticker.ts"],
      ["worker/protocol/index.ts", "worker/app/engine-host.ts"],
      ["worker/protocol/index.ts", "worker/browser/owner.ts"],
      ["worker/core/session.ts", "worker/browser/owner.ts"],
      ["worker/store/line.ts", "worker/app/search.ts"],
      ["worker/sandbox/run.ts", "worker/agent/harness.ts"],
      ["src/lib/engine.svelte.ts", "worker/app/engine-host.ts"],
      ["src/lib/engine.svelte.ts", "worker/browser/owner.ts"],
    ])("%s importing %s", (file, to) => {
      expect(withImport(file, to, true)).toContain(`${file} (${partOf(file)}) imports ${to} (${partOf(to)})`);
    });

    test("a browser global in core/", () => {
      const source = parse("worker/core/x.ts", "export const n = () => navigator.storage; let d = document;");
      expect([...source.browserGlobals].sort()).toEqual(["document", "navigator"]);
      const local = parse(
        "worker/core/y.ts",
        "export function f(document: string) { return document.length; }",
      );
      expect(local.browserGlobals).toEqual([]);
      const out = violations(graph, new Map([...globals, ["worker/core/x.ts", source.browserGlobals]]));
      expect(out).toContain("worker/core/x.ts uses browser globals: navigator, document");
    });

    test.each([["worker/agent/conversation/handles.ts"], ["worker/app/engine-host.ts"], ["worker/index.ts"]])(
      "%s importing the core's internals",
      (file) => {
        expect(withImport(file, INTERNALS_MODULE, true)).toContain(
          `${file} (${partOf(file)}) imports the core's internals ${INTERNALS_MODULE}`,
        );
      },
    );

    test.each([
      ["worker/agent/x.ts", "export const f = (h: AgentHarness) => h.session.records.getDoc(1, 'x');"],
      ["worker/host/x.ts", "export const g = (h: AgentHarness) => h.scheduler.active.size;"],
      ["worker/host/y.ts", "export function g(h: AgentHarness) { const { session } = h; return session; }"],
      ["worker/agent/y.ts", "export const f = (h: AgentHarness) => h['records'];"],
    ])("%s reading the core's internals", (file, text) => {
      const source = parse(file, text);
      expect(source.internalReads.length).toBeGreaterThan(0);
      const out = violations(graph, globals, new Map([...reads, [file, source.internalReads]]));
      expect(out).toContain(`${file} reads the core's internals: ${source.internalReads.join(", ")}`);
      // The same reads inside the core are its own business.
      const inCore = violations(
        graph,
        globals,
        new Map([...reads, ["worker/core/x.ts", source.internalReads]]),
      );
      expect(inCore).toEqual(violations(graph, globals, reads));
    });

    test("the MCP client importing the SDK statically", () => {
      const file = "worker/app/mcp/client.ts";
      const out = withImport(file, "@modelcontextprotocol/sdk/client/index.js");
      expect(out).toContainEqual(
        expect.stringMatching(
          /^worker\/app\/(engine-host|app-agent)\.ts loads @modelcontextprotocol\/sdk\/client\/index\.js before its first line: /,
        ),
      );
    });

    test.each([["worker/agent/records.ts"], ["worker/agent/services.ts"], ["worker/app/engine-host.ts"]])(
      "%s importing a value of pi-ai statically",
      (file) => {
        const out = withImport(file, "@mariozechner/pi-ai");
        expect(out).toContainEqual(
          expect.stringMatching(
            /^worker\/app\/(engine-host|app-agent)\.ts loads @mariozechner\/pi-ai before its first line: /,
          ),
        );
        // Its types, or the module through import(), cost nothing before the first line.
        expect(withImport(file, "@mariozechner/pi-ai", true)).toEqual(violations(graph, globals));
        const copy = new Map(graph);
        copy.set(file, [
          ...(copy.get(file) ?? []),
          { to: "@mariozechner/pi-ai", typeOnly: false, dynamic: true },
        ]);
        expect(violations(copy, globals)).toEqual(violations(graph, globals));
      },
    );

    test.each([
      ["src/lib/engine.svelte.ts", "worker/protocol/door.ts", false],
      ["worker/protocol/client.ts", "worker/protocol/schema.ts", true],
      ["worker/protocol/readers.ts", "typebox", false],
    ])("the tab reaching the engine-only %s -> %s (dynamic: %s)", (file, to, dynamic) => {
      const copy = new Map(graph);
      copy.set(file, [...(copy.get(file) ?? []), { to, typeOnly: false, ...(dynamic ? { dynamic } : {}) }]);
      expect(violations(copy, globals)).toContainEqual(
        expect.stringMatching(new RegExp(`^the tab loads the engine-only ${to}: src/.* -> ${to}$`)),
      );
      // Its types cost the tab nothing.
      const typed = new Map(graph);
      typed.set(file, [...(typed.get(file) ?? []), { to, typeOnly: true }]);
      expect(violations(typed, globals)).toEqual(violations(graph, globals));
    });

    test("an import cycle in worker/", () => {
      expect(withImport("worker/core/errors.ts", "worker/core/scheduler.ts")).toContainEqual(
        expect.stringMatching(/^import cycle among: .*worker\/core\/errors\.ts/),
      );
    });

    test("a new cycle through type imports only", () => {
      expect(withImport("worker/agent/records.ts", "worker/agent/harness.ts", true)).toContainEqual(
        expect.stringMatching(/^import cycle \(type imports included\) among: .*worker\/agent\/records\.ts/),
      );
    });
  });
});
