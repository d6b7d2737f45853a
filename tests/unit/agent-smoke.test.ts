import { fauxAssistantMessage, fauxToolCall, registerFauxProvider } from "@mariozechner/pi-ai";
import { expect, test } from "vitest";
import { AgentHarness, builtinTools, createModelResolver, MemoryFs } from "../../worker/index.ts";
import { memoryStore } from "../../worker/testing.ts";

test("smoke: input, a tool round, an answer", async () => {
  const faux = registerFauxProvider({ provider: "faux", models: [{ id: "faux-1" }] });
  faux.setResponses([
    fauxAssistantMessage([fauxToolCall("ls", { path: "." }, { id: "call-1" })], { stopReason: "toolUse" }),
    fauxAssistantMessage("there is one file"),
  ]);
  const model = faux.getModel();
  const fs = new MemoryFs({ "a.txt": "hello" });
  const h = await AgentHarness.open(await memoryStore(), {
    models: createModelResolver({ extra: [model] }),
    defaultModel: { provider: model.provider, id: model.id },
    tools: builtinTools,
    fs,
  });
  const root = await h.root();
  const sub = await root.submit({ type: "input", content: "list the files" });
  const settled = await sub.wait();
  console.log(
    settled,
    JSON.stringify(
      (await root.entries()).map((e) => [e.kind, JSON.stringify(e.model).slice(0, 150)]),
      null,
      1,
    ),
  );
  expect(settled.status).toBe("done");
  console.log(JSON.stringify((await root.viewState()).docs));
  await h.close();
  faux.unregister();
});
