/**
 * Prompt sections and wrappers (spec §7.1, §7.4): sections render the system prompt in extension
 * order (a later same-key section replaces in place, the instructions last), tagged unless told not;
 * a value change is one minimal pi.system patch, an order change two entries (remove all, re-add in
 * order); a throwing section keeps the text shown before and is reported; wrappers decorate the
 * winning tool or section, and one that renames its target drops it.
 */

import { fauxAssistantMessage, fauxToolCall } from "@mariozechner/pi-ai";
import { Type } from "typebox";
import { expect, test } from "vitest";
import {
  type ChangeSet,
  createRegistry,
  defineExtension,
  defineTool,
  type EntryRecord,
  type Extension,
  section,
  textResult,
  wrapSection,
  wrapTool,
} from "../../../worker/index.ts";
import { callsThenAnswer, diagnosticsOf, echo, open, toolResults } from "./fixtures.ts";

type System = {
  content?: string;
  sections: Record<string, string | null>;
  toolsAdded?: string[];
  toolsRemoved?: string[];
};
const systemOf = (e: EntryRecord) => (e.model as unknown as System[])[0]!;

/** A tool named `name` that answers its name (the tests here tell tools apart by name alone). */
const tool = (name: string) =>
  defineTool({
    name,
    description: name,
    parameters: Type.Object({}),
    execute: async () => textResult(name),
  });

async function setup(list: Extension[]) {
  const extensions = createRegistry();
  for (const e of list) extensions.install(e);
  const reported: string[] = [];
  const s = await open(echo, { extensions, onReport: (e) => void reported.push((e as Error).message) });
  const ask = async (content: string) => (await s.root.submit({ type: "input", content })).wait();
  const systems = async () => (await s.root.entries()).filter((e) => e.kind === "pi.system").map(systemOf);
  return { ...s, extensions, reported, ask, systems };
}

test("sections render in extension order, a later same key in place, tagged by default, instructions last", async () => {
  const { root, faux, ask } = await setup([
    defineExtension({
      name: "a",
      sections: [
        section("role", () => "You help."),
        section("style", () => "Be terse."),
        section("none", () => undefined),
      ],
    }),
    defineExtension({
      name: "b",
      sections: [section("style", () => "Be kind.", { tag: false }), section("files", () => "f.txt")],
      // Wrappers do not apply to the instructions (spec §7.1): this one finds no target.
      wraps: [wrapSection("instructions", (s) => ({ ...s, render: () => "wrapped" }))],
    }),
  ]);
  await root.configure({ instructions: "Answer in French." });
  await ask("hi");
  // The instructions are the tagged section `instructions`, last (spec §7.1).
  expect(faux.requests[0]!.systemPrompt).toBe(
    "<role>\nYou help.\n</role>\n\nBe kind.\n\n<files>\nf.txt\n</files>\n\n<instructions>\nAnswer in French.\n</instructions>",
  );
});

test("a wrapped section keeps its place: the wrapper decorates it where the extensions put it, before the instructions", async () => {
  // Draw 37c, 3: every section wrapper of the named tests wrapped a section that was already last
  // (or alone); a wrapped section put at the end of the prompt passed them all.
  const { root, faux, ask } = await setup([
    defineExtension({
      name: "a",
      sections: [section("role", () => "You help."), section("style", () => "Be terse.")],
    }),
    defineExtension({
      name: "b",
      sections: [section("files", () => "f.txt")],
      wraps: [
        wrapSection("role", (s) => ({
          ...s,
          render: async (input, context) => `${await s.render(input, context)} Gladly.`,
        })),
      ],
    }),
  ]);
  await root.configure({ instructions: "Answer in French." });
  await ask("hi");
  expect(faux.requests[0]!.systemPrompt).toBe(
    "<role>\nYou help. Gladly.\n</role>\n\n<style>\nBe terse.\n</style>\n\n<files>\nf.txt\n</files>\n\n<instructions>\nAnswer in French.\n</instructions>",
  );
  const agent = await root.agent();
  expect(agent.sections.map((s) => s.key)).toEqual(["role", "style", "files", "instructions"]);
});

test("instructions set after a first request still come last: the next request, prepared in its creating commit, adds them after every section", async () => {
  // The first request renders in a phase of its own; the next, with the transcript at hand, in the
  // commit that creates its generation (a second rendering path): both put the instructions last.
  const { root, faux, ask } = await setup([
    defineExtension({
      name: "a",
      sections: [section("role", () => "You help."), section("files", () => "f.txt")],
    }),
    defineExtension({ name: "b", sections: [section("notes", () => "n.md")] }),
  ]);
  await root.configure({ extensions: ["a"] });
  await ask("hi");
  await root.configure({ instructions: "Answer in French." });
  await ask("again");
  // A section selected after the instructions were shown goes before them, not after (break 31B: an
  // order change taken as a plain patch appended it after the instructions, and this test passed).
  await root.configure({ extensions: ["a", "b"] });
  await ask("third");
  expect(faux.requests.map((r) => r.systemPrompt)).toEqual([
    "<role>\nYou help.\n</role>\n\n<files>\nf.txt\n</files>",
    "<role>\nYou help.\n</role>\n\n<files>\nf.txt\n</files>\n\n<instructions>\nAnswer in French.\n</instructions>",
    "<role>\nYou help.\n</role>\n\n<files>\nf.txt\n</files>\n\n<notes>\nn.md\n</notes>\n\n<instructions>\nAnswer in French.\n</instructions>",
  ]);
});

