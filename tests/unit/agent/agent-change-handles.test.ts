/**
 * AgentChange objects are handles for their names (spec §2.2): `configure`, `createConversation`,
 * `fork` and `root` take extensions and tools by name or by object, and pi.agent stores the names
 * only; an old object of an extension installed again still selects it (the name resolves to the
 * new one); `settings.extensions` takes objects the same way. Extensions have no creation hook: a
 * new conversation holds no document of theirs, and their sections read an absent one as its default.
 * A wrapper's target object stands for its name too (spec §7.1).
 */
import { Type } from "typebox";
import { expect, test } from "vitest";
import {
  type AgentChange,
  configure,
  createRegistry,
  defineExtension,
  defineTool,
  section,
  textResult,
  wrapTool,
} from "../../../worker/index.ts";
import { echo, open } from "./fixtures.ts";

const tool = (name: string, description = `the ${name} tool`) =>
  defineTool({ name, description, parameters: Type.Object({}), execute: async () => textResult(name) });
const read = tool("read");
const edit = tool("edit");
const bash = tool("bash");
const Coding = defineExtension({ name: "coding", tools: [read, edit, bash] });
const Notes = defineExtension({ name: "notes", tools: [tool("note")] });
const Web = defineExtension({ name: "web", tools: [tool("fetch")] });

async function setup(root?: { agent?: AgentChange }) {
  const extensions = createRegistry();
  for (const e of [Coding, Notes, Web]) extensions.install(e);
  const s = await open(echo, { extensions, ...(root ? { root } : {}) });
  const ask = async (content: string) => (await s.root.submit({ type: "input", content })).wait();
  return { ...s, extensions, ask };
}

test("configure takes extension and tool objects for their names; pi.agent stores the names", async () => {
  const { h, root, faux, ask } = await setup();
  await root.configure({ extensions: [Web, "coding"], tools: { remove: [edit] } });
  expect(h.docNow(root.id, "pi.agent")).toEqual({
    extensions: ["web", "coding"],
    tools: { remove: ["edit"] },
  });
  await ask("one");
  expect(faux.requests[0]!.tools).toEqual(["fetch", "read", "bash"]);
  // The spec's example: each change replaces the whole field.
  await root.configure({ tools: { remove: [bash] } });
  expect((await root.agent()).tools.has("edit")).toBe(true);
  await root.configure({ extensions: { add: [Notes], remove: [Web] }, tools: [bash, read] });
  expect(await root.agentState()).toEqual({
    extensions: { add: ["notes"], remove: ["web"] },
    tools: ["bash", "read"],
  });
  await ask("two");
  expect(faux.requests[1]!.tools).toEqual(["bash", "read"]);
  // A name first, an object after it: every item is taken for its name (draw 32d).
  await root.configure({ extensions: ["coding", Notes], tools: { remove: ["edit", bash] } });
  expect(await root.agentState()).toEqual({
    extensions: ["coding", "notes"],
    tools: { remove: ["edit", "bash"] },
  });
  await root.configure({ extensions: { add: ["web", Notes] }, tools: ["read", bash] });
  expect(await root.agentState()).toEqual({ extensions: { add: ["web", "notes"] }, tools: ["read", "bash"] });
  await root.configure({ extensions: ["coding", Notes] });
  await root.configure({ tools: null });
  expect([...(await root.agent()).tools.keys()]).toEqual(["read", "edit", "bash", "note"]);
});

test("an old object of an extension installed again still selects it: the name resolves to the new one", async () => {
  const { root, faux, extensions, ask } = await setup();
  const OldNotes = Notes;
  await root.configure({ extensions: [OldNotes] });
  extensions.install(defineExtension({ name: "notes", tools: [tool("note", "notes, version 2")] }));
  await ask("hi");
  expect(faux.requests[0]!.tools).toEqual(["note"]);
  expect(faux.requests[0]!.declarations[0]!.description).toBe("notes, version 2");
  // Selecting with the old object again after the reinstall changes nothing stored.
  await root.configure({ extensions: [OldNotes] });
  expect((await root.agentState()).extensions).toEqual(["notes"]);
});

