/**
 * Extensions and their registry (spec §7.1, issue 14 item 1): install validates the registry as it
 * would be and publishes nothing when invalid; a same-name install replaces in place; conversations
 * select extensions by name in pi.agent (an exact list, or add/remove) and get only their tools;
 * an uninstalled extension's pending tasks stay blocked and resume when it is installed again; open
 * refuses a registry lacking a built-in task.
 */
import { fauxAssistantMessage, fauxToolCall } from "@mariozechner/pi-ai";
import { Type } from "typebox";
import { describe, expect, test } from "vitest";
import {
  AgentHarness,
  builtinTools,
  builtinToolsExtension,
  createRegistry,
  defineExtension,
  defineTask,
  defineTool,
  type Extension,
  ExtensionInvalid,
  hook,
  type Json,
  type PromptSection,
  RegistryInvalid,
  type RegistryReader,
  SUBAGENT_TASK,
  section,
  type TaskId,
  textResult,
  wrapSection,
  wrapTool,
} from "../../../worker/index.ts";
import { deferred, fauxError, memoryStore, until } from "../../../worker/testing.ts";
import { blocked, complete, done, outcome, single } from "../core/fixtures.ts";
import { callsThenAnswer, echo, open, reopen, toolResults } from "./fixtures.ts";

const tool = (name: string, text = name) =>
  defineTool({
    name,
    description: `the ${name} tool`,
    parameters: Type.Object({}),
    execute: async () => textResult(text),
  });

const invalid = (fn: () => void) => {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(ExtensionInvalid);
    return (error as ExtensionInvalid).code;
  }
  throw new Error("install did not throw");
};