test("empty instructions are still set: the agent lists them last and both rendering paths send them tagged, like an empty section", async () => {
  // "Extension sections, then `instructions` when set" (spec §2.2): an empty string is set, as a
  // section rendering "" is kept (tagged, empty). A truthiness check left them out of both.
  const { root, faux, ask } = await setup([
    defineExtension({ name: "a", sections: [section("role", () => "You help.")] }),
  ]);
  await root.configure({ instructions: "" });
  await ask("hi");
  await ask("again");
  expect(faux.requests.map((r) => r.systemPrompt)).toEqual([
    "<role>\nYou help.\n</role>\n\n<instructions>\n\n</instructions>",
    "<role>\nYou help.\n</role>\n\n<instructions>\n\n</instructions>",
  ]);
  const agent = await root.agent();
  expect(agent.instructions).toBe("");
  expect(agent.sections.map((s) => s.key)).toEqual(["role", "instructions"]);
});

test("sections follow the selection's extension order, not install order; a later same key still replaces in place", async () => {
  const { root, faux, ask } = await setup([
    defineExtension({
      name: "a",
      sections: [section("role", () => "You help."), section("style", () => "Be terse.")],
    }),
    defineExtension({
      name: "b",
      sections: [section("style", () => "Be kind.", { tag: false }), section("files", () => "f.txt")],
    }),
  ]);
  await root.configure({ extensions: ["b", "a"], instructions: "Answer in French." });
  await ask("hi");
  // b first: its style's place, taken by a's (later in this order); then b's files, then a's role.
  expect(faux.requests[0]!.systemPrompt).toBe(
    "<style>\nBe terse.\n</style>\n\n<files>\nf.txt\n</files>\n\n<role>\nYou help.\n</role>\n\n<instructions>\nAnswer in French.\n</instructions>",
  );
});

test("a section that was shown and now renders undefined is omitted: the next preparation removes it with null; text again adds it back", async () => {
  // Reading 24a: "a section whose render returns undefined is omitted" was tried only with a section
  // that never rendered text, so keeping the shown text of one that stopped went unseen.
  let note: string | undefined = "remember";
  const { ask, faux, systems } = await setup([
    defineExtension({
      name: "a",
      sections: [section("role", () => "helper"), section("note", () => note)],
    }),
  ]);
  await ask("one");
  note = undefined;
  await ask("two");
  note = "again";
  await ask("three");
  expect(faux.requests.map((r) => r.systemPrompt)).toEqual([
    "<role>\nhelper\n</role>\n\n<note>\nremember\n</note>",
    "<role>\nhelper\n</role>",
    "<role>\nhelper\n</role>\n\n<note>\nagain\n</note>",
  ]);
  expect((await systems()).map((x) => x.sections)).toEqual([
    { role: "<role>\nhelper\n</role>", note: "<note>\nremember\n</note>" },
    { note: null },
    { note: "<note>\nagain\n</note>" },
  ]);
});

test("a tag:false section stays raw on the second rendering path too: a request prepared in its creating commit", async () => {
  // Break 29C: tag:false was seen only on the first request, which renders in a phase of its own;
  // the next request renders in the commit that creates its generation (renderSectionsNow), where
  // a section tagged regardless of tag:false passed every test.
  const { ask, faux, systems } = await setup([
    defineExtension({
      name: "a",
      sections: [section("raw", () => "Plain.", { tag: false }), section("role", () => "helper")],
    }),
  ]);
  await ask("one");
  await ask("two");
  expect(faux.requests.map((r) => r.systemPrompt)).toEqual([
    "Plain.\n\n<role>\nhelper\n</role>",
    "Plain.\n\n<role>\nhelper\n</role>",
  ]);
  expect((await systems()).map((x) => x.sections)).toEqual([
    { raw: "Plain.", role: "<role>\nhelper\n</role>" },
  ]);
});

test("a section built with tag: true is tagged like one that leaves tag out, on both rendering paths (sweep 42b)", async () => {
  // Sweep 42b, 157: the rule says tagged when tag is omitted or true; every test left it out, so a
  // section taken raw whenever it set tag at all passed them.
  const { ask, faux, systems } = await setup([
    defineExtension({
      name: "a",
      sections: [section("role", () => "helper", { tag: true }), section("files", () => "f.txt")],
    }),
  ]);
  await ask("one");
  await ask("two");
  expect(faux.requests.map((r) => r.systemPrompt)).toEqual([
    "<role>\nhelper\n</role>\n\n<files>\nf.txt\n</files>",
    "<role>\nhelper\n</role>\n\n<files>\nf.txt\n</files>",
  ]);
  expect((await systems()).map((x) => x.sections)).toEqual([
    { role: "<role>\nhelper\n</role>", files: "<files>\nf.txt\n</files>" },
  ]);
});

test("an async section that was shown and now renders undefined is omitted too: removed with null, then added back", async () => {
  // Break 29C: the shown-then-undefined case was built only with synchronous sections, whose later
  // requests render in the creating commit; an async section renders every time in the preparing
  // phase (renderSections), where keeping the shown text for undefined passed every test.
  let note: string | undefined = "remember";
  const { ask, faux, systems } = await setup([
    defineExtension({
      name: "a",
      sections: [section("role", () => "helper"), section("note", async () => note)],
    }),
  ]);
  await ask("one");
  note = undefined;
  await ask("two");
  note = "again";
  await ask("three");
  expect(faux.requests.map((r) => r.systemPrompt)).toEqual([
    "<role>\nhelper\n</role>\n\n<note>\nremember\n</note>",
    "<role>\nhelper\n</role>",
    "<role>\nhelper\n</role>\n\n<note>\nagain\n</note>",
  ]);
  expect((await systems()).map((x) => x.sections)).toEqual([
    { role: "<role>\nhelper\n</role>", note: "<note>\nremember\n</note>" },
    { note: null },
    { note: "<note>\nagain\n</note>" },
  ]);
});

