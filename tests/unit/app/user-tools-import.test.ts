/**
 * User tools carried by conversation files (issue 14 item 6): an export carries the user tools its
 * conversation selects (sources, never a key), an import checks and adds the ones the store lacks.
 * A tool that arrives by import is opt-in: importing someone's file must not add code to every
 * conversation. It is selected by name in the imported conversation alone, shown as imported, and
 * enabled per conversation or everywhere (which clears the mark).
 */
import { Type } from "typebox";
import { describe, expect, test } from "vitest";
import { textResult } from "../../../worker/agent/tools/contract.ts";
import {
  conversationExtensions,
  exportedUserTools,
  importWithUserTools,
  setExtensionEnabled,
  userToolViews,
} from "../../../worker/app/extensions.ts";
import { exportConversation, ImportRefused } from "../../../worker/app/transfer.ts";
import {
  enableUserToolEverywhere,
  removeUserTool,
  saveUserTool,
  storedUserTools,
  userToolSettings,
  userToolStatuses,
} from "../../../worker/app/user-tools/store.ts";
import type { ChangeSet } from "../../../worker/core/types.ts";
import { defineExtension, defineTool } from "../../../worker/index.ts";
import { memoryStore } from "../../../worker/testing.ts";
import { appEngines, ask, DOCS, GREET } from "./user-tools-fixtures.ts";

const { openApp } = appEngines();

/** A file exported from another store whose root conversation used greet. */
async function greetFile(): Promise<string> {
  const source = await openApp();
  await saveUserTool(source.h, GREET);
  const root = await source.h.root();
  await ask(source.h, root.id, 'use my tool greet with {"name":"Ada"}');
  return exportConversation(source.h, root.id, {
    documents: DOCS,
    secrets: [],
    userTools: await exportedUserTools(source.h, root.id),
  });
}

describe("export and import", () => {
  test("an export carries the user tools its conversation selects, never a key; an import adds them", async () => {
    const source = await openApp();
    await saveUserTool(source.h, GREET);
    await saveUserTool(source.h, { ...GREET, name: "unused", body: "async () => 1" });
    await source.h.models.setKey("openai", "sk-test-secret-0123456789");
    const root = await source.h.root();
    await setExtensionEnabled(source.h, root.id, "user:unused", false);
    await ask(source.h, root.id, 'use my tool greet with {"name":"Ada"}');
    const text = await exportConversation(source.h, root.id, {
      documents: DOCS,
      secrets: ["sk-test-secret-0123456789"],
      userTools: await exportedUserTools(source.h, root.id),
    });
    const file = JSON.parse(text) as { userTools?: unknown[] };
    expect(file.userTools).toEqual([GREET]);
    expect(text).not.toContain("sk-test-secret");

    const target = await openApp();
    const id = await importWithUserTools(target.h, text, { documents: DOCS });
    expect(userToolStatuses(target.h)).toMatchObject([{ name: "greet", version: 1, activeVersion: 1 }]);
    expect(await ask(target.h, id, 'use my tool greet with {"name":"Bo"}')).toContain("Hello, Bo!");
  });

  test("an import never overwrites a stored tool of the same name", async () => {
    const source = await openApp();
    await saveUserTool(source.h, GREET);
    const root = await source.h.root();
    const text = await exportConversation(source.h, root.id, {
      documents: DOCS,
      secrets: [],
      userTools: await exportedUserTools(source.h, root.id),
    });
    const target = await openApp();
    const mine = { ...GREET, body: 'async () => "mine"' };
    await saveUserTool(target.h, mine);
    await importWithUserTools(target.h, text, { documents: DOCS });
    expect(userToolStatuses(target.h)).toMatchObject([{ name: "greet", version: 1, body: mine.body }]);
  });

  test("a file whose tool does not compile, or takes a built-in's name, is refused and nothing is written", async () => {
    const source = await openApp();
    await saveUserTool(source.h, GREET);
    const root = await source.h.root();
    const text = await exportConversation(source.h, root.id, {
      documents: DOCS,
      secrets: [],
      userTools: await exportedUserTools(source.h, root.id),
    });
    const target = await openApp();
    const before = target.h.conversationRecords().length;
    const broken = text.replace(JSON.stringify(GREET.body).slice(1, -1), "async (args) => {");
    await expect(importWithUserTools(target.h, broken, { documents: DOCS })).rejects.toThrow(
      /user tool greet is invalid: .*SyntaxError.*Nothing was written/s,
    );
    const clash = text.replace('"name": "greet"', '"name": "ls"');
    await expect(importWithUserTools(target.h, clash, { documents: DOCS })).rejects.toThrow(
      /user tool ls has the name of a tool of workspace-tools/,
    );
    expect(target.h.conversationRecords().length).toBe(before);
    expect(storedUserTools(target.h)).toEqual([]);
  });
});