describe("the registry", () => {
  test("an invalid install throws a typed error and publishes nothing", () => {
    const registry = createRegistry();
    registry.install(
      defineExtension({ name: "base", tools: [tool("a")], tasks: [single("job", async () => {})] }),
    );
    const before = registry.snapshot();
    let published = 0;
    registry.subscribe(() => published++);
    expect(invalid(() => registry.install({ name: "x", tools: [tool("t"), tool("t")] }))).toBe(
      "duplicate_tool",
    );
    const s = section("notes", () => "n");
    expect(invalid(() => registry.install({ name: "x", sections: [s, s] }))).toBe("duplicate_section");
    // Keys match ^[a-z][a-z0-9_-]*$: each way out of it is refused, each character class in it taken.
    for (const key of ["Bad Key", "Notes", "1notes", "_notes", "-notes", "no.tes", "no tes", "notes!", ""])
      expect(
        invalid(() => registry.install({ name: "x", sections: [section(key, () => "")] })),
        key,
      ).toBe("invalid_section_key");
    expect(
      invalid(() => registry.install({ name: "x", sections: [section("instructions", () => "")] })),
    ).toBe("reserved_section_key");
    // No extension defines or replaces a built-in task, whichever; the built-ins are no extension, are
    // always there (also in an empty registry), and nothing uninstalls them.
    for (const builtin of ["pi.generation", "pi.tool", "pi.compaction"])
      expect(invalid(() => registry.install({ name: "x", tasks: [single(builtin, async () => {})] }))).toBe(
        "task_collision",
      );
    const empty = createRegistry();
    for (const r of [registry, empty]) {
      r.uninstall("pi.tool");
      expect(["pi.generation", "pi.tool", "pi.compaction"].every((n) => r.snapshot().hasTask(n))).toBe(true);
      expect(
        r
          .snapshot()
          .installed()
          .map((e) => e.name),
      ).not.toContain("pi.tool");
    }
    expect(invalid(() => registry.install({ name: "x", tasks: [single("job", async () => {})] }))).toBe(
      "task_collision",
    );
    // Draw 33 (part D, 2): no nameless extension was ever installed; an empty or missing name is refused too.
    for (const name of ["", undefined])
      expect(
        invalid(() => registry.install({ name } as unknown as Extension)),
        String(name),
      ).toBe("invalid_name");
    expect(registry.snapshot()).toBe(before);
    expect(published).toBe(0);
    // The builders check nothing: only install() does.
    expect(() =>
      defineExtension({ name: "x", sections: [section("Bad Key", () => ""), s, s] }),
    ).not.toThrow();
    // install() validates the registry as it would be after the replacement: base's own task name
    // is no collision for base installed again.
    registry.install(
      defineExtension({ name: "base", tools: [tool("a")], tasks: [single("job", async () => {})] }),
    );
    expect(published).toBe(1);
    // The same tool name and section key in two extensions are fine.
    registry.install({ name: "other", tools: [tool("a")], sections: [section("notes", () => "o")] });
    registry.install({
      name: "third",
      sections: [section("notes", () => "t"), section("a1_b-c9", () => "k")],
    });
    expect(published).toBe(3);
    expect(
      registry
        .snapshot()
        .tools()
        .map((t) => `${t.extension}:${t.tool.name}`),
    ).toEqual(["base:a", "other:a"]);
  });

  test("the harness's own pi.subagent task is built in too: an extension that defines it is refused (task_collision), and the harness keeps its own", async () => {
    // Break 31A: the collision check knew the three tasks of spec section 8 only, so an extension could
    // define pi.subagent, replace the harness's subagent task, and take it away again by an uninstall.
    const registry = createRegistry();
    const { h } = await open(echo, { extensions: registry });
    const own = h.registry.get(SUBAGENT_TASK);
    expect(own).toBeDefined();
    expect(
      invalid(() => registry.install({ name: "x", tasks: [single(SUBAGENT_TASK, async () => {})] })),
    ).toBe("task_collision");
    expect(h.registry.get(SUBAGENT_TASK)).toBe(own);
    registry.uninstall("x");
    expect(h.registry.get(SUBAGENT_TASK)).toBe(own);
    // Later in the list of an extension's tasks as well.
    expect(
      invalid(() =>
        registry.install({
          name: "y",
          tasks: [single("y-job", async () => {}), single(SUBAGENT_TASK, async () => {})],
        }),
      ),
    ).toBe("task_collision");
    expect(h.registry.get(SUBAGENT_TASK)).toBe(own);
    expect(registry.snapshot().installed()).toEqual([]);
    await h.close();
  });

  test("a reinstall is checked as a first install: a replacement with a bad, reserved or repeated section key is refused and the installed extension stays", () => {
    // Break 30N: every refused install was of a new extension; a registry that checked the sections of
    // a replacement as already checked passed.
    const registry = createRegistry();
    const notes = section("notes", () => "n");
    registry.install({ name: "x", sections: [notes] });
    const before = registry.snapshot();
    let published = 0;
    registry.subscribe(() => published++);
    expect(invalid(() => registry.install({ name: "x", sections: [notes, section("Bad", () => "")] }))).toBe(
      "invalid_section_key",
    );
    expect(
      invalid(() => registry.install({ name: "x", sections: [section("instructions", () => "")] })),
    ).toBe("reserved_section_key");
    expect(invalid(() => registry.install({ name: "x", sections: [notes, notes] }))).toBe(
      "duplicate_section",
    );
    expect(registry.snapshot()).toBe(before);
    expect(published).toBe(0);
  });

  test("a tool name or section key repeated anywhere in one extension is refused, not only next to itself; the same names across extensions install", () => {
    const registry = createRegistry();
    let published = 0;
    registry.subscribe(() => published++);
    const s = (key: string) => section(key, () => key);
    expect(
      invalid(() => registry.install({ name: "x", tools: [tool("t"), tool("u"), tool("v"), tool("t")] })),
    ).toBe("duplicate_tool");
    expect(invalid(() => registry.install({ name: "x", sections: [s("a"), s("b"), s("c"), s("a")] }))).toBe(
      "duplicate_section",
    );
    // Draw 40c (D, 5): one tool or section object given twice is its name twice, refused too (a
    // registry dropping a repeated object before its check passed: every repeated tool was two objects).
    const same = tool("t");
    expect(invalid(() => registry.install({ name: "x", tools: [same, tool("u"), same] }))).toBe(
      "duplicate_tool",
    );
    const a = s("a");
    expect(invalid(() => registry.install({ name: "x", sections: [a, s("b"), a] }))).toBe(
      "duplicate_section",
    );
    expect(published).toBe(0);
    expect(registry.snapshot().tools()).toEqual([]);
    registry.install({ name: "one", tools: [tool("t"), tool("u")], sections: [s("a"), s("b")] });
    registry.install({ name: "two", tools: [tool("u"), tool("t")], sections: [s("b"), s("a")] });
    expect(published).toBe(2);
    expect(
      registry
        .snapshot()
        .tools()
        .map((t) => `${t.extension}:${t.tool.name}`),
    ).toEqual(["one:t", "one:u", "two:u", "two:t"]);
    // Draw 34d (D, 5): tool names and section keys are two namespaces: a tool and a section of one
    // name in one extension install (a registry checking both against one set passed).
    registry.install({ name: "both", tools: [tool("notes")], sections: [s("notes")] });
    expect(published).toBe(3);
    expect(
      registry
        .snapshot()
        .extension("both")
        ?.sections?.map((x) => x.key),
    ).toEqual(["notes"]);
  });

  test("an invalid install replacing an installed extension throws, publishes nothing, and the installed one stays", () => {
    // Break 30J: every invalid install above was a new name; a replacement is validated too.
    const registry = createRegistry();
    registry.install({ name: "base", tools: [tool("a")], tasks: [single("job", async () => {})] });
    registry.install({ name: "other", tasks: [single("other-job", async () => {})] });
    const before = registry.snapshot();
    let published = 0;
    registry.subscribe(() => published++);
    expect(invalid(() => registry.install({ name: "base", tools: [tool("t"), tool("t")] }))).toBe(
      "duplicate_tool",
    );
    expect(
      invalid(() => registry.install({ name: "base", tasks: [single("other-job", async () => {})] })),
    ).toBe("task_collision");
    expect(registry.snapshot()).toBe(before);
    expect(published).toBe(0);
    expect(
      registry
        .snapshot()
        .tools()
        .map((t) => `${t.extension}:${t.tool.name}`),
    ).toEqual(["base:a"]);
  });

  test("defineExtension() and section() check nothing: every way install() refuses is built without a throw, and the object is the one given", () => {
    // Reading 24a: only a bad section key and a duplicate section were built.
    const parts = {
      name: "x",
      tools: [tool("t"), tool("t")],
      sections: [
        section("Bad Key", () => ""),
        section("instructions", () => ""),
        section("s", () => ""),
        section("s", () => ""),
      ],
      tasks: [
        single("pi.tool", async () => {}),
        single("twice", async () => {}),
        single("twice", async () => {}),
      ],
    };
    let built: Extension | undefined;
    expect(() => {
      built = defineExtension(parts);
    }).not.toThrow();
    expect(built).toBe(parts);
    expect(() => section("", () => undefined)).not.toThrow();
    // Draw 35C: nor does section() check its render or options: a section holding a render that is
    // no function builds, holding what it was given (a section() refusing one passed).
    const odd = { render: "not a function" as unknown as PromptSection["render"] };
    expect(section("k", odd.render, { tag: false })).toEqual({ key: "k", render: odd.render, tag: false });
    // install() is where they are refused.
    expect(invalid(() => createRegistry().install(built!))).toBe("duplicate_tool");
    // Draw 35C: an extension without a usable name (install's invalid_name) builds too: a
    // defineExtension refusing an empty or missing name passed, every extension here being named.
    for (const nameless of [{ name: "" }, {}, { name: 5 }] as unknown as Extension[]) {
      let made: Extension | undefined;
      expect(() => {
        made = defineExtension(nameless);
      }).not.toThrow();
      expect(made).toBe(nameless);
      expect(invalid(() => createRegistry().install(made!))).toBe("invalid_name");
    }
  });

  test("wrapTool() and wrapSection() check nothing: any name or key, built-in or reserved, builds a wrapper naming it", () => {
    // Break 26J: a wrapSection refusing the reserved or a malformed key passed every test.
    const wrap = <T>(x: T) => x;
    for (const key of ["instructions", "Bad Key", "", "s"])
      expect(wrapSection(key, wrap)).toEqual({ section: key, wrap });
    for (const name of ["pi.tool", "read", "", "Bad Name"]) {
      expect(wrapTool(name, wrap)).toEqual({ tool: name, wrap });
      expect(wrapTool({ name }, wrap)).toEqual({ tool: name, wrap });
    }
  });

  test("hook() checks nothing: any task name, built-in or not, and any handler names build a registration holding them as given", () => {
    // Break 28D: a hook() refusing a task that is not built in, or a handler name its task does not
    // ask, passed every test of the line.
    const handlers = { beforeRequest: () => undefined, noSuchHook: () => undefined };
    for (const task of ["pi.generation", "pi.tool", "pi.compaction", "app.mine", "", "Bad Name"]) {
      const registration = hook(task, handlers);
      expect(registration).toEqual({ task, handlers });
      expect(registration.handlers).toBe(handlers);
    }
    // createRegistry() takes nothing and starts empty: the built-in tasks only.
    const registry = createRegistry();
    expect(registry.snapshot().installed()).toEqual([]);
    expect(registry.snapshot().tasks()).toEqual([]);
  });

  test("task names are unique within one extension too: two tasks of one name in one extension are a collision, nothing published", () => {
    // Reading 24a: only collisions with a built-in or another installed extension were tried.
    const registry = createRegistry();
    const before = registry.snapshot();
    let published = 0;
    registry.subscribe(() => published++);
    expect(
      invalid(() =>
        registry.install({
          name: "x",
          tasks: [single("twice", async () => {}), single("twice", async () => {})],
        }),
      ),
    ).toBe("task_collision");
    expect(registry.snapshot()).toBe(before);
    expect(published).toBe(0);
    expect(registry.snapshot().hasTask("twice")).toBe(false);
    // Draw 33c: the same definition object counts once per place it is listed: twice in one extension,
    // or in a second extension, is a collision too (a registry that let an identical object through passed).
    const shared = single("shared", async () => {});
    expect(invalid(() => registry.install({ name: "x", tasks: [shared, shared] }))).toBe("task_collision");
    registry.install({ name: "holder", tasks: [shared] });
    expect(published).toBe(1);
    const holding = registry.snapshot();
    expect(invalid(() => registry.install({ name: "borrower", tasks: [shared] }))).toBe("task_collision");
    expect(registry.snapshot()).toBe(holding);
    expect(published).toBe(1);
    registry.uninstall("holder");
    expect(published).toBe(2);
    // Two distinct names in one extension are fine.
    registry.install({ name: "x", tasks: [single("one", async () => {}), single("two", async () => {})] });
    expect(published).toBe(3);
    expect(["one", "two"].every((n) => registry.snapshot().hasTask(n))).toBe(true);
  });

  test("task names are unique among the installed extensions only: an uninstalled extension's task name is free for another extension, and taken again once that one is installed", () => {
    // Draw 28c: no test installed another extension under a task name an uninstalled one had held,
    // so a registry that kept every name it ever saw taken passed.
    const registry = createRegistry();
    registry.install({ name: "first", tasks: [single("job", async () => {})] });
    expect(invalid(() => registry.install({ name: "second", tasks: [single("job", async () => {})] }))).toBe(
      "task_collision",
    );
    registry.uninstall("first");
    expect(registry.snapshot().hasTask("job")).toBe(false);
    const second = { name: "second", tasks: [single("job", async () => {})] };
    registry.install(second);
    expect(registry.snapshot().task("job")).toBe(second.tasks[0]);
    expect(invalid(() => registry.install({ name: "first", tasks: [single("job", async () => {})] }))).toBe(
      "task_collision",
    );
  });

  test("a registry's unsubscribe ends its own subscription only: called again after the listener subscribed anew, it leaves the new one alone", () => {
    // As the session's commit listeners (draw 32b, sections-0-4:421): the registry kept listeners by
    // the function, so a stale disposer called twice around a remount ended the newer subscription.
    const registry = createRegistry();
    let heard = 0;
    const listener = () => heard++;
    const first = registry.subscribe(listener);
    registry.install({ name: "a", tools: [tool("a1")] });
    first();
    const second = registry.subscribe(listener);
    first();
    registry.install({ name: "b", tools: [tool("b1")] });
    expect(heard).toBe(2);
    second();
    second();
    registry.install({ name: "c", tools: [tool("c1")] });
    expect(heard).toBe(2);
  });

  test("a same-name install replaces in place in one publication; uninstall removes; a later install appends", () => {
    const registry = createRegistry();
    for (const name of ["a", "b", "c"]) registry.install({ name, tools: [tool(`${name}1`)] });
    let published = 0;
    registry.subscribe(() => published++);
    // Synchronous: a subscriber reading the snapshot as it is called sees the new one (break 29F).
    const seen: string[][] = [];
    registry.subscribe(() =>
      seen.push(
        registry
          .snapshot()
          .tools()
          .map((t) => t.tool.name),
      ),
    );
    const old = registry.snapshot();
    registry.install({ name: "a", tools: [tool("a2")] });
    expect(published).toBe(1);
    expect(seen).toEqual([["a2", "b1", "c1"]]);
    expect(
      registry
        .snapshot()
        .installed()
        .map((e) => e.name),
    ).toEqual(["a", "b", "c"]);
    expect(
      registry
        .snapshot()
        .tools()
        .map((t) => t.tool.name),
    ).toEqual(["a2", "b1", "c1"]);
    // Earlier snapshots are immutable values: unchanged by later installs, and frozen against writes.
    expect(old.tools().map((t) => t.tool.name)).toEqual(["a1", "b1", "c1"]);
    expect(Object.isFrozen(old) && Object.isFrozen(old.installed())).toBe(true);
    expect(() => (old.installed() as Extension[]).push({ name: "z" })).toThrow(TypeError);
    expect(old.installed().map((e) => e.name)).toEqual(["a", "b", "c"]);
    // Nor through the lists it hands out: a caller's change to one is refused or its own copy (break
    // 29G: a snapshot handing out one memoized, unfrozen tools list passed the lines above).
    for (const list of [old.tools(), old.sections(), old.tasks()]) {
      try {
        (list as unknown[]).push({ extension: "z", tool: tool("z1") });
      } catch {
        // frozen: refused, which is fine too
      }
    }
    expect(old.tools().map((t) => t.tool.name)).toEqual(["a1", "b1", "c1"]);
    expect([old.sections(), old.tasks()]).toEqual([[], []]);
    registry.uninstall({ name: "a" });
    registry.install({ name: "a", tools: [tool("a3")] });
    expect(
      registry
        .snapshot()
        .installed()
        .map((e) => e.name),
    ).toEqual(["b", "c", "a"]);
    expect(published).toBe(3);
    expect(seen).toEqual([
      ["a2", "b1", "c1"],
      ["b1", "c1"],
      ["b1", "c1", "a3"],
    ]);
  });

  test("an earlier snapshot keeps its task definitions: a later install's tasks are not in it, an uninstalled one's stay", () => {
    const registry = createRegistry();
    const first = single("first-job", async () => {});
    registry.install({ name: "a", tasks: [first] });
    const old = registry.snapshot();
    registry.install({ name: "b", tasks: [single("later-job", async () => {})] });
    registry.uninstall({ name: "a" });
    // The snapshot is a value (break 27G: a task table shared by every snapshot passed the test above).
    expect(old.hasTask("later-job")).toBe(false);
    expect(old.task("later-job")).toBeUndefined();
    expect(old.tasks().map((t) => t.name)).toEqual(["first-job"]);
    expect(old.task("first-job")).toBe(first);
    const now = registry.snapshot();
    expect(now.hasTask("first-job")).toBe(false);
    expect(now.tasks().map((t) => t.name)).toEqual(["later-job"]);
  });

  test("an earlier snapshot keeps its sections and its extensions: a replacement's sections and object are not in it, an uninstalled one's stay (draw 32b)", () => {
    // Draw 32b: no test installed a section before reading an old snapshot, nor asked it for an
    // extension by name; sections (or extension()) read from the registry's latest list passed.
    const registry = createRegistry();
    const a1 = defineExtension({ name: "a", sections: [section("one", () => "1")] });
    const b = defineExtension({ name: "b", sections: [section("bee", () => "b")] });
    registry.install(a1);
    registry.install(b);
    const old = registry.snapshot();
    const a2 = defineExtension({ name: "a", sections: [section("two", () => "2")] });
    registry.install(a2);
    registry.uninstall("b");
    expect(old.sections().map((s) => [s.extension, s.section.key])).toEqual([
      ["a", "one"],
      ["b", "bee"],
    ]);
    expect(old.extension("a")).toBe(a1);
    expect(old.extension("b")).toBe(b);
    const now = registry.snapshot();
    expect(now.sections().map((s) => [s.extension, s.section.key])).toEqual([["a", "two"]]);
    expect(now.extension("a")).toBe(a2);
    expect(now.extension("b")).toBeUndefined();
  });

  test("a reinstall replaces every part of the extension at its position, and publishing calls none of its code", () => {
    const called: string[] = [];
    // Every part of an extension that holds code, each noting any call.
    const full = (v: string) =>
      defineExtension({
        name: "a",
        tools: [
          defineTool({
            name: `t${v}`,
            description: "t",
            parameters: Type.Object({}),
            execute: async () => {
              called.push("execute");
              return textResult("x");
            },
          }),
        ],
        sections: [
          section(`s${v}`, () => {
            called.push("render");
            return "s";
          }),
        ],
        hooks: [hook("pi.generation", { afterResponse: () => void called.push("hook") })],
        wraps: [
          wrapTool("t", (t) => {
            called.push("wrap");
            return t;
          }),
          wrapSection("s", (x) => {
            called.push("wrap");
            return x;
          }),
        ],
        tasks: [single(`job${v}`, async () => void called.push("phase"))],
      });
    const registry = createRegistry();
    const first = full("1");
    registry.install(first);
    registry.install({ name: "b", tools: [tool("b1")] });
    let published = 0;
    registry.subscribe(() => published++);
    const second = full("2");
    registry.install(second);
    expect(published).toBe(1);
    const now = registry.snapshot();
    expect(now.installed()).toEqual([second, expect.objectContaining({ name: "b" })]);
    expect(now.installed()[0]).toBe(second);
    expect(now.tools().map((t) => t.tool.name)).toEqual(["t2", "b1"]);
    expect(now.sections().map((x) => x.section.key)).toEqual(["s2"]);
    expect(now.tasks().map((t) => t.name)).toEqual(["job2"]);
    expect(now.task("job1")).toBeUndefined();
    registry.uninstall("a");
    registry.install(first);
    expect(published).toBe(3);
    expect(called).toEqual([]);
    // Reinstalled where it stands (now after b), with the new object's own order inside it.
    registry.install({
      name: "a",
      tools: [tool("q"), tool("p")],
      sections: [section("late", () => "l"), section("early", () => "e")],
    });
    expect(
      registry
        .snapshot()
        .tools()
        .map((t) => `${t.extension}:${t.tool.name}`),
    ).toEqual(["b:b1", "a:q", "a:p"]);
    expect(
      registry
        .snapshot()
        .sections()
        .map((x) => x.section.key),
    ).toEqual(["late", "early"]);
  });

  test("the built-in tools are an extension like any other", () => {
    const registry = createRegistry();
    registry.install(builtinToolsExtension);
    expect(
      registry
        .snapshot()
        .tools()
        .map((t) => t.tool.name),
    ).toEqual(builtinTools.map((t) => t.name));
  });
});