test("a value change is one minimal patch; an order change appends two entries; no change appends none", async () => {
  let style = "terse";
  const a = defineExtension({ name: "a", sections: [section("role", () => "helper")] });
  const b = defineExtension({ name: "b", sections: [section("style", () => style)] });
  const { h, root, ask, systems } = await setup([a, b]);
  await ask("one");
  await ask("two");
  expect((await systems()).map((s) => s.sections)).toEqual([
    { role: "<role>\nhelper\n</role>", style: "<style>\nterse\n</style>" },
  ]);
  style = "kind";
  await ask("three");
  expect((await systems()).slice(1).map((s) => s.sections)).toEqual([{ style: "<style>\nkind\n</style>" }]);
  await root.configure({ extensions: ["b", "a"] });
  // Spec §7.4: "one commit appends two pi.system entries" (reading 24a: the commit was not read).
  const systemCommits: number[] = [];
  const stop = h.subscribe((change) => {
    const n = change.entries.filter((e) => e.kind === "pi.system").length;
    if (n > 0) systemCommits.push(n);
  });
  await ask("four");
  stop();
  expect(systemCommits).toEqual([2]);
  expect((await systems()).slice(2).map((s) => s.sections)).toEqual([
    { role: null, style: null },
    { style: "<style>\nkind\n</style>", role: "<role>\nhelper\n</role>" },
  ]);
  expect(Object.keys((await systems())[3]!.sections)).toEqual(["style", "role"]);
  // Every one written, the order change's two too, has content "": the prompt is in its sections
  // (break 29G: the order change's entries written with the sections joined as content passed).
  expect((await systems()).map((s) => s.content)).toEqual(["", "", "", ""]);
});

test("a section added between two shown ones is an order change (two entries, the prompt in the new order); removing one is a single patch", async () => {
  // break 30O: every order change swapped shown sections; one comparing only the retained sections'
  // order patched an inserted section in as if appended, and the prompt came out of order.
  const a = defineExtension({ name: "a", sections: [section("role", () => "helper")] });
  const b = defineExtension({ name: "b", sections: [section("style", () => "terse")] });
  const c = defineExtension({ name: "c", sections: [section("cwd", () => "/repo")] });
  const { root, faux, ask, systems } = await setup([a, b, c]);
  await root.configure({ extensions: ["a", "c"] });
  await ask("one");
  await root.configure({ extensions: ["a", "b", "c"] });
  await ask("two");
  expect((await systems()).slice(1).map((s) => s.sections)).toEqual([
    { role: null, cwd: null },
    { role: "<role>\nhelper\n</role>", style: "<style>\nterse\n</style>", cwd: "<cwd>\n/repo\n</cwd>" },
  ]);
  expect(faux.requests[1]?.systemPrompt).toBe(
    "<role>\nhelper\n</role>\n\n<style>\nterse\n</style>\n\n<cwd>\n/repo\n</cwd>",
  );
  // Removing the middle one keeps the others' order: one patch.
  await root.configure({ extensions: ["a", "c"] });
  await ask("three");
  expect((await systems()).slice(3).map((s) => s.sections)).toEqual([{ style: null }]);
  expect(faux.requests[2]?.systemPrompt).toBe("<role>\nhelper\n</role>\n\n<cwd>\n/repo\n</cwd>");
});

test("an order change's two pi.system entries land in the one preparing commit, which moves to request with the second as its cutoff (spec §8.3)", async () => {
  const a = defineExtension({ name: "a", sections: [section("role", () => "helper")] });
  const b = defineExtension({ name: "b", sections: [section("style", () => "terse")] });
  const { h, root, faux, ask } = await setup([a, b]);
  await ask("one");
  await root.configure({ extensions: ["b", "a"] });
  const changes: ChangeSet[] = [];
  const stop = h.subscribe((change) => changes.push(change));
  await ask("two");
  stop();
  const preparing = changes.filter((c) => c.entries.some((e) => e.kind === "pi.system"));
  expect(preparing).toHaveLength(1);
  const systems = preparing[0]!.entries.filter((e) => e.kind === "pi.system");
  expect(systems.map((e) => Object.values(systemOf(e).sections))).toEqual([
    [null, null],
    ["<style>\nterse\n</style>", "<role>\nhelper\n</role>"],
  ]);
  const generation = preparing[0]!.tasks.find((t) => t.kind === "pi.generation");
  expect(generation?.state).toMatchObject({ checkpoint: { phase: "request", cutoff: systems[1]!.id } });
  // The request carries both: the prompt in the new order.
  expect(faux.requests[1]?.systemPrompt).toBe("<style>\nterse\n</style>\n\n<role>\nhelper\n</role>");
});

test("a system message that carries only tool changes has content empty too: no sections and no text (draw 39b)", async () => {
  // Draw 39b, 5: every written system message of the named tests carried sections; a tools-only
  // delta written with its tool names as content passed them all.
  const { root, ask, systems } = await setup([
    defineExtension({ name: "a", tools: [tool("read"), tool("edit")] }),
  ]);
  await root.configure({ tools: ["read"] });
  await ask("one");
  await root.configure({ tools: ["read", "edit"] });
  await ask("two");
  const all = await systems();
  expect(all.at(-1)).toMatchObject({ sections: {}, toolsAdded: ["edit"] });
  for (const m of all) expect(m.content).toBe("");
});