test("createConversation, fork, root and configure in a commit take objects too", async () => {
  // The root's agent is applied in the commit that creates it (h.root, called by the setup).
  const { h, root, ask } = await setup({ agent: { extensions: [Notes, Coding] } });
  expect(await root.agentState()).toEqual({ extensions: ["notes", "coding"] });
  const child = await h.createConversation({
    ownership: { kind: "ownerless" },
    agent: { extensions: [Coding], tools: [read] },
  });
  expect(await child.agentState()).toEqual({ extensions: ["coding"], tools: ["read"] });
  await ask("hi");
  const at = (await root.entries()).at(-1)!.id;
  const fork = await root.fork(at, {
    ownership: { kind: "ownerless" },
    agent: { extensions: { remove: [Web] } },
  });
  expect(await fork.agentState()).toEqual({ extensions: { remove: ["web"] } });
  expect((await root.agentState()).extensions).toEqual(["notes", "coding"]);
  await root.commit((tx) => configure(tx, root.id, { tools: { remove: [bash, "note"] } }));
  expect((await root.agentState()).tools).toEqual({ remove: ["bash", "note"] });
});

test("a wrapper's target object stands for its name: it wraps the tool installed under that name now", async () => {
  const extensions = createRegistry();
  extensions.install(Coding);
  const timed = (t: { description: string }) => `${t.description} (timed)`;
  extensions.install(
    defineExtension({ name: "timing", wraps: [wrapTool(bash, (t) => ({ ...t, description: timed(t) }))] }),
  );
  // The coding extension installed again with a new bash: the old bash object still names it.
  extensions.install(
    defineExtension({ name: "coding", tools: [read, edit, tool("bash", "bash, version 2")] }),
  );
  const { root, faux } = await open(echo, { extensions });
  await (await root.submit({ type: "input", content: "hi" })).wait();
  const declared = faux.requests[0]!.declarations.find((d) => d.name === "bash")!;
  expect(declared.description).toBe("bash, version 2 (timed)");
});

test("settings.extensions takes extension objects for their names", async () => {
  const extensions = createRegistry();
  for (const e of [Coding, Notes, Web]) extensions.install(e);
  const { root, faux } = await open(echo, { extensions, settings: { extensions: [Web, "notes"] } });
  await (await root.submit({ type: "input", content: "hi" })).wait();
  expect(faux.requests[0]!.tools).toEqual(["fetch", "note"]);
  // Break 29L: a name first and an object after it (a list mixing them either way).
  const mixed = await open(echo, { extensions, settings: { extensions: ["notes", Web] } });
  await (await mixed.root.submit({ type: "input", content: "hi" })).wait();
  expect(mixed.faux.requests[0]!.tools).toEqual(["note", "fetch"]);
});

test("settings.extensions is never copied: the same list edited in place between two requests, the next request follows it, objects taken for their names (draw 40d)", async () => {
  // Draw 40d, 6 (sections-0-4:121): every named test replaced the list or its settings object; the
  // names of an extension list kept per list object (a list edited in place read as it first was)
  // passed them. Spec §2.2: settings are read at every resolution and never copied.
  const extensions = createRegistry();
  for (const e of [Coding, Notes, Web]) extensions.install(e);
  const list: (string | typeof Web)[] = [Web];
  const { root, faux } = await open(echo, { extensions, settings: { extensions: list } });
  await (await root.submit({ type: "input", content: "hi" })).wait();
  expect(faux.requests[0]!.tools).toEqual(["fetch"]);
  list.push(Notes);
  await (await root.submit({ type: "input", content: "again" })).wait();
  expect(faux.requests[1]!.tools).toEqual(["fetch", "note"]);
  list.splice(0, 2, "notes");
  await (await root.submit({ type: "input", content: "once more" })).wait();
  expect(faux.requests[2]!.tools).toEqual(["note"]);
});