describe("an import never overwrites, a bad carried tool refuses the file (sweep 42c)", () => {
  test("a stored tool of the same name keeps its own description and parameters, not only its body", async () => {
    // Sweep 42c, 162: the named test stored a tool whose description and parameters were the
    // carried ones, so an import that refreshed them on the stored tool (body kept) passed.
    const text = await greetFile();
    const target = await openApp();
    const mine = {
      ...GREET,
      description: "My own greeting",
      parameters: { type: "object", properties: { who: { type: "string" } } },
      body: 'async (args) => "mine " + args.who',
    };
    await saveUserTool(target.h, mine);
    const before = storedUserTools(target.h);
    await importWithUserTools(target.h, text, { documents: DOCS });
    expect(storedUserTools(target.h)).toEqual(before);
    expect(userToolStatuses(target.h)).toMatchObject([
      {
        name: "greet",
        version: 1,
        description: mine.description,
        parameters: mine.parameters,
        body: mine.body,
      },
    ]);
  });

  test("a file whose carried tool's parameters are not an object schema is refused and nothing is written", async () => {
    // Sweep 42c, 162: every refused file had a body that did not compile or a taken name; an
    // import that checked a carried tool's name, description and body but not its parameters passed.
    const text = await greetFile();
    const target = await openApp();
    const before = target.h.conversationRecords().length;
    const file = JSON.parse(text) as { userTools: Array<Record<string, unknown>> };
    file.userTools[0] = { ...file.userTools[0], parameters: { type: "string" } };
    await expect(importWithUserTools(target.h, JSON.stringify(file), { documents: DOCS })).rejects.toThrow(
      /"type": "object"/,
    );
    expect(target.h.conversationRecords().length).toBe(before);
    expect(storedUserTools(target.h)).toEqual([]);
  });
});