test("a tool order change removes every offered tool and adds the desired ones in order; a plain addition appends", async () => {
  const { root, faux, ask, systems } = await setup([
    defineExtension({ name: "a", tools: [tool("read"), tool("edit"), tool("bash")] }),
  ]);
  await ask("one");
  const toolsOf = async (i: number) => {
    const { toolsAdded, toolsRemoved } = (await systems())[i]!;
    return { toolsAdded, toolsRemoved };
  };
  await root.configure({ tools: ["read", "bash"] });
  await ask("two");
  // Dropping a tool keeps the others in place: a removal only.
  expect(await toolsOf(1)).toEqual({ toolsAdded: undefined, toolsRemoved: ["edit"] });
  await root.configure({ tools: ["read", "bash", "edit"] });
  await ask("three");
  // Appending gives the desired order: an addition only.
  expect(await toolsOf(2)).toEqual({ toolsAdded: ["edit"], toolsRemoved: undefined });
  await root.configure({ tools: ["bash", "read", "edit"] });
  await ask("four");
  expect(await toolsOf(3)).toEqual({
    toolsAdded: ["bash", "read", "edit"],
    toolsRemoved: ["read", "bash", "edit"],
  });
  // Two additions appended in the desired order (not sorted): still an addition only (draw 38b).
  await root.configure({ tools: ["bash"] });
  await ask("five");
  expect(await toolsOf(4)).toEqual({ toolsAdded: undefined, toolsRemoved: ["read", "edit"] });
  await root.configure({ tools: ["bash", "read", "edit"] });
  await ask("six");
  expect(await toolsOf(5)).toEqual({ toolsAdded: ["read", "edit"], toolsRemoved: undefined });
  // A removal and a plain addition in one message: both are written, and the replay then matches
  // (draw 39cD: a plan that dropped the removal beside an addition passed, every request being sent
  // the desired tools).
  await root.configure({ tools: ["bash", "read"] });
  await ask("seven");
  expect(await toolsOf(6)).toEqual({ toolsAdded: undefined, toolsRemoved: ["edit"] });
  await root.configure({ tools: ["bash", "edit"] });
  await ask("eight");
  expect(await toolsOf(7)).toEqual({ toolsAdded: ["edit"], toolsRemoved: ["read"] });
  await ask("nine");
  expect(await systems()).toHaveLength(8);
  expect(faux.requests.map((r) => r.tools)).toEqual([
    ["read", "edit", "bash"],
    ["read", "bash"],
    ["read", "bash", "edit"],
    ["bash", "read", "edit"],
    ["bash"],
    ["bash", "read", "edit"],
    ["bash", "read"],
    ["bash", "edit"],
    ["bash", "edit"],
  ]);
});

test("a reorder with a removal, and an addition between retained tools, each remove every offered tool and add the desired ones in order", async () => {
  // Break 29E: the named test reordered retained tools only; a reset that kept a removed tool offered,
  // and an order check blind to where an addition goes, passed it.
  const { root, faux, ask, systems } = await setup([
    defineExtension({ name: "a", tools: [tool("read"), tool("edit"), tool("bash")] }),
  ]);
  await ask("one");
  const toolsOf = async (i: number) => {
    const { toolsAdded, toolsRemoved } = (await systems())[i]!;
    return { toolsAdded, toolsRemoved };
  };
  await root.configure({ tools: ["bash", "read"] });
  await ask("two");
  expect(await toolsOf(1)).toEqual({
    toolsAdded: ["bash", "read"],
    toolsRemoved: ["read", "edit", "bash"],
  });
  await root.configure({ tools: ["bash", "edit", "read"] });
  await ask("three");
  // Appending edit would give bash, read, edit: not the desired order.
  expect(await toolsOf(2)).toEqual({
    toolsAdded: ["bash", "edit", "read"],
    toolsRemoved: ["bash", "read"],
  });
  expect(faux.requests.map((r) => r.tools)).toEqual([
    ["read", "edit", "bash"],
    ["bash", "read"],
    ["bash", "edit", "read"],
  ]);
});

test("tool changes ride on the last planned section entry, or on an entry of their own when the sections are unchanged", async () => {
  let style = "terse";
  const { root, ask, systems } = await setup([
    defineExtension({
      name: "a",
      tools: [tool("read"), tool("edit")],
      sections: [section("role", () => "r")],
    }),
    defineExtension({ name: "b", sections: [section("style", () => style)] }),
  ]);
  await ask("one");
  expect(await systems()).toHaveLength(1);
  // Sections unchanged: the tool change is an entry of its own, with no section in it.
  await root.configure({ tools: ["read"] });
  await ask("two");
  expect((await systems()).slice(1)).toEqual([
    expect.objectContaining({ sections: {}, toolsRemoved: ["edit"] }),
  ]);
  // A value patch and a tool change: one entry carries both.
  style = "kind";
  await root.configure({ tools: null });
  await ask("three");
  expect((await systems()).slice(2)).toEqual([
    expect.objectContaining({ sections: { style: "<style>\nkind\n</style>" }, toolsAdded: ["edit"] }),
  ]);
  // An order change (two entries) and a tool change: the tools ride on the second, the last planned.
  await root.configure({ extensions: ["b", "a"], tools: ["edit"] });
  await ask("four");
  const [removal, readd] = (await systems()).slice(3);
  expect((await systems()).slice(3)).toHaveLength(2);
  expect(removal).toEqual({
    role: "system",
    content: "",
    sections: { role: null, style: null },
    timestamp: expect.any(Number),
  });
  expect(readd).toMatchObject({
    sections: { style: "<style>\nkind\n</style>", role: "<role>\nr\n</role>" },
    toolsRemoved: ["read"],
  });
  expect(readd).not.toHaveProperty("toolsAdded");
});

test("a throwing section keeps the text shown before and is reported; the request is still sent", async () => {
  let broken = false;
  const { ask, faux, reported, systems } = await setup([
    defineExtension({
      name: "a",
      sections: [
        section("clock", () => {
          if (broken) throw new Error("clock broke");
          return "noon";
        }),
        // Throws from the start: it never had text to keep, so it is left out.
        section("never", () => {
          throw new Error("never rendered");
        }),
      ],
    }),
  ]);
  await ask("one");
  expect(faux.requests[0]!.systemPrompt).toBe("<clock>\nnoon\n</clock>");
  broken = true;
  expect(await ask("two")).toMatchObject({ status: "done" });
  expect(reported).toEqual(["never rendered", "clock broke", "never rendered"]);
  expect(faux.requests[1]!.systemPrompt).toBe("<clock>\nnoon\n</clock>");
  expect(await systems()).toHaveLength(1);
  expect((await systems())[0]!.sections).toEqual({ clock: "<clock>\nnoon\n</clock>" });
});