test("settings given as a function: extension objects in its extensions stand for their names too, at each reading (draw 36b)", async () => {
  // Draw 36b: every named test gave settings as an object; the selection's base taking the list a
  // settings function returns as given (objects left in, selecting nothing) passed them all.
  const extensions = createRegistry();
  for (const e of [Coding, Notes, Web]) extensions.install(e);
  let current: { extensions: (string | typeof Web)[] } = { extensions: ["notes", Web] };
  const { root, faux } = await open(echo, { extensions, settings: () => current });
  await (await root.submit({ type: "input", content: "hi" })).wait();
  expect(faux.requests[0]!.tools).toEqual(["note", "fetch"]);
  current = { extensions: [Web] };
  await (await root.submit({ type: "input", content: "again" })).wait();
  expect(faux.requests[1]!.tools).toEqual(["fetch"]);
});

test("settings.extensions holding an old object of an extension installed again selects the installed one", async () => {
  // The spec's own example (§7.1): settings holding an old Skills object resolve to the installed skills.
  const extensions = createRegistry();
  for (const e of [Coding, Notes, Web]) extensions.install(e);
  const OldNotes = Notes;
  const { root, faux } = await open(echo, { extensions, settings: { extensions: [OldNotes] } });
  extensions.install(defineExtension({ name: "notes", tools: [tool("memo", "notes, version 2")] }));
  await (await root.submit({ type: "input", content: "hi" })).wait();
  expect(faux.requests[0]!.tools).toEqual(["memo"]);
  expect(faux.requests[0]!.declarations[0]!.description).toBe("notes, version 2");
});

test("extensions have no creation hook: a new conversation holds none of their documents; a section reads the absent one as its default", async () => {
  const seen: unknown[] = [];
  const Counter = defineExtension({
    name: "counter",
    sections: [
      section("count", (input) => {
        const doc = input.read("counter.state") as { count: number } | undefined;
        seen.push(doc);
        return `count ${(doc ?? { count: 0 }).count}`;
      }),
    ],
  });
  const extensions = createRegistry();
  extensions.install(Counter);
  const { h, faux } = await open(echo, { extensions });
  const c = await h.createConversation({
    ownership: { kind: "ownerless" },
    agent: { extensions: [Counter] },
  });
  expect(Object.keys((await c.viewState()).docs).sort()).toEqual([
    "pi.agent",
    "pi.inbox",
    "pi.live",
    "pi.provider",
    "pi.usage",
  ]);
  await (await c.submit({ type: "input", content: "hi" })).wait();
  expect(seen).toEqual([undefined]);
  expect(faux.requests[0]!.systemPrompt).toBe("<count>\ncount 0\n</count>");
});

test("pi.agent stores only what was chosen: after runs that render an extension's section and resolve the host's default model, it holds the names and the instructions, no prompt text, no model", async () => {
  const Guide = defineExtension({
    name: "guide",
    tools: [tool("look")],
    sections: [section("guide", () => "Rendered guide text.")],
  });
  const extensions = createRegistry();
  extensions.install(Guide);
  const { h, root, faux } = await open(echo, { extensions });
  await root.configure({ extensions: [Guide], tools: [Guide.tools![0]!], instructions: "Be kind." });
  const chosen = { extensions: ["guide"], tools: ["look"], instructions: "Be kind." };
  for (const content of ["one", "two"]) {
    await (await root.submit({ type: "input", content })).wait();
    expect(h.docNow(root.id, "pi.agent")).toEqual(chosen);
  }
  expect(faux.requests[0]!.systemPrompt).toContain("Rendered guide text.");
  expect(faux.requests[0]!.systemPrompt).toContain("Be kind.");
  expect(faux.requests[0]!.tools).toEqual(["look"]);
});
