import { type ToolCall, validateToolArguments } from "@mariozechner/pi-ai";
import { describe, expect, test, vi } from "vitest";
import {
  builtinTools,
  createEditTool,
  createLsTool,
  createReadTool,
  createSleepTool,
  createWriteTool,
  toolByName,
} from "../../../worker/agent/tools/builtin/index.ts";
import {
  capHead,
  capOutput,
  defineTool,
  OUTPUT_LIMITS,
  replayPolicyOf,
  type ToolApi,
  type ToolDefinition,
  type ToolResult,
  toPiTool,
} from "../../../worker/agent/tools/contract.ts";
import {
  FsError,
  normalizePath,
  serializeByPath,
  type WorkspaceFs,
} from "../../../worker/agent/workspace/fs.ts";
import { MemoryFs } from "../../../worker/agent/workspace/memory-fs.ts";
import { detachedToolApi } from "../../../worker/testing.ts";

const ls = createLsTool();
const read = createReadTool();
const write = createWriteTool();
const edit = createEditTool();
const sleep = createSleepTool();

function makeApi(fs: WorkspaceFs, signal: AbortSignal = new AbortController().signal) {
  const outputs: string[] = [];
  const api: ToolApi = detachedToolApi({ signal, fs, output: (chunk) => void outputs.push(chunk) });
  return { api, outputs };
}

// The tools' execute takes Static<P>; tests pass loose objects the way the engine passes validated args.
function run(tool: ToolDefinition, args: Record<string, unknown>, fs: WorkspaceFs, signal?: AbortSignal) {
  return tool.execute(args as never, makeApi(fs, signal).api);
}

const textOf = (r: ToolResult) => r.content.map((c) => (c.type === "text" ? c.text : "")).join("");
const bytes = (s: string) => new TextEncoder().encode(s).length;

describe("paths", () => {
  test("normalise relative paths", () => {
    expect(normalizePath(".")).toBe(".");
    expect(normalizePath("")).toBe(".");
    expect(normalizePath("./a//b/./c.md")).toBe("a/b/c.md");
    expect(normalizePath("a/x/../b")).toBe("a/b");
    expect(normalizePath("a\\b")).toBe("a/b");
  });

  test.each([
    "..",
    "../secret",
    "a/../../b",
    "/etc/passwd",
    "\\\\server\\share",
    "C:\\Windows",
    "c:/x",
    "file:///etc/passwd",
    "a\u0000b",
  ])("refuse %j", (path) => {
    expect(() => normalizePath(path)).toThrow(FsError);
    try {
      normalizePath(path);
    } catch (error) {
      expect((error as FsError).code).toBe("invalid_path");
    }
  });

  test("escapes through the tools are error results and write nothing", async () => {
    const fs = new MemoryFs({ "a.txt": "x" });
    for (const path of ["../evil.txt", "/etc/passwd", "notes/../../evil.txt"]) {
      const w = await run(write, { path, content: "pwned" }, fs);
      expect(w.isError).toBe(true);
      expect(textOf(w)).toMatch(/workspace/);
      const r = await run(read, { path }, fs);
      expect(r.isError).toBe(true);
      const e = await run(edit, { path, oldText: "x", newText: "y" }, fs);
      expect(e.isError).toBe(true);
      const l = await run(ls, { path }, fs);
      expect(l.isError).toBe(true);
    }
    expect(fs.snapshot()).toEqual({ "a.txt": "x" });
  });
});

describe("MemoryFs", () => {
  test("typed errors", async () => {
    const fs = new MemoryFs({ "d/f.txt": "hi" });
    await expect(fs.read("nope")).rejects.toMatchObject({ code: "not_found" });
    await expect(fs.read("d")).rejects.toMatchObject({ code: "is_dir" });
    await expect(fs.list("d/f.txt")).rejects.toMatchObject({ code: "not_dir" });
    await expect(fs.write("d/f.txt/x", "")).rejects.toMatchObject({ code: "not_dir" });
    await expect(fs.write("d", "")).rejects.toMatchObject({ code: "is_dir" });
    expect(await fs.exists("d")).toBe(true);
    expect(await fs.exists("d/f.txt")).toBe(true);
    expect(await fs.exists("d/f.txt/x")).toBe(false);
    await fs.remove("d/f.txt");
    expect(await fs.exists("d/f.txt")).toBe(false);
    await expect(fs.remove("d/f.txt")).rejects.toMatchObject({ code: "not_found" });
  });
});