describe("selection in pi.agent", () => {
  const a = defineExtension({ name: "a", tools: [tool("alpha"), tool("shared", "from a")] });
  const b = defineExtension({ name: "b", tools: [tool("beta"), tool("shared", "from b")] });

  async function setup() {
    const extensions = createRegistry();
    extensions.install(a);
    extensions.install(b);
    const s = await open(echo, { extensions });
    return { ...s, extensions };
  }

  test("default: every installed extension in install order, a later same-name tool replacing in place", async () => {
    const { root, faux, h, extensions } = await setup();
    await (await root.submit({ type: "input", content: "hi" })).wait();
    expect(faux.requests[0]!.tools).toEqual(["alpha", "shared", "beta"]);
    expect(h.services.agent(root.id).tools.get("shared")).toBe(b.tools[1]);
    // Install order, not name order: one installed last whose name sorts first comes last.
    extensions.install({ name: "0-late", tools: [tool("late")] });
    expect(h.services.agent(root.id).extensions).toEqual(["a", "b", "0-late"]);
    // { add } of one already in the base keeps its first position.
    await root.configure({ extensions: { add: ["a"] } });
    expect(h.services.agent(root.id).extensions).toEqual(["a", "b", "0-late"]);
  });

  test("an exact list selects exactly those, in its order; unknown names are skipped", async () => {
    const { root, faux, h } = await setup();
    await root.configure({ extensions: ["b", "ghost", "a", "b"] });
    await (await root.submit({ type: "input", content: "hi" })).wait();
    expect(h.services.agent(root.id).extensions).toEqual(["b", "a"]);
    expect(faux.requests[0]!.tools).toEqual(["beta", "shared", "alpha"]);
    expect(h.services.agent(root.id).tools.get("shared")).toBe(a.tools[1]);
    // An empty list is exact too: no extension at all, not the default (break 30M: an empty array
    // taken as no selection passed).
    await root.configure({ extensions: [] });
    expect(h.services.agent(root.id).extensions).toEqual([]);
    expect([...h.services.agent(root.id).tools.keys()]).toEqual([]);
  });

  test("{ add, remove } edits the default; the tools filter keeps or drops names", async () => {
    const { root, h, extensions } = await setup();
    extensions.install({ name: "c", tools: [tool("gamma")] });
    await root.configure({ extensions: { remove: ["a"] } });
    expect(h.services.agent(root.id).extensions).toEqual(["b", "c"]);
    await root.configure({ extensions: { remove: ["c"], add: ["c"] } });
    expect(h.services.agent(root.id).extensions).toEqual(["a", "b"]);
    // An edit applies to the host default, never to a selection stored before it (an array here).
    await root.configure({ extensions: ["b"] });
    await root.configure({ extensions: { add: ["c"] } });
    expect(h.services.agent(root.id).extensions).toEqual(["a", "b", "c"]);
    await root.configure({ extensions: null, tools: { remove: ["beta"] } });
    expect([...h.services.agent(root.id).tools.keys()]).toEqual(["alpha", "shared", "gamma"]);
    await root.configure({ tools: ["gamma", "alpha", "gamma"] });
    expect([...h.services.agent(root.id).tools.keys()]).toEqual(["gamma", "alpha"]);
  });

  test("a tools array filters only the selected extensions' tools: a name of an installed, unselected extension's tool is not offered", async () => {
    // Sweep 42c, 12: every named test's tools array named tools of selected extensions only; an
    // array taking an unselected extension's tool from the registry passed them all.
    const { root, h, faux } = await setup();
    await root.configure({ extensions: ["b"], tools: ["alpha", "beta"] });
    expect([...h.services.agent(root.id).tools.keys()]).toEqual(["beta"]);
    await (await root.submit({ type: "input", content: "hi" })).wait();
    expect(faux.requests[0]!.tools).toEqual(["beta"]);
    // Selected again, the same stored array offers it, in the array's order.
    await root.configure({ extensions: ["a", "b"] });
    expect([...h.services.agent(root.id).tools.keys()]).toEqual(["alpha", "beta"]);
  });

  test("settings.extensions is the default selection's base: { add, remove } edits it, an exact list ignores it", async () => {
    const extensions = createRegistry();
    extensions.install(a);
    extensions.install(b);
    extensions.install({ name: "c", tools: [tool("gamma")] });
    let base: string[] | undefined = ["c", "ghost", "b"];
    const { root, h, faux } = await open(echo, {
      extensions,
      settings: () => (base ? { extensions: base } : {}),
    });
    expect(h.services.agent(root.id).extensions).toEqual(["c", "b"]);
    await (await root.submit({ type: "input", content: "hi" })).wait();
    expect(faux.requests[0]!.tools).toEqual(["gamma", "beta", "shared"]);
    await root.configure({ extensions: { add: ["a"], remove: ["c"] } });
    expect(h.services.agent(root.id).extensions).toEqual(["b", "a"]);
    await root.configure({ extensions: ["a"] });
    expect(h.services.agent(root.id).extensions).toEqual(["a"]);
    // A settings change takes effect at the next resolution; without the setting, every installed one.
    await root.configure({ extensions: null });
    base = undefined;
    expect(h.services.agent(root.id).extensions).toEqual(["a", "b", "c"]);
    await expect(
      AgentHarness.open(await memoryStore(), { extensions, settings: { extensions: "a" as never } }),
    ).rejects.toThrow("settings.extensions must be a list of extension names");
  });

  test("duplicates keep their first position in every list: a settings.extensions base repeating a name, an add repeating one, and an add naming one already in the base", async () => {
    // Sweep 42, 151: every named test's base and add held each name once; duplicates removed in
    // the exact list only (and an add's names already in the base) passed them all.
    const extensions = createRegistry();
    extensions.install(a);
    extensions.install(b);
    extensions.install({ name: "c", tools: [tool("gamma")] });
    const { root, h, faux } = await open(echo, { extensions, settings: { extensions: ["b", "a", "b"] } });
    expect(h.services.agent(root.id).extensions).toEqual(["b", "a"]);
    await (await root.submit({ type: "input", content: "hi" })).wait();
    expect(faux.requests[0]!.tools).toEqual(["beta", "shared", "alpha"]);
    await root.configure({ extensions: { add: ["c", "ghost", "c", "a"] } });
    expect(h.services.agent(root.id).extensions).toEqual(["b", "a", "c"]);
    expect((await root.agent()).extensions).toEqual(["b", "a", "c"]);
  });

  test("a settings.extensions list edited in place is read at the next resolution: a name pushed after a run reaches the next request (sweep 42)", async () => {
    // Sweep 42, 151: contrary: every phase's view was kept while the base was the same array
    // object, so a host's list edited in place went unseen until the pi.agent or registry changed.
    const extensions = createRegistry();
    extensions.install(a);
    extensions.install(b);
    const names = ["a"];
    const { root, h, faux } = await open(echo, { extensions, settings: { extensions: names } });
    await (await root.submit({ type: "input", content: "hi" })).wait();
    names.push("b");
    await (await root.submit({ type: "input", content: "again" })).wait();
    expect(faux.requests[0]!.tools).toEqual(["alpha", "shared"]);
    expect(faux.requests[1]!.tools).toEqual(["alpha", "shared", "beta"]);
    names.splice(0, 1);
    await (await root.submit({ type: "input", content: "once more" })).wait();
    expect(faux.requests[2]!.tools).toEqual(["beta", "shared"]);
    expect(h.services.agent(root.id).extensions).toEqual(["b"]);
  });

  test("an empty settings.extensions is an empty base, not an absent one: nothing is selected by default, and { add } edits the empty list", async () => {
    // Draw 37c, 13: every named test's base held names; an empty list read as no setting (every
    // installed extension selected) passed them all.
    const extensions = createRegistry();
    extensions.install(a);
    extensions.install(b);
    const { root, h, faux } = await open(echo, { extensions, settings: { extensions: [] } });
    expect(h.services.agent(root.id).extensions).toEqual([]);
    expect((await root.agent()).extensions).toEqual([]);
    await (await root.submit({ type: "input", content: "hi" })).wait();
    expect(faux.requests[0]!.tools ?? []).toEqual([]);
    await root.configure({ extensions: { add: ["b"] } });
    expect(h.services.agent(root.id).extensions).toEqual(["b"]);
  });

  test("pi.agent stores names, never code; an uninstalled extension's conversations stop getting it", async () => {
    const { root, faux, h, extensions, store } = await setup();
    await root.configure({ extensions: ["a", "b"] });
    expect(h.docNow(root.id, "pi.agent")).toEqual({ extensions: ["a", "b"] });
    await (await root.submit({ type: "input", content: "one" })).wait();
    // Installs make no commit and publish nothing to the conversation's watchers.
    const commits = store.stats.commits;
    const watch = await root.watch();
    const frames: unknown[] = [];
    watch.start((frame) => void frames.push(frame));
    // Publications too (break 28D: commits grouped into one store transaction with ours count once).
    const published: unknown[] = [];
    const stop = h.subscribe((change) => void published.push(change));
    extensions.uninstall("b");
    extensions.install({ name: "d", tools: [tool("delta")] });
    extensions.install({ name: "d", tools: [tool("delta2")] });
    extensions.uninstall("d");
    // A commit of ours after them: anything they had asked for would be on the line before it.
    await h.transaction((tx) => tx.writeDoc(root.id, "app.marker", { n: 1 }));
    expect(store.stats.commits).toBe(commits + 1);
    expect(published).toHaveLength(1);
    stop();
    await expect.poll(() => frames.length).toBe(1);
    expect(frames).toEqual([
      expect.objectContaining({ ops: [{ op: "doc", name: "app.marker", value: { n: 1 } }] }),
    ]);
    await watch.stop();
    await (await root.submit({ type: "input", content: "two" })).wait();
    expect(faux.requests[1]!.tools).toEqual(["alpha", "shared"]);
    // The registry's movement reached the transcript at that preparation, as one pi.system delta.
    const systems = (await root.entries()).filter((e) => e.kind === "pi.system");
    expect(systems).toHaveLength(2);
    expect(systems[1]!.model).toEqual([
      expect.objectContaining({ role: "system", content: "", sections: {}, toolsRemoved: ["beta"] }),
    ]);
    expect((systems[1]!.model as unknown as object[])[0]).not.toHaveProperty("toolsAdded");
    // The stored selection is untouched; reinstalling brings it back.
    expect(h.docNow(root.id, "pi.agent")).toEqual({ extensions: ["a", "b"] });
    extensions.install(b);
    await (await root.submit({ type: "input", content: "three" })).wait();
    expect(faux.requests[2]!.tools).toEqual(["alpha", "shared", "beta"]);
  });

  test("a fork replays its parent's offered tools: one uninstalled before the child's first preparation is listed in the child's toolsRemoved, and re-added when it resolves again (draw 32b)", async () => {
    // Draw 32b: a preparation that replayed only the conversation's own pi.system entries passed the
    // test above, whose conversation is the root: a fork's first delta then added every tool again
    // and never removed the one its parent offered that no longer resolves.
    const { root, faux, extensions } = await setup();
    await (await root.submit({ type: "input", content: "one" })).wait();
    expect(faux.requests[0]!.tools).toEqual(["alpha", "shared", "beta"]);
    const at = (await root.entries()).at(-1)!.id;
    const child = await root.fork(at, { ownership: { kind: "ownerless" } });
    extensions.uninstall("b");
    await (await child.submit({ type: "input", content: "two" })).wait();
    expect(faux.requests[1]!.tools).toEqual(["alpha", "shared"]);
    const own = async () =>
      (await child.entries()).filter((e) => e.kind === "pi.system" && e.conversationId === child.id);
    const first = await own();
    expect(first).toHaveLength(1);
    expect(first[0]!.model).toEqual([
      expect.objectContaining({ role: "system", content: "", sections: {}, toolsRemoved: ["beta"] }),
    ]);
    expect((first[0]!.model as unknown as object[])[0]).not.toHaveProperty("toolsAdded");
    extensions.install(b);
    await (await child.submit({ type: "input", content: "three" })).wait();
    expect(faux.requests[2]!.tools).toEqual(["alpha", "shared", "beta"]);
    const second = await own();
    expect(second).toHaveLength(2);
    expect(second[1]!.model).toEqual([expect.objectContaining({ toolsAdded: ["beta"] })]);
    expect((second[1]!.model as unknown as object[])[0]).not.toHaveProperty("toolsRemoved");
  });

  test("installs and uninstalls while a run is live make no commit either", async () => {
    // Break 28D: the installs above land on an idle conversation; an engine committing for a busy
    // one on a publication passed.
    const gate = deferred();
    const extensions = createRegistry();
    extensions.install(a);
    extensions.install(b);
    const { h, root, faux } = await open(
      async (req, n) => {
        if (n === 1) await gate.promise;
        return echo(req, n);
      },
      { extensions },
    );
    const input = await root.submit({ type: "input", content: "one" });
    await until(() => faux.requests.length === 1, { what: "the run's request" });
    expect(root.busy).toBe(true);
    // Counted as publications: commits grouped into one store transaction are told apart.
    const published: unknown[] = [];
    const stop = h.subscribe((change) => void published.push(change));
    extensions.uninstall("b");
    extensions.install({ name: "d", tools: [tool("delta")] });
    extensions.install(b);
    extensions.uninstall("d");
    // An extension that carries a task definition, installed, reinstalled and uninstalled (draw 41c:
    // every install above carried tools and sections only; a harness committing when a publication
    // registers a task definition passed).
    extensions.install({ name: "e", tools: [tool("epsilon")], tasks: [single("e.job", async () => {})] });
    extensions.install({ name: "e", tasks: [single("e.job", async () => {})] });
    extensions.uninstall("e");
    await h.transaction((tx) => tx.writeDoc(root.id, "app.marker", { n: 1 }));
    expect(published).toHaveLength(1);
    stop();
    gate.resolve();
    expect((await input.wait()).status).toBe("done");
  });

  test("a tool's app metadata never reaches the provider or the transcript: only name, description and parameters", async () => {
    const { root, faux, extensions } = await setup();
    // App metadata on a tool (spec §7.1): fields the registry does not check.
    const withMeta = {
      ...tool("meta"),
      label: "Meta",
      icon: "wrench-icon",
      category: { group: "files-group" },
    };
    extensions.install({ name: "c", tools: [withMeta] });
    await (await root.submit({ type: "input", content: "hi" })).wait();
    const declared = faux.requests[0]!.declarations.find((d) => d.name === "meta");
    expect(declared).toEqual({ name: "meta", description: "the meta tool", parameters: withMeta.parameters });
    const stored = JSON.stringify(await root.entries());
    expect(stored).toContain('"meta"');
    for (const field of ["Meta", "wrench-icon", "files-group"]) expect(stored).not.toContain(field);
    // Break 28M: called, not only offered: its call, its result and the tool task's record keep none
    // of it either.
    const called = createRegistry();
    called.install({ name: "c", tools: [withMeta] });
    const run = await open(callsThenAnswer(fauxToolCall("meta", {}, { id: "m1" })), { extensions: called });
    expect(await (await run.root.submit({ type: "input", content: "go" })).wait()).toMatchObject({
      status: "done",
    });
    const entries = await run.root.entries();
    expect(await toolResults(run.root)).toHaveLength(1);
    const kept = JSON.stringify([entries, await run.h.tasks({ kind: "pi.tool" })]);
    expect(kept).toContain('"meta"');
    for (const field of ["Meta", "wrench-icon", "files-group"]) expect(kept).not.toContain(field);
  });

  test("two conversations with different selections are offered different tools", async () => {
    const { root, faux, h } = await setup();
    await root.configure({ extensions: ["a"] });
    const other = await h.createConversation({
      ownership: { kind: "ownerless" },
      agent: { extensions: ["b"] },
    });
    await (await root.submit({ type: "input", content: "one" })).wait();
    await (await other.submit({ type: "input", content: "two" })).wait();
    expect(faux.requests.map((r) => r.tools)).toEqual([
      ["alpha", "shared"],
      ["beta", "shared"],
    ]);
  });
});

