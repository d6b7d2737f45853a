/**
 * `Conversation.agent()` "for UIs" (spec §2.2, §7.1): the spec's returns the agent resolved from the
 * current registry snapshot and settings. Ours keeps `agent()` as the stored pi.agent (the app and
 * the engine host read it as such) and adds `resolvedAgent()`: that resolution, with the model and
 * thinking level a request would use. Reads only.
 */
import { Type } from "typebox";
import { expect, test } from "vitest";
import { createRegistry, defineExtension, defineTool, section, textResult } from "../../../worker/index.ts";
import { echo, open } from "./fixtures.ts";

const tool = (name: string) =>
  defineTool({
    name,
    description: name,
    parameters: Type.Object({}),
    execute: async () => textResult(name),
  });

test("resolvedAgent() gives the current resolution of the stored names, the base and the model; agent() the stored names", async () => {
  const extensions = createRegistry();
  extensions.install(
    defineExtension({ name: "a", tools: [tool("one")], sections: [section("s", () => "x")] }),
  );
  extensions.install(defineExtension({ name: "b", tools: [tool("two")] }));
  extensions.install(defineExtension({ name: "c", tools: [tool("three")] }));
  const { h, root, faux } = await open(echo, { extensions, settings: { extensions: ["a", "b"] } });
  await root.configure({ extensions: { add: ["c"], remove: ["a"] }, thinkingLevel: "low" });
  const view = await root.resolvedAgent();
  expect(view.extensions).toEqual(["b", "c"]);
  expect([...view.tools.keys()]).toEqual(["two", "three"]);
  expect(view.sections).toEqual([]);
  expect(view.model).toEqual(faux.ref);
  expect(view.thinkingLevel).toBe("low");
  expect(view.state).toEqual(await root.agent());
  expect((await root.agent()).extensions).toEqual({ add: ["c"], remove: ["a"] });
  // A registry change shows at once; nothing is written.
  const before = (await root.entries()).length;
  extensions.uninstall("b");
  expect([...(await root.resolvedAgent()).tools.keys()]).toEqual(["three"]);
  expect((await root.entries()).length).toBe(before);
  expect(h.services.agent(root.id).extensions).toEqual(["c"]);
});