test("a throwing section whose shown text is empty keeps that empty text: reported, the request still sent, no pi.system written, sync and async (draw 39-D)", async () => {
  // Draw 39-D: every test above kept a text with something in it; a kept text read by truthiness
  // (an empty shown text taken for none, the section removed by a new pi.system) passed them all.
  for (const mode of ["sync", "async"] as const) {
    let broken = false;
    const render = () => {
      if (broken) throw new Error("empty broke");
      return "";
    };
    const { ask, faux, reported, systems } = await setup([
      defineExtension({
        name: "a",
        sections: [
          section("empty", mode === "sync" ? render : async () => render(), { tag: false }),
          section("clock", () => "noon"),
        ],
      }),
    ]);
    await ask("one");
    expect((await systems())[0]!.sections, mode).toEqual({ empty: "", clock: "<clock>\nnoon\n</clock>" });
    broken = true;
    expect(await ask("two"), mode).toMatchObject({ status: "done" });
    expect(reported, mode).toEqual(["empty broke"]);
    expect(faux.requests, mode).toHaveLength(2);
    expect(faux.requests[1]!.systemPrompt, mode).toBe(faux.requests[0]!.systemPrompt);
    expect(await systems(), mode).toHaveLength(1);
  }
});

// Break 28R: the named test's later request renders in its creating commit; an async section, which
// renders in a phase of its own, dropping its text when it rejects passed it.
test("an async section that rejects keeps the text shown before and is reported; the request is still sent", async () => {
  let broken = false;
  const { ask, faux, reported, systems } = await setup([
    defineExtension({
      name: "a",
      sections: [
        section("clock", async () => {
          await Promise.resolve();
          if (broken) throw new Error("clock broke");
          return "noon";
        }),
      ],
    }),
  ]);
  await ask("one");
  expect(faux.requests[0]!.systemPrompt).toBe("<clock>\nnoon\n</clock>");
  broken = true;
  expect(await ask("two")).toMatchObject({ status: "done" });
  expect(reported).toEqual(["clock broke"]);
  expect(faux.requests[1]!.systemPrompt).toBe("<clock>\nnoon\n</clock>");
  expect(await systems()).toHaveLength(1);
});

test("in a fork of a fork, a throwing section keeps the text its parents showed: reported, the request sent with it, no pi.system written (draw 32b)", async () => {
  // Draw 32b: every test threw in the root; a section's kept text read from the conversation's own
  // entries only (not what its fork-aware transcript replays) passed them all.
  for (const mode of ["sync", "async"] as const) {
    let broken = false;
    const render = () => {
      if (broken) throw new Error("clock broke");
      return "noon";
    };
    const { root, faux, reported } = await setup([
      defineExtension({
        name: "a",
        sections: [section("clock", mode === "sync" ? render : async () => render())],
      }),
    ]);
    expect(await (await root.submit({ type: "input", content: "one" })).wait()).toMatchObject({
      status: "done",
    });
    expect(faux.requests[0]!.systemPrompt, mode).toBe("<clock>\nnoon\n</clock>");
    const at = (await root.entries()).at(-1)!.id;
    const ownerless = { ownership: { kind: "ownerless" as const } };
    const grandchild = await (await root.fork(at, ownerless)).fork(at, ownerless);
    broken = true;
    expect(await (await grandchild.submit({ type: "input", content: "two" })).wait(), mode).toMatchObject({
      status: "done",
    });
    expect(reported, mode).toContain("clock broke");
    expect(faux.requests[1]!.systemPrompt, mode).toBe("<clock>\nnoon\n</clock>");
    const own = (await grandchild.entries()).filter(
      (e) => e.kind === "pi.system" && e.conversationId !== root.id,
    );
    expect(own, mode).toEqual([]);
  }
});

test("a throwing section is reported with its own error: the same object, its class and fields kept, sync and async (draw 32b)", async () => {
  // Draw 32b: every test compared the reports' messages; a report of a new Error carrying only the
  // message (the section's error class and fields lost) passed them all.
  class ClockError extends Error {
    readonly code = "clock_down";
  }
  for (const mode of ["sync", "async"] as const) {
    let broken: ClockError | undefined;
    const render = () => {
      if (broken) throw broken;
      return "noon";
    };
    const extensions = createRegistry();
    extensions.install(
      defineExtension({
        name: "a",
        sections: [section("clock", mode === "sync" ? render : async () => render())],
      }),
    );
    const reported: unknown[] = [];
    const { root, faux } = await open(echo, { extensions, onReport: (e) => void reported.push(e) });
    await (await root.submit({ type: "input", content: "one" })).wait();
    broken = new ClockError("clock broke");
    expect(await (await root.submit({ type: "input", content: "two" })).wait(), mode).toMatchObject({
      status: "done",
    });
    expect(reported, mode).toEqual([broken]);
    expect(reported[0], mode).toBe(broken);
    expect(faux.requests[1]!.systemPrompt, mode).toBe("<clock>\nnoon\n</clock>");
  }
});