describe("extension tasks", () => {
  test("an uninstalled extension's pending task stays blocked (inspect shows it) and resumes when reinstalled", async () => {
    const job = single("ext.job", async (_t, runtime) => {
      await runtime.commit(() => complete("ran"));
    });
    const jobs: Extension = { name: "jobs", tasks: [job] };
    const extensions = createRegistry();
    extensions.install(jobs);
    const { h } = await open(echo, { extensions });
    extensions.uninstall(jobs);
    const id = await h.createTask(job, null, { ownership: { kind: "conversation" } });
    await until(() => blocked(h).some((b) => b.id === id), { what: "job blocked" });
    expect(blocked(h)).toEqual([{ id, kind: "ext.job", reason: "missing_task" }]);
    expect((await h.getTask(id))?.state.status).toBe("pending");
    extensions.install(jobs);
    expect(outcome(await done(h, id))).toEqual({ status: "completed", result: "ran" });
    expect(blocked(h)).toEqual([]);
  });

  test("an uninstalled extension defining two tasks: the pending tasks of both stay blocked, and both resume when reinstalled (draw 35D)", async () => {
    // Draw 35D: the named tests' extensions define one task each; an uninstall that unregistered only
    // the first of an extension's task definitions passed them.
    const first = single(
      "ext.first",
      async (_t, runtime) => void (await runtime.commit(() => complete("one"))),
    );
    const second = single(
      "ext.second",
      async (_t, runtime) => void (await runtime.commit(() => complete("two"))),
    );
    const jobs: Extension = { name: "jobs", tasks: [first, second] };
    const extensions = createRegistry();
    extensions.install(jobs);
    const { h } = await open(echo, { extensions });
    extensions.uninstall(jobs);
    const a = await h.createTask(first, null, { ownership: { kind: "conversation" } });
    const b = await h.createTask(second, null, { ownership: { kind: "conversation" } });
    await until(() => blocked(h).length === 2, { what: "both blocked" });
    expect(blocked(h)).toEqual([
      { id: a, kind: "ext.first", reason: "missing_task" },
      { id: b, kind: "ext.second", reason: "missing_task" },
    ]);
    expect((await h.getTask(b))?.state.status).toBe("pending");
    extensions.install(jobs);
    expect(outcome(await done(h, a))).toEqual({ status: "completed", result: "one" });
    expect(outcome(await done(h, b))).toEqual({ status: "completed", result: "two" });
    expect(blocked(h)).toEqual([]);
  });

  test("an uninstalled extension's task that was already waiting stays blocked once its wait ends, and resumes when reinstalled", async () => {
    // Break 30P: the test above creates its task after the uninstall, pending; a blocked waiting task
    // written back to pending (its wait lost) passed it.
    const gate = deferred();
    const gateTask = single("gate", async (_t, runtime) => {
      await gate.promise;
      await runtime.commit(() => complete("opened"));
    });
    type Join = { phase: "go" } | { phase: "joined" };
    const waiter = defineTask<Json, Join, Json>({
      name: "ext.waiter",
      version: 1,
      initial: () => ({ phase: "go" }),
      phases: {
        go: async (t, runtime) =>
          void (await runtime.commit(() => ({
            status: "waiting",
            checkpoint: { phase: "joined" },
            on: [t.input as TaskId],
            policy: "allSettled",
          }))),
        joined: async (_t, runtime) => void (await runtime.commit(() => complete("joined"))),
      },
      abort: async (_t, runtime) =>
        void (await runtime.commit(() => ({ status: "terminal", outcome: { status: "aborted" } }))),
    });
    const waiters: Extension = { name: "waiters", tasks: [waiter] };
    const extensions = createRegistry();
    extensions.install(waiters);
    const { h } = await open(echo, { extensions });
    const gateId = await h.createTask(gateTask, null, { ownership: { kind: "conversation" } });
    const id = await h.createTask(waiter, gateId, { ownership: { kind: "conversation" } });
    await until(() => h.inspect().tasks.some((t) => t.record.id === id && t.state.kind === "waiting"), {
      what: "waiter waiting",
    });
    const before = await h.getTask(id);
    extensions.uninstall(waiters);
    gate.resolve();
    expect(outcome(await done(h, gateId))).toEqual({ status: "completed", result: "opened" });
    // Draw 40c (D, 19): the uninstall wrote nothing to the task (an engine abort-marking an uninstalled
    // extension's live tasks passed every named test, whose installs carried no task): its record is
    // the one before the uninstall, waiting, no abort mark.
    expect(await h.getTask(id)).toEqual(before);
    await until(() => blocked(h).some((b) => b.id === id), { what: "waiter blocked" });
    expect(blocked(h)).toEqual([{ id, kind: "ext.waiter", reason: "missing_task" }]);
    expect((await h.getTask(id))?.state.status).toBe("waiting");
    extensions.install(waiters);
    expect(outcome(await done(h, id))).toEqual({ status: "completed", result: "joined" });
    expect(blocked(h)).toEqual([]);
  });
});