describe("an import racing an install", () => {
  test("a carried tool's name another extension takes while the bodies compile is refused too, and nothing is written", async () => {
    // As saveUserTool's (draw 32c): the names were checked before the bodies' compile (an await) and
    // not again in the importing commit.
    const text = await greetFile();
    const target = await openApp();
    const before = target.h.conversationRecords().length;
    const importing = importWithUserTools(target.h, text, { documents: DOCS }).catch((e: unknown) => e);
    target.extensions.install(
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
    const error = await importing;
    expect(error).toBeInstanceOf(ImportRefused);
    expect((error as Error).message).toMatch(/user tool greet has the name of a tool of greeter/);
    expect(target.h.conversationRecords().length).toBe(before);
    expect(storedUserTools(target.h)).toEqual([]);
  });
});

describe("export and import of several tools", () => {
  test("a file carrying several tools is refused when a later one does not compile, and nothing of the earlier ones is written", async () => {
    // Break 29H: every refused file carried one tool, so a check that read only the first carried
    // tool (the later one stored uncompiled with the conversation) passed them.
    const WAVE = { ...GREET, name: "wave", description: "Waves", body: 'async () => "wave"' };
    const source = await openApp();
    await saveUserTool(source.h, GREET);
    await saveUserTool(source.h, WAVE);
    const root = await source.h.root();
    const text = await exportConversation(source.h, root.id, {
      documents: DOCS,
      secrets: [],
      userTools: await exportedUserTools(source.h, root.id),
    });
    expect(
      (JSON.parse(text) as { userTools?: Array<{ name: string }> }).userTools?.map((t) => t.name),
    ).toEqual(["greet", "wave"]);
    const target = await openApp();
    const before = target.h.conversationRecords().length;
    const broken = text.replace(JSON.stringify(WAVE.body).slice(1, -1), "async () => {");
    await expect(importWithUserTools(target.h, broken, { documents: DOCS })).rejects.toThrow(
      /user tool wave is invalid: .*SyntaxError.*Nothing was written/s,
    );
    expect(target.h.conversationRecords().length).toBe(before);
    expect(storedUserTools(target.h)).toEqual([]);
  });
});

describe("an imported tool is opt-in", () => {
  test("the imported conversation selects it by name; another conversation does not get it", async () => {
    const text = await greetFile();
    const target = await openApp();
    const other = (await target.h.root()).id;
    const id = await importWithUserTools(target.h, text, { documents: DOCS });
    expect(userToolStatuses(target.h)).toMatchObject([{ name: "greet", imported: true, activeVersion: 1 }]);
    expect((await target.h.requireConversation(id).agentState()).extensions).toEqual({ add: ["user:greet"] });
    expect(await ask(target.h, id, 'use my tool greet with {"name":"Bo"}')).toContain("Hello, Bo!");
    expect(await ask(target.h, other, 'use my tool greet with {"name":"Bo"}')).toContain(
      "I don't see a tool named `greet` in this conversation",
    );
    // A new conversation does not get it either, and the settings show it as imported and off.
    const fresh = (await target.h.createConversation({ ownership: { kind: "ownerless" } })).id;
    expect(target.h.services.agent(fresh).tools.has("greet")).toBe(false);
    expect((await conversationExtensions(target.h, other)).find((e) => e.name === "user:greet")).toEqual({
      name: "user:greet",
      user: true,
      tools: ["greet"],
      enabled: false,
      imported: true,
    });
    expect(userToolViews(target.h)).toMatchObject([{ name: "greet", imported: true }]);
    // Opened again, the store keeps it opt-in.
    const again = await openApp({ store: await memoryStore(target.store.image()) });
    await (await again.h.requireLoadedConversation(other)).agentState();
    expect(again.h.services.agent(other).tools.has("greet")).toBe(false);
    await (await again.h.requireLoadedConversation(id)).agentState();
    expect(again.h.services.agent(id).tools.has("greet")).toBe(true);
  });

  test("the settings show it as imported where it is on too: in the imported conversation and one switched on, until it is enabled everywhere (draw 39-D)", async () => {
    // Draw 39-D: the test above reads the settings of a conversation that does not select it; the mark
    // shown only where the tool is off passed every test of this file.
    const text = await greetFile();
    const target = await openApp();
    const other = (await target.h.root()).id;
    const id = await importWithUserTools(target.h, text, { documents: DOCS });
    const greet = async (c: number) =>
      (await conversationExtensions(target.h, c)).find((e) => e.name === "user:greet");
    const shown = { name: "user:greet", user: true, tools: ["greet"] };
    expect(await greet(id)).toEqual({ ...shown, enabled: true, imported: true });
    await setExtensionEnabled(target.h, other, "user:greet", true);
    expect(await greet(other)).toEqual({ ...shown, enabled: true, imported: true });
    await enableUserToolEverywhere(target.h, "greet");
    expect(await greet(id)).toEqual({ ...shown, enabled: true });
    expect(await greet(other)).toEqual({ ...shown, enabled: true });
  });

  test("a tool stored already with the carried code did not arrive by import: it stays unmarked and every conversation keeps it (draw 39-D)", async () => {
    // Draw 39-D: an import marking a stored tool of the same code imported (opt-in) passed every test
    // of this file, whose same-name tools had other code or whose target stored none.
    const text = await greetFile();
    const target = await openApp();
    await saveUserTool(target.h, GREET);
    const other = (await target.h.root()).id;
    const id = await importWithUserTools(target.h, text, { documents: DOCS });
    expect(storedUserTools(target.h)).toHaveLength(1);
    expect(storedUserTools(target.h)[0]).not.toHaveProperty("imported");
    expect(userToolStatuses(target.h)[0]).not.toHaveProperty("imported");
    expect(target.h.services.agent(other).tools.has("greet")).toBe(true);
    expect(target.h.services.agent(id).tools.has("greet")).toBe(true);
    const fresh = (await target.h.createConversation({ ownership: { kind: "ownerless" } })).id;
    expect(target.h.services.agent(fresh).tools.has("greet")).toBe(true);
  });

  test("the per-conversation switch adds it to one conversation and drops it again", async () => {
    const text = await greetFile();
    const target = await openApp();
    await importWithUserTools(target.h, text, { documents: DOCS });
    const other = await target.h.root();
    await setExtensionEnabled(target.h, other.id, "user:greet", true);
    expect((await other.agentState()).extensions).toEqual({ add: ["user:greet"] });
    expect(await ask(target.h, other.id, 'use my tool greet with {"name":"Cy"}')).toContain("Hello, Cy!");
    await setExtensionEnabled(target.h, other.id, "user:greet", false);
    expect((await other.agentState()).extensions).toBeUndefined();
    expect(target.h.services.agent(other.id).tools.has("greet")).toBe(false);
  });

  test("enabling it everywhere clears the mark: every conversation gets it", async () => {
    const text = await greetFile();
    const target = await openApp();
    const other = (await target.h.root()).id;
    await importWithUserTools(target.h, text, { documents: DOCS });
    await enableUserToolEverywhere(target.h, "greet");
    expect(storedUserTools(target.h)[0]).not.toHaveProperty("imported");
    expect(await ask(target.h, other, 'use my tool greet with {"name":"Di"}')).toContain("Hello, Di!");
    expect((await conversationExtensions(target.h, other)).find((e) => e.name === "user:greet")).toEqual({
      name: "user:greet",
      user: true,
      tools: ["greet"],
      enabled: true,
    });
    await expect(enableUserToolEverywhere(target.h, "nope")).rejects.toThrow(/no user tool named "nope"/);
  });

  test("a new version saved over an imported tool stays opt-in", async () => {
    const text = await greetFile();
    const target = await openApp();
    const other = (await target.h.root()).id;
    await importWithUserTools(target.h, text, { documents: DOCS });
    await saveUserTool(target.h, { ...GREET, body: 'async (args) => "Hey " + args.name' });
    expect(storedUserTools(target.h)).toMatchObject([{ name: "greet", version: 2, imported: true }]);
    expect(target.h.services.agent(other).tools.has("greet")).toBe(false);
  });

  test("round trip: the imported conversation's export carries the tool, and its import elsewhere works there alone", async () => {
    const first = await openApp();
    const second = (await importWithUserTools(first.h, await greetFile(), { documents: DOCS })) as number;
    const text = await exportConversation(first.h, second, {
      documents: DOCS,
      secrets: [],
      userTools: await exportedUserTools(first.h, second),
    });
    expect((JSON.parse(text) as { userTools?: unknown[] }).userTools).toEqual([GREET]);
    // The first store's other conversations do not carry it.
    expect(await exportedUserTools(first.h, (await first.h.root()).id)).toEqual([]);
    const third = await openApp();
    const id = await importWithUserTools(third.h, text, { documents: DOCS });
    expect(await ask(third.h, id, 'use my tool greet with {"name":"Ed"}')).toContain("Hello, Ed!");
    expect(third.h.services.agent((await third.h.root()).id).tools.has("greet")).toBe(false);
  });
});

describe("removing a tool", () => {
  test("drops it from every pi.agent that names it, in the removal's commit: a later, different tool of that name is not active there", async () => {
    // A store where four conversations name the imported greet: the imported one (add), one switched
    // on (add), one with an exact list, one that removes it. Opened again, so none of their documents
    // is in memory when the tool is removed.
    const first = await openApp();
    const imported = await importWithUserTools(first.h, await greetFile(), { documents: DOCS });
    const switched = (await first.h.root()).id;
    await setExtensionEnabled(first.h, switched, "user:greet", true);
    const exact = await first.h.createConversation({ ownership: { kind: "ownerless" } });
    await exact.configure({ extensions: ["workspace-tools", "user:greet"] });
    const removing = await first.h.createConversation({ ownership: { kind: "ownerless" } });
    await removing.configure({
      extensions: { add: ["user:greet"], remove: ["user:greet", "workspace-tools"] },
    });
    const target = await openApp({ store: await memoryStore(first.store.image()) });

    const commits: ChangeSet[] = [];
    target.h.subscribe((change) => commits.push(change));
    await removeUserTool(target.h, "greet");
    // One commit wrote the stored tools and each of the four pi.agent documents.
    expect(commits.map((c) => c.docs.map((d) => `${d.conversationId}:${d.name}`).sort())).toEqual([
      [
        "0:app.userTools",
        `${exact.id}:pi.agent`,
        `${imported}:pi.agent`,
        `${removing.id}:pi.agent`,
        `${switched}:pi.agent`,
      ].sort(),
    ]);
    const agent = (c: number) => target.h.requireConversation(c).agentState();
    expect((await agent(imported)).extensions).toBeUndefined();
    expect((await agent(switched)).extensions).toBeUndefined();
    expect((await agent(exact.id)).extensions).toEqual(["workspace-tools"]);
    expect((await agent(removing.id)).extensions).toEqual({ remove: ["workspace-tools"] });

    // Another file brings a different greet: only its own conversation gets it.
    const other = await openApp();
    await saveUserTool(other.h, { ...GREET, body: 'async (args) => "Other " + args.name' });
    const otherRoot = (await other.h.root()).id;
    const file = await exportConversation(other.h, otherRoot, {
      documents: DOCS,
      secrets: [],
      userTools: await exportedUserTools(other.h, otherRoot),
    });
    const newer = await importWithUserTools(target.h, file, { documents: DOCS });
    expect(target.h.services.agent(newer).tools.has("greet")).toBe(true);
    for (const c of [imported, switched, exact.id, removing.id])
      expect([c, target.h.services.agent(c).tools.has("greet")]).toEqual([c, false]);
  });
});

describe("the default selection's base", () => {
  const HELLO = { ...GREET, name: "hello" };
  test("repeated reads hand out the same base; a save, an import, enabling and a removal are seen at the next read", async () => {
    const target = await openApp();
    const settings = userToolSettings(() => target.h);
    const base = () => settings().extensions;
    const first = base();
    expect(first).toContain("workspace-tools");
    expect(base(), "a read with nothing changed reuses the base").toBe(first);
    // A save installs user:greet (a new registry snapshot).
    await saveUserTool(target.h, GREET);
    expect(base()).toEqual([...first!, "user:greet"]);
    const saved = base();
    expect(base()).toBe(saved);
    // An import stores an opt-in tool: installed, yet left out of the base.
    const source = await openApp();
    await saveUserTool(source.h, HELLO);
    const root = (await source.h.root()).id;
    await ask(source.h, root, 'use my tool hello with {"name":"Ada"}');
    const file = await exportConversation(source.h, root, {
      documents: DOCS,
      secrets: [],
      userTools: await exportedUserTools(source.h, root),
    });
    await importWithUserTools(target.h, file, { documents: DOCS });
    expect(target.h.extensions.snapshot().extension("user:hello")).toBeDefined();
    expect(base()).toEqual(saved);
    // Enabling it everywhere writes only the stored tools' document: the next read has it.
    await enableUserToolEverywhere(target.h, "hello");
    expect(base()).toEqual([...saved!, "user:hello"]);
    await removeUserTool(target.h, "greet");
    expect(base()).toEqual([...first!, "user:hello"]);
  });
});