test("a section that throws a falsy value (undefined, null, 0, an empty string), sync or async, keeps the text shown before and is reported; the request is still sent (draw 36e-D)", async () => {
  // Draw 36e-D: every throwing section threw an Error; a failure whose thrown value is falsy taken
  // as "rendered nothing" (the section dropped from the prompt, nothing reported) passed them all.
  for (const thrown of [undefined, null, 0, ""]) {
    for (const mode of ["sync", "async"] as const) {
      const label = `${mode} ${JSON.stringify(thrown) ?? "undefined"}`;
      let broken = false;
      const render = () => {
        if (broken) throw thrown;
        return "noon";
      };
      const extensions = createRegistry();
      extensions.install(
        defineExtension({
          name: "a",
          sections: [section("clock", mode === "sync" ? render : async () => render())],
        }),
      );
      const reported: unknown[] = [];
      const { root, faux } = await open(echo, { extensions, onReport: (e) => void reported.push(e) });
      await (await root.submit({ type: "input", content: "one" })).wait();
      broken = true;
      expect(await (await root.submit({ type: "input", content: "two" })).wait(), label).toMatchObject({
        status: "done",
      });
      expect(reported, label).toEqual([thrown]);
      expect(faux.requests[1]!.systemPrompt, label).toBe("<clock>\nnoon\n</clock>");
    }
  }
});

test("wrappers decorate the winning tool and section; a wrapper that renames or throws drops its target (reported); one without a target does nothing", async () => {
  const tool = (name: string, text: string) =>
    defineTool({
      name,
      description: text,
      parameters: Type.Object({}),
      execute: async () => textResult(text),
    });
  const { h, root, faux, ask, reported } = await setup([
    defineExtension({
      name: "base",
      tools: [tool("bash", "base bash"), tool("read", "read"), tool("grep", "grep")],
      sections: [section("role", () => "r"), section("cwd", () => "/repo")],
    }),
    defineExtension({ name: "venv", tools: [tool("bash", "venv bash")] }),
    defineExtension({
      name: "timing",
      wraps: [
        wrapTool("bash", (t) => ({ ...t, description: `${t.description} (timed)` })),
        wrapTool("read", (t) => ({ ...t, name: "renamed" })),
        wrapTool("absent", (t) => t),
        wrapTool("grep", () => {
          throw new Error("grep wrapper broke");
        }),
        wrapSection("cwd", () => {
          throw new Error("cwd wrapper broke");
        }),
        wrapSection("role", (s) => ({
          ...s,
          render: async (input, ctx) => `${await s.render(input, ctx)}!`,
        })),
      ],
    }),
  ]);
  // A throwing wrapper is reported while preparing; the run goes on without its target and answers.
  expect((await ask("hi")).status).toBe("done");
  const agent = h.services.agent(root.id);
  expect(agent.tools.get("bash")?.description).toBe("venv bash (timed)");
  expect([...agent.tools.keys()]).toEqual(["bash"]);
  expect(faux.requests[0]!.tools).toEqual(["bash"]);
  expect(faux.requests[0]!.systemPrompt).toBe("<role>\nr!\n</role>");
  expect(reported.some((m) => /read.*renamed/.test(m))).toBe(true);
  expect(reported.some((m) => /grep wrapper broke/.test(m))).toBe(true);
  expect(reported.some((m) => /cwd wrapper broke/.test(m))).toBe(true);
});

test("a wrapper that returns nothing, or its target without a name, drops its target, reported: the tool and the section are gone from the request", async () => {
  // break 30O: every dropping wrapper threw or returned another name; a result with no name at all
  // (undefined, or the name left out) dropped silently or was kept, and passed.
  const { root, faux, ask, reported } = await setup([
    defineExtension({
      name: "base",
      tools: [tool("bash"), tool("read"), tool("grep")],
      sections: [section("role", () => "r"), section("cwd", () => "/repo")],
    }),
    defineExtension({
      name: "careless",
      wraps: [
        wrapTool("bash", () => undefined as never),
        wrapTool("read", (t) => ({ ...t, name: undefined as never })),
        wrapSection("cwd", (s) => ({ ...s, key: undefined as never })),
      ],
    }),
  ]);
  expect((await ask("hi")).status).toBe("done");
  expect(faux.requests[0]!.tools).toEqual(["grep"]);
  expect(faux.requests[0]!.systemPrompt).toBe("<role>\nr\n</role>");
  for (const target of ["bash", "read", "cwd"])
    expect(
      reported.some((m) => m.includes(`${target} returned`)),
      target,
    ).toBe(true);
  expect((await root.entries()).map((e) => e.kind)).toEqual(["pi.user", "pi.system", "pi.assistant"]);
});

test("a section wrapper that returns a section of another key drops its target while preparing, reported; the other sections render and the run answers", async () => {
  const { root, faux, ask, reported } = await setup([
    defineExtension({ name: "base", sections: [section("role", () => "r"), section("cwd", () => "/repo")] }),
    defineExtension({ name: "renamer", wraps: [wrapSection("cwd", (s) => ({ ...s, key: "elsewhere" }))] }),
  ]);
  expect((await ask("hi")).status).toBe("done");
  expect(faux.requests[0]!.systemPrompt).toBe("<role>\nr\n</role>");
  expect(reported.some((m) => /cwd.*elsewhere/.test(m))).toBe(true);
  expect((await root.entries()).map((e) => e.kind)).toEqual(["pi.user", "pi.system", "pi.assistant"]);
});