describe("Harness.open binds the registry", () => {
  test("open refuses a registry whose snapshot lacks a built-in task definition", async () => {
    const real = createRegistry();
    const store = await memoryStore();
    const prepared: string[] = [];
    // Each built-in task, lacking alone, is refused by name, before any harness starts (no prepare).
    for (const builtin of ["pi.generation", "pi.tool", "pi.compaction"]) {
      const lacking: RegistryReader = {
        subscribe: (l) => real.subscribe(l),
        snapshot: () => ({ ...real.snapshot(), hasTask: (name: string) => name !== builtin }),
      };
      const refused = await AgentHarness.open(store, {
        extensions: lacking as ReturnType<typeof createRegistry>,
        prepare: () => {
          prepared.push(builtin);
        },
      }).catch((e: unknown) => e);
      expect(refused, builtin).toBeInstanceOf(RegistryInvalid);
      expect((refused as Error).message).toContain(builtin);
    }
    expect(prepared).toEqual([]);
  });

  test("a reopen over live work refuses a registry lacking a built-in task too, before the recovered task runs", async () => {
    // Draw 36D: a check made only when the store held no conversation or task yet (its first open)
    // passed the test above, whose store is always fresh.
    const { h, root, faux, store } = await open(
      (req, n) => (n === 1 ? fauxError("503 Service Unavailable") : echo(req, n)),
      { settings: { retry: { baseDelayMs: 60_000, maxDelayMs: 60_000 } } },
    );
    await root.submit({ type: "input", content: "hi" });
    await until(
      () =>
        h
          .inspect()
          .tasks.some(
            (t) =>
              t.record.kind === "pi.generation" &&
              (t.record.state as { checkpoint?: { phase?: string } }).checkpoint?.phase === "retry",
          ),
      { what: "the backoff" },
    );
    await h.close();
    const real = createRegistry();
    for (const builtin of ["pi.generation", "pi.tool", "pi.compaction"]) {
      const lacking: RegistryReader = {
        subscribe: (l) => real.subscribe(l),
        snapshot: () => ({ ...real.snapshot(), hasTask: (name: string) => name !== builtin }),
      };
      const refused = await reopen(store, {
        models: faux.models,
        defaultModel: faux.ref,
        now: () => Date.now() + 120_000, // past the backoff: a recovered retry would be sent at once
        extensions: lacking as ReturnType<typeof createRegistry>,
      }).catch((e: unknown) => e);
      expect(refused, builtin).toBeInstanceOf(RegistryInvalid);
      expect((refused as Error).message).toContain(builtin);
    }
    expect(faux.requests).toHaveLength(1);
  });

  test("a registry of another make listing a task under a built-in name is refused at open, and one listed later never replaces the built-in", async () => {
    // Draw 34d (D, 18): only createRegistry's install checked task names against the built-ins; a reader
    // of another make listing pi.tool (or pi.subagent) had its definition registered over the harness's own.
    const real = createRegistry();
    const store = await memoryStore();
    for (const builtin of ["pi.generation", "pi.tool", "pi.compaction", SUBAGENT_TASK]) {
      const claimed = single(builtin, async () => {});
      const claiming: RegistryReader = {
        subscribe: (l) => real.subscribe(l),
        snapshot: () => ({
          ...real.snapshot(),
          tasks: () => [claimed],
          task: (name: string) => (name === builtin ? claimed : undefined),
        }),
      };
      const refused = await AgentHarness.open(store, {
        extensions: claiming as ReturnType<typeof createRegistry>,
      }).catch((e: unknown) => e);
      expect(refused, builtin).toBeInstanceOf(RegistryInvalid);
      expect((refused as Error).message).toContain(builtin);
    }
    // A reader that lists one only after open: the harness keeps its own definition.
    let late: ReturnType<typeof single> | undefined;
    const reader: RegistryReader = {
      subscribe: (l) => real.subscribe(l),
      snapshot: () => ({
        ...real.snapshot(),
        tasks: () => (late ? [late] : []),
        task: (name: string) => (late && name === late.name ? late : undefined),
      }),
    };
    const { h } = await open(echo, { store, extensions: reader as ReturnType<typeof createRegistry> });
    const own = h.registry.get("pi.tool");
    late = single("pi.tool", async () => {});
    real.install({ name: "nudge" });
    expect(h.registry.get("pi.tool")).toBe(own);
    await h.close();
  });

  test("the registry is the application's: open binds it as given, it outlives a closed harness and serves the next open; nothing of it is stored", async () => {
    const registry = createRegistry();
    registry.install(defineExtension({ name: "notes", tools: [tool("note")] }));
    const store = await memoryStore();
    const first = await open(echo, { store, extensions: registry });
    expect(first.h.extensions).toBe(registry);
    // Installed by the application after open: the bound registry is the one it holds.
    registry.install(defineExtension({ name: "later", tools: [tool("late")] }));
    expect([...(await first.root.agent()).tools.keys()]).toEqual(["note", "late"]);
    // Bound, not read once: a task installed while the harness is open reaches its task registry
    // (draw 34b: a harness that never subscribed to the registry passed the rest of this test).
    registry.install(defineExtension({ name: "while-open", tasks: [single("open-job", async () => {})] }));
    expect(first.h.registry.has("open-job")).toBe(true);
    registry.uninstall("while-open");
    expect(first.h.registry.has("open-job")).toBe(false);
    await first.h.close();
    // Outlived: an install after the close reaches the next harness only; the closed one let go of it.
    registry.install(defineExtension({ name: "after", tasks: [single("after-job", async () => {})] }));
    expect(first.h.registry.has("after-job")).toBe(false);
    registry.uninstall("after");
    const second = await open(echo, { store: await memoryStore(store.image()), extensions: registry });
    expect(second.h.extensions).toBe(registry);
    expect([...(await second.root.agent()).tools.keys()]).toEqual(["note", "late"]);
    await second.h.close();
    // Not persisted: the same stored data opened with a new registry knows none of it.
    const third = await open(echo, {
      store: await memoryStore(second.store.image()),
      extensions: createRegistry(),
    });
    expect([...(await third.root.agent()).tools.keys()]).toEqual([]);
    expect(third.h.extensions.snapshot().extension("notes")).toBeUndefined();
  });

  test("an application registry still empty at open is bound as given: what it installs later reaches the harness (draw 39c)", async () => {
    // Draw 39c: an empty registry taken for no registry (a fresh one bound instead) passed the test
    // above, whose registry holds an extension before open.
    const registry = createRegistry();
    const { h, root } = await open(echo, { extensions: registry });
    expect(h.extensions).toBe(registry);
    registry.install(
      defineExtension({ name: "later", tools: [tool("late")], tasks: [single("late-job", async () => {})] }),
    );
    expect([...(await root.agent()).tools.keys()]).toEqual(["late"]);
    expect(h.registry.has("late-job")).toBe(true);
  });

  test("a harness opened without a registry gets one of its own: two such harnesses share no extension, and neither outlives into the next (draw 39-D)", async () => {
    // Draw 39-D: a process-wide default registry (shared by every open given none) passed the test
    // above, which always passes one; the registry is the application's, never the process's.
    const first = await open(echo, { tools: [tool("first-only")] });
    const second = await open(echo, { tools: [tool("second-only")] });
    expect(second.h.extensions).not.toBe(first.h.extensions);
    expect(
      first.h.extensions
        .snapshot()
        .tools()
        .map((t) => t.tool.name),
    ).toEqual(["first-only"]);
    expect(
      second.h.extensions
        .snapshot()
        .tools()
        .map((t) => t.tool.name),
    ).toEqual(["second-only"]);
    first.h.extensions.install(defineExtension({ name: "mine", tools: [tool("mine")] }));
    expect(second.h.extensions.snapshot().extension("mine")).toBeUndefined();
    await first.h.close();
    const third = await AgentHarness.open(await memoryStore());
    expect(third.extensions).not.toBe(first.h.extensions);
    expect(third.extensions.snapshot().installed()).toEqual([]);
    await third.close();
  });

  test("the tools option is shorthand for an extension of the harness's registry", async () => {
    const { h } = await open(() => fauxAssistantMessage("ok"), { tools: [tool("x")] });
    expect(
      h.extensions
        .snapshot()
        .installed()
        .map((e) => e.name),
    ).toEqual(["harness-options"]);
    h.registerTools(tool("y"));
    expect(
      h.extensions
        .snapshot()
        .tools()
        .map((t) => t.tool.name),
    ).toEqual(["x", "y"]);
  });

  test("registerTools replaces the harness-options extension in place, in one publication: an extension installed after it stays after it (draw 35D)", async () => {
    // Draw 35D: the test above has no other extension; registerTools moving harness-options to the
    // end (an uninstall and an install) passed it.
    const extensions = createRegistry();
    extensions.install({ name: "a", tools: [tool("a1")] });
    const { h } = await open(() => fauxAssistantMessage("ok"), { tools: [tool("x")], extensions });
    extensions.install({ name: "b", tools: [tool("b1")] });
    let published = 0;
    extensions.subscribe(() => published++);
    h.registerTools(tool("y"));
    expect(published).toBe(1);
    const now = extensions.snapshot();
    expect(now.installed().map((e) => e.name)).toEqual(["a", "harness-options", "b"]);
    expect(now.tools().map((t) => t.tool.name)).toEqual(["a1", "x", "y", "b1"]);
  });
});