describe("capOutput", () => {
  test("leaves small output alone", () => {
    expect(capOutput("a\nb\n")).toEqual({ text: "a\nb\n", truncated: false });
  });

  test("caps at 2,000 lines", () => {
    const text = Array.from({ length: 3000 }, (_, i) => `line ${i + 1}`).join("\n");
    const out = capOutput(text);
    expect(out.truncated).toBe(true);
    const head = out.text.split("\n\n[output truncated")[0]!;
    expect(head.split("\n")).toHaveLength(OUTPUT_LIMITS.maxLines);
    expect(head.endsWith("line 2000")).toBe(true);
    expect(out.text).toMatch(/\[output truncated: 1000 more lines \/ \d+ more bytes not shown/);
  });

  test("caps at 50 KiB, whole lines", () => {
    const line = "x".repeat(99);
    const text = Array.from({ length: 1000 }, () => line).join("\n"); // 1000 lines, ~100 KB
    const cap = capHead(text);
    expect(cap.truncated).toBe(true);
    expect(bytes(cap.head)).toBeLessThanOrEqual(50 * 1024);
    expect(cap.shownLines).toBe(Math.floor((50 * 1024 + 1) / 100));
    expect(cap.head.split("\n").every((l) => l === line)).toBe(true);
    const out = capOutput(text);
    expect(out.text.startsWith(cap.head)).toBe(true);
    expect(out.text).toContain(`${1000 - cap.shownLines} more lines`);
    expect(out.text).toContain(`${bytes(text) - bytes(cap.head)} more bytes`);
  });

  test("one huge line keeps a prefix that does not split characters", () => {
    const text = "é".repeat(40_000); // 80,000 bytes, one line
    const cap = capHead(text);
    expect(cap.truncated).toBe(true);
    expect(bytes(cap.head)).toBe(50 * 1024);
    expect(cap.head).toBe("é".repeat(25_600));
    const emoji = "😀".repeat(20_000); // 4 bytes each
    const head = capHead(emoji).head;
    expect(bytes(head)).toBeLessThanOrEqual(50 * 1024);
    expect(head).toBe("😀".repeat(12_800));
  });
});

describe("tool definitions", () => {
  test("built-ins, names, replay policies, pi-ai shape", () => {
    expect(builtinTools.map((t) => t.name)).toEqual([
      "ls",
      "read",
      "write",
      "edit",
      "sleep",
      "subagent",
      "codemode",
    ]);
    expect(Object.fromEntries(builtinTools.map((t) => [t.name, replayPolicyOf(t)]))).toEqual({
      ls: "safe",
      read: "safe",
      write: "safe",
      edit: "unsafe",
      sleep: "safe",
      subagent: "safe",
      codemode: "safe",
    });
    expect(toolByName("edit")?.name).toBe("edit");
    expect(toolByName("nope")).toBeUndefined();
    const pi = toPiTool(read);
    expect(Object.keys(pi).sort()).toEqual(["description", "name", "parameters"]);
    expect(replayPolicyOf({})).toBe("unsafe");
  });

  test("defineTool refuses bad names", () => {
    const base = { description: "d", parameters: read.parameters, execute: read.execute };
    expect(() => defineTool({ ...base, name: "has space" })).toThrow(/invalid tool name/);
    expect(() => defineTool({ ...base, name: "" })).toThrow(/invalid tool name/);
  });

  test("pi-ai validates arguments against the schemas", () => {
    const call = (name: string, args: Record<string, unknown>): ToolCall => ({
      type: "toolCall",
      id: "c1",
      name,
      arguments: args,
    });
    expect(validateToolArguments(toPiTool(read), call("read", { path: "a.md", offset: 2 }))).toEqual({
      path: "a.md",
      offset: 2,
    });
    expect(() => validateToolArguments(toPiTool(read), call("read", {}))).toThrow();
    expect(() => validateToolArguments(toPiTool(edit), call("edit", { path: "a", oldText: "x" }))).toThrow();
    expect(() => validateToolArguments(toPiTool(read), call("read", { path: "a", offset: 0 }))).toThrow();
  });
});

describe("ls", () => {
  test("lists sorted entries, directories marked", async () => {
    const fs = new MemoryFs({ "b.txt": "hello", "a/x.md": "", "c.md": "é" });
    const r = await run(ls, {}, fs);
    expect(r.isError).toBeUndefined();
    expect(textOf(r)).toBe("a/\nb.txt (5 bytes)\nc.md (2 bytes)");
    expect(r.details).toMatchObject({ path: ".", entries: [{ name: "a", kind: "dir", size: 0 }, {}, {}] });
    expect(textOf(await run(ls, { path: "a" }, fs))).toBe("x.md (0 bytes)");
  });

  test("empty, missing, not a directory", async () => {
    const fs = new MemoryFs({ "f.txt": "x" });
    expect(textOf(await run(ls, { path: "." }, new MemoryFs()))).toBe("(empty directory)");
    const missing = await run(ls, { path: "nope" }, fs);
    expect(missing.isError).toBe(true);
    expect(textOf(missing)).toBe("Directory not found: nope");
    const file = await run(ls, { path: "f.txt" }, fs);
    expect(file.isError).toBe(true);
    expect(textOf(file)).toMatch(/Not a directory/);
  });
});

describe("read", () => {
  const fs = new MemoryFs({ "a.md": "one\ntwo\nthree\nfour\n", "empty.txt": "", "dir/x": "x" });

  test("whole file and windows", async () => {
    expect(textOf(await run(read, { path: "a.md" }, fs))).toBe("one\ntwo\nthree\nfour");
    const window = await run(read, { path: "./a.md", offset: 2, limit: 2 }, fs);
    expect(textOf(window)).toBe("two\nthree\n\n[showing lines 2-3 of 4; use offset=4 to continue]");
    expect(window.details).toMatchObject({ from: 2, to: 3, totalLines: 4, truncated: false });
    expect(textOf(await run(read, { path: "a.md", offset: 4 }, fs))).toBe("four");
    expect(textOf(await run(read, { path: "empty.txt" }, fs))).toBe("(empty file)");
  });

  test("errors", async () => {
    const missing = await run(read, { path: "nope.md" }, fs);
    expect(missing).toMatchObject({ isError: true });
    expect(textOf(missing)).toBe("File not found: nope.md");
    const dir = await run(read, { path: "dir" }, fs);
    expect(dir.isError).toBe(true);
    expect(textOf(dir)).toMatch(/is a directory/);
    const beyond = await run(read, { path: "a.md", offset: 9 }, fs);
    expect(beyond.isError).toBe(true);
    expect(textOf(beyond)).toMatch(/beyond the end/);
  });

  test("caps at 2,000 lines and says where to continue", async () => {
    const big = new MemoryFs({ "big.txt": Array.from({ length: 2500 }, (_, i) => `${i + 1}`).join("\n") });
    const r = await run(read, { path: "big.txt" }, big);
    const text = textOf(r);
    expect(text.split("\n\n[")[0]!.split("\n")).toHaveLength(2000);
    expect(text).toMatch(/showing lines 1-2000 of 2500; use offset=2001 to continue/);
    const rest = await run(read, { path: "big.txt", offset: 2001 }, big);
    expect(textOf(rest).split("\n")).toHaveLength(500);
  });

  test("caps at 50 KiB", async () => {
    const line = "y".repeat(1023);
    const big = new MemoryFs({ "wide.txt": Array.from({ length: 100 }, () => line).join("\n") });
    const r = await run(read, { path: "wide.txt" }, big);
    const head = textOf(r).split("\n\n[")[0]!;
    expect(bytes(head)).toBeLessThanOrEqual(50 * 1024);
    expect(head.split("\n")).toHaveLength(50);
    expect(textOf(r)).toMatch(/use offset=51 to continue/);
  });
});

describe("write", () => {
  test("creates parents, overwrites, reports bytes", async () => {
    const fs = new MemoryFs();
    const r = await run(write, { path: "notes/deep/n.md", content: "héllo" }, fs);
    expect(r.isError).toBeUndefined();
    expect(textOf(r)).toBe("Wrote 6 bytes to notes/deep/n.md");
    await run(write, { path: "notes/deep/n.md", content: "again" }, fs);
    expect(fs.snapshot()).toEqual({ "notes/deep/n.md": "again" });
  });

  test("errors: directory target, file as parent", async () => {
    const fs = new MemoryFs({ "d/x": "1", f: "2" });
    const dir = await run(write, { path: "d", content: "" }, fs);
    expect(dir.isError).toBe(true);
    expect(textOf(dir)).toMatch(/it is a directory/);
    const parent = await run(write, { path: "f/child", content: "" }, fs);
    expect(parent.isError).toBe(true);
    expect(fs.snapshot()).toEqual({ "d/x": "1", f: "2" });
  });

  test("an aborted call writes nothing", async () => {
    const fs = new MemoryFs();
    const controller = new AbortController();
    controller.abort(new Error("stop"));
    await expect(run(write, { path: "a", content: "x" }, fs, controller.signal)).rejects.toThrow("stop");
    expect(fs.snapshot()).toEqual({});
  });
});

describe("edit", () => {
  test("replaces one exact occurrence", async () => {
    const fs = new MemoryFs({ "a.ts": "const a = 1;\nconst b = 2;\n" });
    const r = await run(edit, { path: "a.ts", oldText: "b = 2", newText: "b = 3" }, fs);
    expect(r.isError).toBeUndefined();
    expect(textOf(r)).toBe("Edited a.ts at line 2");
    expect(fs.snapshot()["a.ts"]).toBe("const a = 1;\nconst b = 3;\n");
  });

  test("missing, not unique, empty oldText, missing file", async () => {
    const fs = new MemoryFs({ "a.ts": "x x y" });
    const missing = await run(edit, { path: "a.ts", oldText: "z", newText: "q" }, fs);
    expect(missing.isError).toBe(true);
    expect(textOf(missing)).toMatch(/not found in a\.ts/);
    const twice = await run(edit, { path: "a.ts", oldText: "x", newText: "q" }, fs);
    expect(twice.isError).toBe(true);
    expect(textOf(twice)).toMatch(/occurs 2 times/);
    expect((await run(edit, { path: "a.ts", oldText: "", newText: "q" }, fs)).isError).toBe(true);
    const nofile = await run(edit, { path: "b.ts", oldText: "x", newText: "q" }, fs);
    expect(nofile.isError).toBe(true);
    expect(textOf(nofile)).toBe("File not found: b.ts");
    expect(fs.snapshot()).toEqual({ "a.ts": "x x y" });
  });

  test("concurrent edits and writes on one file run one at a time", async () => {
    const fs = new MemoryFs({ "list.md": "A\nB\nC\n" });
    const results = await Promise.all([
      run(edit, { path: "list.md", oldText: "A", newText: "A1" }, fs),
      run(edit, { path: "./list.md", oldText: "B", newText: "B1" }, fs),
      run(edit, { path: "list.md", oldText: "C", newText: "C1" }, fs),
    ]);
    expect(results.map((r) => r.isError)).toEqual([undefined, undefined, undefined]);
    expect(fs.snapshot()["list.md"]).toBe("A1\nB1\nC1\n");

    const mixed = await Promise.all([
      run(write, { path: "w.md", content: "start" }, fs),
      run(edit, { path: "w.md", oldText: "start", newText: "edited" }, fs),
    ]);
    expect(mixed.map((r) => r.isError)).toEqual([undefined, undefined]);
    expect(fs.snapshot()["w.md"]).toBe("edited");
  });

  test("without the queue the same interleaving loses an update (the test is meaningful)", async () => {
    const fs = new MemoryFs({ f: "A B" });
    const naive = async (from: string, to: string) => {
      const text = await fs.read("f");
      await fs.write("f", text.replace(from, to));
    };
    await Promise.all([naive("A", "a"), naive("B", "b")]);
    expect(fs.snapshot().f).not.toBe("a b");
  });
});

describe("serializeByPath", () => {
  test("same path in order, other paths concurrently", async () => {
    const queue = serializeByPath();
    const log: string[] = [];
    let release!: () => void;
    const gate = new Promise<void>((r) => {
      release = r;
    });
    const first = queue("a", async () => {
      log.push("a1 start");
      await gate;
      log.push("a1 end");
    });
    const second = queue("./a", async () => {
      log.push("a2");
    });
    const other = queue("b", async () => {
      log.push("b");
    });
    await other;
    expect(log).toEqual(["a1 start", "b"]);
    release();
    await Promise.all([first, second]);
    expect(log).toEqual(["a1 start", "b", "a1 end", "a2"]);
  });

  test("a failure does not block the next call", async () => {
    const queue = serializeByPath();
    await expect(queue("x", () => Promise.reject(new Error("boom")))).rejects.toThrow("boom");
    await expect(queue("x", async () => 7)).resolves.toBe(7);
    await expect(queue("../x", async () => 1)).rejects.toMatchObject({ code: "invalid_path" });
  });
});

describe("sleep", () => {
  test("reports each step", async () => {
    const { api, outputs } = makeApi(new MemoryFs());
    const r = await sleep.execute({ seconds: 0.04, steps: 4 }, api);
    expect(outputs).toEqual(["step 1/4 done\n", "step 2/4 done\n", "step 3/4 done\n", "step 4/4 done\n"]);
    expect(textOf(r)).toBe("Finished the long task: 4 steps in 0.04 seconds");
  });

  test("stops when aborted", async () => {
    vi.useFakeTimers();
    try {
      const controller = new AbortController();
      const { api, outputs } = makeApi(new MemoryFs(), controller.signal);
      const running = sleep.execute({ seconds: 10, steps: 1000 }, api);
      const settled = running.then(
        () => "finished",
        (e: Error) => e.message,
      );
      await vi.advanceTimersByTimeAsync(35);
      expect(outputs).toEqual(["step 1/1000 done\n", "step 2/1000 done\n", "step 3/1000 done\n"]);
      controller.abort(new Error("cancelled"));
      expect(await settled).toBe("cancelled");
      // No step runs after the abort, however long the rest of the task would have taken.
      await vi.advanceTimersByTimeAsync(10_000);
      expect(outputs).toHaveLength(3);
    } finally {
      vi.useRealTimers();
    }
  });
});