test("a throwing section wrapper is reported with its own error (the same object, its class kept) at every preparation, not once (draw 36e-D)", async () => {
  // Draw 36e-D: the named tests read the reports' messages after one run; a report of a new Error
  // carrying only the message passed them.
  class WrapError extends Error {
    readonly code = "wrap_down";
  }
  const broken = new WrapError("cwd wrapper broke");
  const extensions = createRegistry();
  extensions.install(
    defineExtension({ name: "base", sections: [section("role", () => "r"), section("cwd", () => "/repo")] }),
  );
  extensions.install(
    defineExtension({
      name: "breaker",
      wraps: [
        wrapSection("cwd", () => {
          throw broken;
        }),
      ],
    }),
  );
  const reported: unknown[] = [];
  const { root, faux } = await open(echo, { extensions, onReport: (e) => void reported.push(e) });
  expect(await (await root.submit({ type: "input", content: "one" })).wait()).toMatchObject({
    status: "done",
  });
  expect(reported.length).toBeGreaterThan(0);
  for (const e of reported) expect(e).toBe(broken);
  const afterFirst = reported.length;
  expect(await (await root.submit({ type: "input", content: "two" })).wait()).toMatchObject({
    status: "done",
  });
  expect(reported.length).toBeGreaterThan(afterFirst);
  for (const e of reported) expect(e).toBe(broken);
  expect(faux.requests.map((r) => r.systemPrompt)).toEqual(["<role>\nr\n</role>", "<role>\nr\n</role>"]);
});

test("wrappers apply after every selected extension's tools and sections: an earlier extension's wrapper decorates the tool and section a later one put in place", async () => {
  const tool = (name: string, text: string) =>
    defineTool({
      name,
      description: text,
      parameters: Type.Object({}),
      execute: async () => textResult(text),
    });
  const { h, root, faux, ask } = await setup([
    defineExtension({
      name: "timing",
      tools: [tool("bash", "base bash")],
      sections: [section("role", () => "base role")],
      wraps: [
        wrapTool("bash", (t) => ({ ...t, description: `${t.description} (timed)` })),
        wrapSection("role", (s) => ({
          ...s,
          render: async (input, ctx) => `${await s.render(input, ctx)}!`,
        })),
      ],
    }),
    defineExtension({
      name: "venv",
      tools: [tool("bash", "venv bash")],
      sections: [section("role", () => "venv role")],
    }),
  ]);
  expect((await ask("hi")).status).toBe("done");
  expect(h.services.agent(root.id).tools.get("bash")?.description).toBe("venv bash (timed)");
  expect(faux.requests[0]!.systemPrompt).toBe("<role>\nvenv role!\n</role>");
});

test("a call to a tool its wrapper dropped gets tool_unavailable and never runs; a wrapper without a target reports nothing", async () => {
  const ran: string[] = [];
  const grep = defineTool({
    name: "grep",
    description: "grep",
    parameters: Type.Object({}),
    execute: async () => {
      ran.push("grep");
      return textResult("found");
    },
  });
  const extensions = createRegistry();
  extensions.install(defineExtension({ name: "base", tools: [grep] }));
  extensions.install(
    defineExtension({
      name: "timing",
      wraps: [
        wrapTool("absent", (t) => t),
        // A section wrapper without a target does nothing either (break 27B: only a tool's was tried).
        wrapSection("absent-section", (s) => s),
        wrapTool("grep", () => {
          throw new Error("grep wrapper broke");
        }),
      ],
    }),
  );
  const reported: string[] = [];
  const { root, faux } = await open(callsThenAnswer(fauxToolCall("grep", {}, { id: "call-1" })), {
    extensions,
    onReport: (e) => void reported.push((e as Error).message),
  });
  expect((await (await root.submit({ type: "input", content: "go" })).wait()).status).toBe("done");
  expect(faux.requests[0]!.tools).toEqual([]);
  const [result] = await toolResults(root);
  expect(diagnosticsOf(result!).map((d) => d.code)).toEqual(["tool_unavailable"]);
  expect(ran).toEqual([]);
  expect(reported.length).toBeGreaterThan(0);
  expect(reported.every((m) => /grep wrapper broke/.test(m))).toBe(true);
  // Dropped for each resolution, and reported by each: a later run's resolution of the same agent
  // under the same registry reports again (a resolution that reported is not kept for reuse).
  const afterFirst = reported.length;
  expect((await (await root.submit({ type: "input", content: "again" })).wait()).status).toBe("done");
  expect(faux.requests.at(-1)!.tools).toEqual([]);
  expect(reported.length).toBeGreaterThan(afterFirst);
  expect(reported.every((m) => /grep wrapper broke/.test(m))).toBe(true);
});

test("a section reads committed documents of the conversation it renders for through input.read: each conversation its own, an absent one undefined", async () => {
  // Break 28M: renderers sync and async (the upstream scenario's shape) read alike, and a document
  // changed between two runs of one conversation is read anew (a read kept from the first passed).
  for (const async of [false, true]) {
    const later = <T>(value: T): T | Promise<T> => (async ? Promise.resolve(value) : value);
    const { h, root, faux, ask } = await setup([
      defineExtension({
        name: "where",
        sections: [
          section("cwd", (input) => later((input.read("app.where") as { cwd?: string } | undefined)?.cwd)),
          section("agents", (input) =>
            later(
              (input.read("app.where") as { kind?: string } | undefined)?.kind === "sub"
                ? undefined
                : "Read AGENTS.md",
            ),
          ),
          // An absent document reads as undefined, not as an empty value (break 27E: `{}` passed).
          section("seen", (input) =>
            later(input.read("app.where") === undefined ? "nothing stored" : undefined),
          ),
        ],
      }),
    ]);
    await root.commit((tx) => tx.writeDoc(root.id, "app.where", { cwd: "/repo", kind: "main" }));
    const sub = await h.createConversation({
      ownership: { kind: "ownerless" },
      init: (tx, id) => tx.writeDoc(id, "app.where", { cwd: "/sub", kind: "sub" }),
    });
    const bare = await h.createConversation({ ownership: { kind: "ownerless" } });
    await ask("one");
    await (await sub.submit({ type: "input", content: "two" })).wait();
    await (await bare.submit({ type: "input", content: "three" })).wait();
    expect(faux.requests.map((r) => r.systemPrompt)).toEqual([
      "<cwd>\n/repo\n</cwd>\n\n<agents>\nRead AGENTS.md\n</agents>",
      "<cwd>\n/sub\n</cwd>",
      "<agents>\nRead AGENTS.md\n</agents>\n\n<seen>\nnothing stored\n</seen>",
    ]);
    // A later commit changes what the next preparation reads: no value is kept from the first one.
    await root.commit((tx) => tx.writeDoc(root.id, "app.where", { cwd: "/other", kind: "main" }));
    await ask("four");
    expect(faux.requests[3]!.systemPrompt).toBe(
      "<cwd>\n/other\n</cwd>\n\n<agents>\nRead AGENTS.md\n</agents>",
    );
  }
});

test("a document a tool changes during a run is read anew through input.read by the run's next request: each preparation of one run reads what is committed then (draw 41b)", async () => {
  // Draw 41b, 4: every named test changed the document between runs of an idle conversation; reads
  // kept for the rest of a run (keyed by its inputs) passed them, and sent a stale section to the
  // requests after a tool round that changed the document.
  for (const async of [false, true]) {
    const later = <T>(value: T): T | Promise<T> => (async ? Promise.resolve(value) : value);
    const bump = defineTool({
      name: "bump",
      description: "Count one up",
      parameters: Type.Object({}),
      async execute(_args, api) {
        await api.commit((tx) => {
          const step = (tx.readDoc(api.conversationId, "app.step") as { n: number } | undefined)?.n ?? 0;
          tx.writeDoc(api.conversationId, "app.step", { n: step + 1 });
        });
        return textResult("bumped");
      },
    });
    const extensions = createRegistry();
    extensions.install(
      defineExtension({
        name: "steps",
        tools: [bump],
        sections: [
          section("step", (input) => later(String((input.read("app.step") as { n: number } | undefined)?.n))),
        ],
      }),
    );
    // Two rounds of bump, then an answer: three requests in one run.
    const { root, faux } = await open(
      (req) => {
        const results = req.messages.filter((m) => m.role === "toolResult").length;
        return results < 2
          ? fauxAssistantMessage([fauxToolCall("bump", {}, { id: `b${results}` })], { stopReason: "toolUse" })
          : fauxAssistantMessage("done");
      },
      { extensions },
    );
    await root.commit((tx) => tx.writeDoc(root.id, "app.step", { n: 0 }));
    expect((await (await root.submit({ type: "input", content: "go" })).wait()).status).toBe("done");
    expect(faux.requests.map((r) => r.systemPrompt)).toEqual([
      "<step>\n0\n</step>",
      "<step>\n1\n</step>",
      "<step>\n2\n</step>",
    ]);
  }
});

test("several wrappers of one tool or section compose in the selection's extension order, then each extension's own order, before the tools filter", async () => {
  const mark = (m: string) => wrapTool("bash", (t) => ({ ...t, description: `${t.description}+${m}` }));
  const markSection = (m: string) =>
    wrapSection("role", (s) => ({
      ...s,
      render: async (input, ctx) => `${await s.render(input, ctx)}+${m}`,
    }));
  const { h, root, faux, ask } = await setup([
    defineExtension({
      name: "base",
      tools: [tool("bash"), tool("read")],
      sections: [section("role", () => "r")],
    }),
    defineExtension({ name: "one", wraps: [mark("1a"), mark("1b"), markSection("1a"), markSection("1b")] }),
    defineExtension({ name: "two", wraps: [mark("2"), markSection("2")] }),
  ]);
  await ask("hi");
  expect(h.services.agent(root.id).tools.get("bash")?.description).toBe("bash+1a+1b+2");
  expect(faux.requests[0]!.systemPrompt).toBe("<role>\nr+1a+1b+2\n</role>");
  // Selected in another order, the extensions' wrappers apply in that order; the filter comes after.
  await root.configure({ extensions: ["base", "two", "one"], tools: ["bash"] });
  await ask("again");
  expect(h.services.agent(root.id).tools.get("bash")?.description).toBe("bash+2+1a+1b");
  expect([...h.services.agent(root.id).tools.keys()]).toEqual(["bash"]);
  expect(faux.requests.at(-1)!.systemPrompt).toBe("<role>\nr+2+1a+1b\n</role>");
});

test("only the selected extensions' wrappers apply, and they run before the tools filter: a deselected extension's wrapper decorates nothing, and a wrapper of a tool the filter then drops still runs (its throw reported)", async () => {
  const { h, root, faux, ask, reported } = await setup([
    defineExtension({
      name: "base",
      tools: [tool("bash"), tool("read")],
      sections: [section("role", () => "r")],
    }),
    defineExtension({
      name: "picked",
      wraps: [
        wrapTool("bash", (t) => ({ ...t, description: `${t.description}+picked` })),
        wrapTool("read", () => {
          throw new Error("read wrapper broke");
        }),
      ],
    }),
    defineExtension({
      name: "unpicked",
      wraps: [
        wrapTool("bash", (t) => ({ ...t, description: `${t.description}+unpicked` })),
        wrapSection("role", (s) => ({
          ...s,
          render: async (input, ctx) => `${await s.render(input, ctx)}+unpicked`,
        })),
      ],
    }),
  ]);
  await root.configure({ extensions: ["base", "picked"], tools: ["bash"] });
  expect((await ask("hi")).status).toBe("done");
  const agent = h.services.agent(root.id);
  expect(agent.extensions).toEqual(["base", "picked"]);
  expect(agent.tools.get("bash")?.description).toBe("bash+picked");
  expect([...agent.tools.keys()]).toEqual(["bash"]);
  expect(faux.requests[0]!.tools).toEqual(["bash"]);
  expect(faux.requests[0]!.systemPrompt).toBe("<role>\nr\n</role>");
  // The filter keeps only bash, but the wrappers ran first: read's throwing wrapper was reached.
  expect(reported.some((m) => /read wrapper broke/.test(m))).toBe(true);
});
