/**
 * The hooks table (spec §7.2, issue 14 item 2), one test per row: how the hooks of several selected
 * extensions compose (extension order) and what a throw does. Every row's hooks come from separate
 * extensions, so the order asserted is the extensions' order; a thrower sits first so the test also
 * shows the rest still run (or, for beforeTool, that the call is blocked). Also: a task asks only the
 * hooks of the extensions its conversation selects.
 */
import { fauxAssistantMessage, fauxToolCall, type Message } from "@mariozechner/pi-ai";
import { Type } from "typebox";
import { describe, expect, test } from "vitest";
import { SUMMARY_SYSTEM_PROMPT } from "../../../worker/agent/compaction/task.ts";
import {
  type AgentHarnessOptions,
  createRegistry,
  defineExtension,
  defineTool,
  type Extension,
  hook,
  textResult,
} from "../../../worker/index.ts";
import { deferred, type FauxResponder, until } from "../../../worker/testing.ts";
import {
  callsThenAnswer,
  diagnosticsOf,
  echo,
  heldFirstCallTool,
  itemTool,
  liveOf,
  messageOf,
  open,
  textOf,
  toolResults,
  transcript,
} from "./fixtures.ts";

/** A harness whose registry holds `extensions` in order, reporting into `reported`. */
async function withExtensions(
  respond: FauxResponder,
  extensions: Extension[],
  options: AgentHarnessOptions = {},
) {
  const registry = createRegistry();
  for (const e of extensions) registry.install(e);
  const reported: string[] = [];
  const errors: unknown[] = [];
  const setup = await open(respond, {
    extensions: registry,
    onReport: (error) => {
      errors.push(error);
      reported.push((error as Error).message);
    },
    ...options,
  });
  return { ...setup, reported, errors, registry };
}

const boom = (what: string) => () => {
  throw new Error(`${what} broke`);
};
const user = (text: string): Message => ({ role: "user", content: text, timestamp: 0 });

describe("the hooks table: composition in extension order, and what a throw does", () => {
  test("beforeRequest: a replacement chain (each sees the previous output); a throw is reported and the next runs", async () => {
    const seenByB: number[] = [];
    // Break 30D: the error reported is the one thrown (a copy with its message passed).
    const thrown = new Error("x broke");
    const thrownLater = new Error("y broke");
    const thrownValue = { code: "v broke" };
    const { root, faux, reported, errors } = await withExtensions(echo, [
      defineExtension({
        name: "x",
        hooks: [
          hook("pi.generation", {
            beforeRequest: () => {
              throw thrown;
            },
          }),
        ],
      }),
      defineExtension({
        name: "a",
        hooks: [hook("pi.generation", { beforeRequest: (messages) => [...messages, user("from a")] })],
      }),
      // Sweep 42, 153: a throw after a replacement (y, rejecting after an await) keeps that
      // replacement for the next hook, and a hook returning nothing (n) passes it on (a throw
      // resetting the chain to the transcript's messages passed).
      defineExtension({
        name: "y",
        hooks: [
          hook("pi.generation", {
            beforeRequest: async () => {
              await Promise.resolve();
              throw thrownLater;
            },
          }),
        ],
      }),
      defineExtension({ name: "n", hooks: [hook("pi.generation", { beforeRequest: () => undefined })] }),
      // A thrown value that is no Error is reported as thrown too (only Errors reported passed).
      defineExtension({
        name: "v",
        hooks: [
          hook("pi.generation", {
            beforeRequest: () => {
              throw thrownValue;
            },
          }),
        ],
      }),
      defineExtension({
        name: "b",
        hooks: [
          hook("pi.generation", {
            beforeRequest: (messages) => {
              seenByB.push(messages.length);
              return [...messages, user("from b")];
            },
          }),
        ],
      }),
    ]);
    expect(await (await root.submit({ type: "input", content: "hi" })).wait()).toMatchObject({
      status: "done",
    });
    expect(faux.requests[0]!.messages.map(textOf)).toEqual(["hi", "from a", "from b"]);
    expect(seenByB).toEqual([2]);
    expect(reported).toEqual(["x broke", "y broke", undefined]);
    expect(errors).toHaveLength(3);
    expect(errors[0]).toBe(thrown);
    expect(errors[1]).toBe(thrownLater);
    expect(errors[2]).toBe(thrownValue);
    // For that request only: the transcript keeps its own messages.
    expect((await transcript(root)).map((e) => textOf(messageOf(e)))).toEqual(["hi", "echo: from b"]);
  });

  test("afterResponse: every observer runs, in order; a throw is reported and the next runs", async () => {
    const calls: string[] = [];
    // Break 28P: each reported error is the one thrown (a copy with its message passed), and an async
    // observer is awaited: its rejection reported, the next one run only once it settled.
    const thrown: Error[] = [];
    const { root, reported, errors } = await withExtensions(echo, [
      defineExtension({
        name: "x",
        hooks: [
          hook("pi.generation", {
            afterResponse: () => {
              const error = new Error("x broke");
              thrown.push(error);
              throw error;
            },
          }),
        ],
      }),
      defineExtension({
        name: "y",
        hooks: [
          hook("pi.generation", {
            afterResponse: async () => {
              await new Promise((r) => setTimeout(r, 5));
              const error = new Error("y broke");
              thrown.push(error);
              throw error;
            },
          }),
        ],
      }),
      defineExtension({
        name: "a",
        hooks: [
          hook("pi.generation", {
            afterResponse: async (m) => {
              calls.push(`a:${textOf(m)}`);
              await new Promise((r) => setTimeout(r, 5));
              calls.push("a settled");
            },
          }),
        ],
      }),
      // Sweep 42, 154: a thrown value that is no Error (a string here) is reported as thrown too, and
      // the next observer still runs (only Errors reported passed every named test).
      defineExtension({
        name: "s",
        hooks: [
          hook("pi.generation", {
            afterResponse: () => {
              throw "s broke";
            },
          }),
        ],
      }),
      defineExtension({
        name: "b",
        hooks: [hook("pi.generation", { afterResponse: (m) => void calls.push(`b:${textOf(m)}`) })],
      }),
    ]);
    expect(await (await root.submit({ type: "input", content: "hi" })).wait()).toMatchObject({
      status: "done",
    });
    expect(calls).toEqual(["a:echo: hi", "a settled", "b:echo: hi"]);
    expect(reported).toEqual(["x broke", "y broke", undefined]);
    expect(errors).toHaveLength(3);
    expect(errors[0]).toBe(thrown[0]);
    expect(errors[1]).toBe(thrown[1]);
    expect(errors[2]).toBe("s broke");
  });

  test("onYield: the first continuation wins; a throw is reported and the next is asked", async () => {
    let yields = 0;
    const asked: string[] = [];
    const thrown: Error[] = [];
    const throwing = () => {
      const error = new Error("x broke");
      thrown.push(error);
      throw error;
    };
    const { root, reported, errors } = await withExtensions(echo, [
      defineExtension({ name: "x", hooks: [hook("pi.generation", { onYield: throwing })] }),
      defineExtension({
        name: "a",
        hooks: [
          hook("pi.generation", {
            onYield: () => {
              asked.push("a");
              return yields++ === 0 ? "continue from a" : undefined;
            },
          }),
        ],
      }),
      defineExtension({
        name: "b",
        hooks: [
          hook("pi.generation", {
            onYield: () => {
              asked.push("b");
              return undefined;
            },
          }),
        ],
      }),
    ]);
    expect(await (await root.submit({ type: "input", content: "hi" })).wait()).toMatchObject({
      status: "done",
    });
    expect(asked).toEqual(["a", "a", "b"]);
    expect((await transcript(root)).map((e) => textOf(messageOf(e)))).toEqual([
      "hi",
      "echo: hi",
      "continue from a",
      "echo: continue from a",
    ]);
    expect(reported).toEqual(["x broke", "x broke"]);
    // The thrown error itself is reported, not a copy (draw 28c).
    expect(errors).toHaveLength(2);
    expect(errors[0]).toBe(thrown[0]);
    expect(errors[1]).toBe(thrown[1]);
  });

  test("beforeTool: an argument replacement chain, the first block wins; an ordinary throw blocks the call with its text", async () => {
    const { tool, seen } = itemTool({});
    const asked: string[] = [];
    const calls = [
      fauxToolCall("apply", { item: "one" }, { id: "c1" }),
      fauxToolCall("apply", { item: "two" }, { id: "c2" }),
      fauxToolCall("apply", { item: "three" }, { id: "c3" }),
      // Break 31A: a throw of something not an Error is an ordinary throw too (it faulted the task).
      fauxToolCall("apply", { item: "four" }, { id: "c4" }),
    ];
    const { root } = await withExtensions(
      callsThenAnswer(...calls),
      [
        defineExtension({ name: "tools", tools: [tool] }),
        defineExtension({
          name: "a",
          hooks: [
            hook("pi.tool", {
              beforeTool: (call) => {
                const item = (call.arguments as { item: string }).item;
                asked.push(`a:${item}`);
                if (item === "three") throw new Error("a refuses three");
                if (item === "four") throw "a refuses four";
                return { arguments: { item: `${item}+a` } };
              },
            }),
          ],
        }),
        defineExtension({
          name: "b",
          hooks: [
            hook("pi.tool", {
              beforeTool: (call) => {
                const item = (call.arguments as { item: string }).item;
                asked.push(`b:${item}`);
                return item === "two+a" ? { block: "b blocks two" } : undefined;
              },
            }),
          ],
        }),
        defineExtension({
          name: "c",
          hooks: [
            hook("pi.tool", {
              beforeTool: (call) => {
                asked.push(`c:${(call.arguments as { item: string }).item}`);
                return { block: "c blocks everything" };
              },
            }),
          ],
        }),
      ],
      { settings: { toolExecution: "sequential" } },
    );
    expect(await (await root.submit({ type: "input", content: "go" })).wait()).toMatchObject({
      status: "done",
    });
    expect(asked).toEqual(["a:one", "b:one+a", "c:one+a", "a:two", "b:two+a", "a:three", "a:four"]);
    expect(seen).toEqual([]);
    const results = await toolResults(root);
    expect(results.map((e) => textOf(messageOf(e)))).toEqual([
      expect.stringContaining("c blocks everything"),
      expect.stringContaining("b blocks two"),
      expect.stringContaining("a refuses three"),
      expect.stringContaining("a refuses four"),
    ]);
    for (const r of results) expect(diagnosticsOf(r).map((d) => d.code)).toEqual(["blocked"]);
  });

  test("beforeTool: the tool runs with the chain's last replacement, each hook seeing the one before; a blocked call is an error result", async () => {
    // Reading 24a: the chain's output reached `execute` only with one hook (tools), and the table
    // test blocks every call, so that the last of several replacements is the one run was not shown.
    const { tool, seen } = itemTool({});
    const asked: string[] = [];
    const rewrite = (name: string) =>
      defineExtension({
        name,
        hooks: [
          hook("pi.tool", {
            beforeTool: (call) => {
              const item = (call.arguments as { item: string }).item;
              asked.push(`${name}:${item}`);
              if (item === "stop+a+b") return { block: `${name} blocks ${item}` };
              return { arguments: { item: `${item}+${name}` } };
            },
          }),
        ],
      });
    const { root } = await withExtensions(
      callsThenAnswer(
        fauxToolCall("apply", { item: "go" }, { id: "c1" }),
        fauxToolCall("apply", { item: "stop" }, { id: "c2" }),
      ),
      [defineExtension({ name: "tools", tools: [tool] }), rewrite("a"), rewrite("b"), rewrite("c")],
      { settings: { toolExecution: "sequential" } },
    );
    expect(await (await root.submit({ type: "input", content: "go" })).wait()).toMatchObject({
      status: "done",
    });
    expect(asked).toEqual(["a:go", "b:go+a", "c:go+a+b", "a:stop", "b:stop+a", "c:stop+a+b"]);
    expect(seen).toEqual([{ item: "go+a+b+c" }]);
    const results = (await toolResults(root)).map((e) => messageOf(e) as { isError?: boolean });
    expect(results.map((m) => [textOf(m as never), m.isError === true])).toEqual([
      ["applied go+a+b+c", false],
      [expect.stringContaining("c blocks stop+a+b"), true],
    ]);
  });

  test("beforeTool: a block with an empty reason still blocks: the tool never runs and the next hook is not asked (draw 33)", async () => {
    // Draw 33 (part D, 19): every block had words, so a chain that took only a truthy `block` as a
    // block (an empty one let the call run) passed every test.
    const { tool, seen } = itemTool({});
    const asked: string[] = [];
    const { root } = await withExtensions(
      callsThenAnswer(fauxToolCall("apply", { item: "one" }, { id: "c1" })),
      [
        defineExtension({ name: "tools", tools: [tool] }),
        defineExtension({
          name: "a",
          hooks: [
            hook("pi.tool", {
              beforeTool: () => {
                asked.push("a");
                return { block: "" };
              },
            }),
          ],
        }),
        defineExtension({
          name: "b",
          hooks: [
            hook("pi.tool", {
              beforeTool: () => {
                asked.push("b");
                return undefined;
              },
            }),
          ],
        }),
      ],
    );
    expect(await (await root.submit({ type: "input", content: "go" })).wait()).toMatchObject({
      status: "done",
    });
    expect(asked).toEqual(["a"]);
    expect(seen).toEqual([]);
    const results = await toolResults(root);
    expect(results.map((e) => (messageOf(e) as { isError?: boolean }).isError)).toEqual([true]);
    expect(results.map((r) => diagnosticsOf(r).map((d) => d.code))).toEqual([["blocked"]]);
  });

  test("beforeTool: a member left undefined is absent: { block: undefined } blocks nothing and { arguments: undefined } replaces nothing (draw 33)", async () => {
    // Draw 33 (part D, 19): the spec types the decision { arguments?, block? }; a hook (in JavaScript,
    // or typed as the spec writes it) that sets `block: undefined` beside its arguments had the call
    // blocked with empty text, and `arguments: undefined` ran the call with no arguments.
    const { tool, seen } = itemTool({});
    const asked: string[] = [];
    const { root } = await withExtensions(
      callsThenAnswer(
        fauxToolCall("apply", { item: "one" }, { id: "c1" }),
        fauxToolCall("apply", { item: "two" }, { id: "c2" }),
      ),
      [
        defineExtension({ name: "tools", tools: [tool] }),
        defineExtension({
          name: "a",
          hooks: [
            hook("pi.tool", {
              beforeTool: (call) => {
                const item = (call.arguments as { item: string }).item;
                return (
                  item === "one"
                    ? { block: undefined, arguments: { item: `${item}+a` } }
                    : { arguments: undefined }
                ) as never;
              },
            }),
          ],
        }),
        defineExtension({
          name: "b",
          hooks: [
            hook("pi.tool", {
              beforeTool: (call) => {
                asked.push((call.arguments as { item: string }).item);
                return undefined;
              },
            }),
          ],
        }),
      ],
      { settings: { toolExecution: "sequential" } },
    );
    expect(await (await root.submit({ type: "input", content: "go" })).wait()).toMatchObject({
      status: "done",
    });
    expect(asked).toEqual(["one+a", "two"]);
    expect(seen).toEqual([{ item: "one+a" }, { item: "two" }]);
    const results = (await toolResults(root)).map((e) => messageOf(e) as { isError?: boolean });
    expect(results.map((m) => [textOf(m as never), m.isError === true])).toEqual([
      ["applied one+a", false],
      ["applied two", false],
    ]);
  });

  test("afterTool: a result replacement chain; a throw is reported and the next sees the result as it was", async () => {
    const { tool } = itemTool({});
    // Break 28M: a throw after a replacement (y) keeps that replacement, a hook returning nothing (n)
    // passes on the result before it, and the reported errors are the thrown ones themselves.
    const thrown = [new Error("x broke"), new Error("y broke")];
    const throws = (error: Error) => () => {
      throw error;
    };
    const { root, faux, reported, errors } = await withExtensions(
      callsThenAnswer(fauxToolCall("apply", { item: "x" }, { id: "c1" })),
      [
        defineExtension({ name: "tools", tools: [tool] }),
        defineExtension({ name: "x", hooks: [hook("pi.tool", { afterTool: throws(thrown[0]!) })] }),
        defineExtension({
          name: "a",
          hooks: [hook("pi.tool", { afterTool: (call) => textResult(`${textOf(call.result as never)} +a`) })],
        }),
        defineExtension({ name: "y", hooks: [hook("pi.tool", { afterTool: throws(thrown[1]!) })] }),
        // Sweep 42, 155: a thrown value that is no Error is reported as thrown too (only Errors
        // reported passed every named test), and the next hook still sees the result as it was.
        defineExtension({
          name: "v",
          hooks: [
            hook("pi.tool", {
              afterTool: () => {
                throw "v broke";
              },
            }),
          ],
        }),
        defineExtension({ name: "n", hooks: [hook("pi.tool", { afterTool: () => undefined })] }),
        defineExtension({
          name: "b",
          hooks: [hook("pi.tool", { afterTool: (call) => textResult(`${textOf(call.result as never)} +b`) })],
        }),
      ],
    );
    expect(await (await root.submit({ type: "input", content: "go" })).wait()).toMatchObject({
      status: "done",
    });
    const [result] = await toolResults(root);
    expect(textOf(messageOf(result!))).toBe("applied x +a +b");
    expect(faux.requests[1]!.messages.map(textOf)).toContain("applied x +a +b");
    expect(reported).toEqual(["x broke", "y broke", undefined]);
    expect(errors).toHaveLength(3);
    expect(errors[0]).toBe(thrown[0]);
    expect(errors[1]).toBe(thrown[1]);
    expect(errors[2]).toBe("v broke");
  });

  test("onAbort over one aborted tool task: the chain sees its durable output, a control changes nothing, the sibling call and the run go on", async () => {
    const { started, tool: slow } = slowUntilAborted();
    const siblingStarted = deferred();
    const siblingGo = deferred();
    let siblingSignal: AbortSignal | undefined;
    const sibling = defineTool({
      name: "sibling",
      description: "Finishes when released",
      parameters: Type.Object({}),
      async execute(_args, api) {
        siblingSignal = api.signal;
        siblingStarted.resolve();
        await siblingGo.promise;
        // It asks to end the run: that takes effect only if every call of the round does.
        return { ...textResult("sibling done"), control: { terminate: true } };
      },
    });
    const seen: string[] = [];
    const { h, root, faux } = await withExtensions(
      callsThenAnswer(fauxToolCall("slow", {}, { id: "c1" }), fauxToolCall("sibling", {}, { id: "c2" })),
      [
        defineExtension({ name: "tools", tools: [slow, sibling] }),
        defineExtension({
          name: "first",
          hooks: [
            hook("pi.tool", {
              onAbort: (call, result) => {
                seen.push(`first:${call.name}:${textOf(result as never).trim()}`);
                return textResult(`${textOf(result as never).trim()} +first`);
              },
            }),
          ],
        }),
        defineExtension({
          name: "second",
          hooks: [
            hook("pi.tool", {
              onAbort: (call, result) => {
                seen.push(`second:${call.name}:${textOf(result as never)}`);
                // A control asks to end the run: it changes nothing for an aborted call.
                return { ...textResult(`${textOf(result as never)} +second`), control: { terminate: true } };
              },
            }),
          ],
        }),
      ],
    );
    const sub = await root.submit({ type: "input", content: "go" });
    await started.promise;
    await siblingStarted.promise;
    await until(() => Boolean(liveOf(h).tools?.find((t) => t.name === "slow")?.output));
    const slowTask = liveOf(h).tools!.find((t) => t.name === "slow")!.taskId!;
    const siblingTask = liveOf(h).tools!.find((t) => t.name === "sibling")!.taskId!;
    expect(await h.abortTask(slowTask)).toBe("marked");
    const slowEnded = await h.waitForTask(slowTask);
    expect(slowEnded.state).toMatchObject({ outcome: { status: "aborted" } });
    // The sibling is not abort-marked and its signal never fired: it finishes on its own.
    expect((await h.getTask(siblingTask))?.abortRequested ?? false).toBe(false);
    expect(siblingSignal?.aborted).toBe(false);
    siblingGo.resolve();
    expect((await sub.wait()).status).toBe("done");
    expect((await h.waitForTask(siblingTask)).state).toMatchObject({ outcome: { status: "completed" } });
    expect(seen).toEqual(["first:slow:durable", "second:slow:durable +first"]);
    const results = await toolResults(root);
    expect(results).toHaveLength(2);
    // The chain's result, then the harness's own diagnostic last.
    expect(textOf(messageOf(results[0]!))).toMatch(/^durable \+first \+second<harness>/);
    expect(textOf(messageOf(results[1]!))).toBe("sibling done");
    expect(diagnosticsOf(results[0]!).map((d) => d.code)).toEqual(["aborted"]);
    // Settled aborted with { entryId } of its result, and no control (spec §8.4; reading 24e).
    const settled = (slowEnded.state as { outcome: { result?: Record<string, unknown> } }).outcome.result;
    expect(settled).toMatchObject({ entryId: results[0]!.id });
    expect(settled).not.toHaveProperty("control");
    // The aborted call's control did not count: the round did not end the run, which went on to its
    // answer with both results in the request.
    expect(faux.requests).toHaveLength(2);
    expect(textOf(messageOf((await transcript(root)).at(-1)!))).toBe("done");
  });

  test("onAbort over the first call of a sequential round: the chain replaces its result, and the pending sibling still starts, runs and the run goes on (break 31G)", async () => {
    // Break 31G: every onAbort test ran a parallel round; a sequential round that answered its
    // pending calls aborted once a call ended aborted passed them.
    const { started, tool: slow } = slowUntilAborted();
    let siblingRan = 0;
    const sibling = defineTool({
      name: "sibling",
      description: "Finishes at once",
      parameters: Type.Object({}),
      async execute() {
        siblingRan++;
        return textResult("sibling done");
      },
    });
    const { h, root, faux } = await withExtensions(
      callsThenAnswer(fauxToolCall("slow", {}, { id: "c1" }), fauxToolCall("sibling", {}, { id: "c2" })),
      [
        defineExtension({ name: "tools", tools: [slow, sibling] }),
        defineExtension({
          name: "hooks",
          hooks: [
            hook("pi.tool", {
              onAbort: (_call, result) => textResult(`${textOf(result as never).trim()} +hook`),
            }),
          ],
        }),
      ],
      { settings: { toolExecution: "sequential" } },
    );
    const sub = await root.submit({ type: "input", content: "go" });
    await started.promise;
    // Sequential: the sibling has no task yet, it waits in the round's pending calls.
    expect(liveOf(h).tools!.find((t) => t.name === "sibling")?.taskId).toBeUndefined();
    const slowTask = liveOf(h).tools!.find((t) => t.name === "slow")!.taskId!;
    expect(await h.abortTask(slowTask)).toBe("marked");
    expect((await h.waitForTask(slowTask)).state).toMatchObject({ outcome: { status: "aborted" } });
    expect((await sub.wait()).status).toBe("done");
    expect(siblingRan).toBe(1);
    const results = await toolResults(root);
    expect(results).toHaveLength(2);
    expect(textOf(messageOf(results[0]!))).toMatch(/^durable \+hook/);
    expect(textOf(messageOf(results[1]!))).toBe("sibling done");
    const [, siblingTask] = (await h.tasks({ kind: "pi.tool" })).sort((a, b) => a.id - b.id);
    expect(siblingTask?.state).toMatchObject({ outcome: { status: "completed" } });
    expect(faux.requests).toHaveLength(2);
    expect(textOf(messageOf((await transcript(root)).at(-1)!))).toBe("done");
  });

  test("onAbort: an aborted-result replacement chain; a throw is reported and the next runs", async () => {
    const started = deferred();
    const slow = defineTool({
      name: "slow",
      description: "Works until aborted",
      parameters: Type.Object({}),
      async execute(_args, api) {
        api.output("half\n");
        started.resolve();
        await new Promise<void>((_resolve, reject) => {
          api.signal.addEventListener("abort", () => reject(api.signal.reason), { once: true });
        });
        return textResult("finished");
      },
    });
    // Break 28G: a throw after a replacement (y) keeps that replacement, a hook returning nothing (n)
    // passes on the result before it, and the reported errors are the thrown ones themselves.
    const thrown = [new Error("x broke"), new Error("y broke")];
    const throws = (error: Error) => () => {
      throw error;
    };
    const { h, root, reported, errors } = await withExtensions(
      callsThenAnswer(fauxToolCall("slow", {}, { id: "c1" })),
      [
        defineExtension({ name: "tools", tools: [slow] }),
        defineExtension({ name: "x", hooks: [hook("pi.tool", { onAbort: throws(thrown[0]!) })] }),
        defineExtension({
          name: "a",
          hooks: [
            // Draw 35eD: an async replacement is awaited and chained; a chain that took a hook's promise
            // for no replacement passed when every hook was synchronous.
            hook("pi.tool", {
              onAbort: async (_c, result) => {
                await Promise.resolve();
                return textResult(`${textOf(result as never).trim()} +a`);
              },
            }),
          ],
        }),
        // Draw 39cD: y rejects asynchronously; a chain that caught only a synchronous throw passed when
        // every thrower threw at once.
        defineExtension({
          name: "y",
          hooks: [
            hook("pi.tool", {
              onAbort: async () => {
                await Promise.resolve();
                throw thrown[1]!;
              },
            }),
          ],
        }),
        defineExtension({ name: "n", hooks: [hook("pi.tool", { onAbort: () => undefined })] }),
        defineExtension({
          name: "b",
          hooks: [hook("pi.tool", { onAbort: (_c, result) => textResult(`${textOf(result as never)} +b`) })],
        }),
      ],
    );
    await root.submit({ type: "input", content: "go" });
    await started.promise;
    await until(() => Boolean(liveOf(h).tools?.[0]?.output));
    await root.abort();
    const [result] = await toolResults(root);
    expect(result).toBeDefined();
    expect(textOf(messageOf(result!))).toContain("half +a +b");
    expect(diagnosticsOf(result!).map((d) => d.code)).toEqual(["aborted"]);
    expect(reported).toEqual(["x broke", "y broke"]);
    expect(errors).toHaveLength(2);
    expect(errors[0]).toBe(thrown[0]);
    expect(errors[1]).toBe(thrown[1]);
  });

  test("afterTools: every observer runs, in order, with the round's results; a throw is reported and the next runs", async () => {
    const { tool } = itemTool({});
    const seen: string[] = [];
    // Draw 35c: the reports were read by message; a chain reporting a copy of each error passed.
    const xError = new Error("x broke");
    let yError: Error | undefined;
    const { root, reported, errors } = await withExtensions(
      callsThenAnswer(
        fauxToolCall("apply", { item: "x" }, { id: "c1" }),
        fauxToolCall("apply", { item: "y" }, { id: "c2" }),
      ),
      [
        defineExtension({ name: "tools", tools: [tool] }),
        defineExtension({
          name: "x",
          hooks: [
            hook("pi.generation", {
              afterTools: () => {
                throw xError;
              },
            }),
          ],
        }),
        // Break 30G: an async observer is awaited (its rejection reported, the next run only once it
        // settled); a chain that did not await the afterTools hooks passed the synchronous ones.
        defineExtension({
          name: "y",
          hooks: [
            hook("pi.generation", {
              afterTools: async () => {
                await new Promise((r) => setTimeout(r, 5));
                yError = new Error("y broke");
                throw yError;
              },
            }),
          ],
        }),
        defineExtension({
          name: "a",
          hooks: [
            hook("pi.generation", {
              afterTools: async (results) => {
                seen.push(`a:${results.map((r) => r.callId)}`);
                await new Promise((r) => setTimeout(r, 5));
                seen.push("a settled");
              },
            }),
          ],
        }),
        defineExtension({
          name: "b",
          hooks: [
            hook("pi.generation", {
              afterTools: (results) => void seen.push(`b:${results.map((r) => r.callId)}`),
            }),
          ],
        }),
      ],
    );
    expect(await (await root.submit({ type: "input", content: "go" })).wait()).toMatchObject({
      status: "done",
    });
    expect(seen).toEqual(["a:c1,c2", "a settled", "b:c1,c2"]);
    expect(reported).toEqual(["x broke", "y broke"]);
    expect(errors).toHaveLength(2);
    expect(errors[0]).toBe(xError);
    expect(errors[1]).toBe(yError);
  });

  test("beforeCompact: the first decision wins; a throw is reported and the next is asked", async () => {
    const big = (label: string) => `${label} ${"x".repeat(400)}`;
    const respond: FauxResponder = (req) =>
      req.systemPrompt === SUMMARY_SYSTEM_PROMPT
        ? fauxAssistantMessage("MODEL SUMMARY")
        : fauxAssistantMessage(big("a"));
    const asked: string[] = [];
    const { h, root, faux, reported } = await withExtensions(
      respond,
      [
        defineExtension({ name: "x", hooks: [hook("pi.compaction", { beforeCompact: boom("x") })] }),
        defineExtension({
          name: "a",
          hooks: [
            hook("pi.compaction", {
              beforeCompact: () => {
                asked.push("a");
                return { summary: "FROM A" };
              },
            }),
          ],
        }),
        defineExtension({
          name: "b",
          hooks: [
            hook("pi.compaction", {
              beforeCompact: () => {
                asked.push("b");
                return { decline: true };
              },
            }),
          ],
        }),
      ],
      { settings: { compaction: { keepRecentTokens: 250 } } },
    );
    for (let i = 1; i <= 4; i++) await (await root.submit({ type: "input", content: big(`q${i}`) })).wait();
    const record = await h.waitForTask(await root.compact());
    expect(record.state).toMatchObject({ outcome: { status: "completed" } });
    expect(asked).toEqual(["a"]);
    expect(faux.requests.filter((r) => r.systemPrompt === SUMMARY_SYSTEM_PROMPT)).toEqual([]);
    expect(JSON.stringify((await root.entries()).at(-1)!.model)).toContain("FROM A");
    expect(reported).toEqual(["x broke"]);
  });
});

test("beforeTool, afterTool and onAbort get the call's id (pi-ai's ToolCall.id, spec §7.2): two calls of one tool in a round are told apart", async () => {
  const seen: string[] = [];
  const hold = deferred();
  const started = deferred();
  const echoTool = defineTool({
    name: "echo",
    description: "Echo its word; 'wait' waits until aborted",
    parameters: Type.Object({ word: Type.String() }),
    async execute(args, api) {
      if (args.word === "wait") {
        started.resolve();
        await new Promise<void>((_resolve, reject) => {
          api.signal.addEventListener("abort", () => reject(api.signal.reason), { once: true });
        });
      }
      await hold.promise;
      return textResult(args.word);
    },
  });
  const { root } = await withExtensions(
    callsThenAnswer(
      fauxToolCall("echo", { word: "one" }, { id: "call-a" }),
      fauxToolCall("echo", { word: "wait" }, { id: "call-b" }),
    ),
    [
      defineExtension({ name: "tools", tools: [echoTool] }),
      defineExtension({
        name: "watch",
        hooks: [
          hook("pi.tool", {
            beforeTool: (call) => void seen.push(`before ${call.id} ${call.name}`),
            afterTool: (call) => void seen.push(`after ${call.id} ${call.name}`),
            onAbort: (call) => void seen.push(`abort ${call.id} ${call.name}`),
          }),
        ],
      }),
    ],
  );
  await root.submit({ type: "input", content: "go" });
  await started.promise;
  hold.resolve();
  await until(() => seen.includes("after call-a echo"), { what: "the first call's afterTool" });
  await root.abort();
  expect([...seen].sort()).toEqual([
    "abort call-b echo",
    "after call-a echo",
    "before call-a echo",
    "before call-b echo",
  ]);
});

test("a task asks only the hooks of the extensions its conversation selects, in the selection's order", async () => {
  const asked: string[] = [];
  const { h, root } = await withExtensions(echo, [
    defineExtension({
      name: "a",
      hooks: [
        hook("pi.generation", { afterResponse: (_m, ctx) => void asked.push(`a:${ctx.conversationId}`) }),
      ],
    }),
    defineExtension({
      name: "b",
      hooks: [
        hook("pi.generation", { afterResponse: (_m, ctx) => void asked.push(`b:${ctx.conversationId}`) }),
      ],
    }),
  ]);
  await root.configure({ extensions: ["a"] });
  const other = await h.createConversation({
    ownership: { kind: "ownerless" },
    agent: { extensions: ["b"] },
  });
  // Extension order is the selection's order, not the install order.
  const reversed = await h.createConversation({
    ownership: { kind: "ownerless" },
    agent: { extensions: ["b", "a"] },
  });
  await (await root.submit({ type: "input", content: "one" })).wait();
  await (await other.submit({ type: "input", content: "two" })).wait();
  await (await reversed.submit({ type: "input", content: "three" })).wait();
  expect(asked).toEqual([`a:${root.id}`, `b:${other.id}`, `b:${reversed.id}`, `a:${reversed.id}`]);
});

test("a built-in task asks only the hooks registered for its own name: a selected extension's handlers registered for another task, under a built-in hook's name, are not asked (draw 39-D)", async () => {
  // Draw 39-D: hooks composed by handler name whatever task they were registered for passed every
  // test above, whose every registration named the task that asks it.
  const { tool } = itemTool({});
  const asked: string[] = [];
  const { root } = await withExtensions(
    callsThenAnswer(fauxToolCall("apply", { item: "go" }, { id: "c1" })),
    [
      defineExtension({
        name: "mixed",
        tools: [tool],
        hooks: [
          hook("pi.generation", { afterResponse: () => void asked.push("generation:afterResponse") }),
          hook("pi.tool", { afterTool: () => void asked.push("tool:afterTool") }),
          // Registered for other tasks: an extension's own task, and the tool task under generation hooks.
          hook("x.job", {
            beforeRequest: () => void asked.push("x.job:beforeRequest"),
            afterResponse: () => void asked.push("x.job:afterResponse"),
            beforeTool: () => void asked.push("x.job:beforeTool"),
          }),
          hook("pi.tool", {
            afterResponse: () => void asked.push("pi.tool:afterResponse"),
          } as never),
          hook("pi.compaction", {
            afterTool: () => void asked.push("pi.compaction:afterTool"),
          } as never),
        ],
      }),
    ],
  );
  expect(await (await root.submit({ type: "input", content: "go" })).wait()).toMatchObject({
    status: "done",
  });
  expect(asked).toEqual(["generation:afterResponse", "tool:afterTool", "generation:afterResponse"]);
});

test("the hooks given as harness options are asked only of conversations whose selection holds harness-options, in its place (draw 35D)", async () => {
  // Draw 35D: every selection test installed its hooks as extensions; the options' hooks (the
  // harness-options extension) asked of every conversation whatever its selection passed them.
  const asked: string[] = [];
  const { h, root } = await withExtensions(
    echo,
    [
      defineExtension({
        name: "a",
        hooks: [
          hook("pi.generation", { afterResponse: (_m, ctx) => void asked.push(`a:${ctx.conversationId}`) }),
        ],
      }),
    ],
    { hooks: { afterResponse: [(_m, ctx) => void asked.push(`options:${ctx.conversationId}`)] } },
  );
  await root.configure({ extensions: ["a"] });
  const both = await h.createConversation({
    ownership: { kind: "ownerless" },
    agent: { extensions: ["harness-options", "a"] },
  });
  await (await root.submit({ type: "input", content: "one" })).wait();
  await (await both.submit({ type: "input", content: "two" })).wait();
  expect(asked).toEqual([`a:${root.id}`, `options:${both.id}`, `a:${both.id}`]);
});

test("an aborted call in a conversation other than the root asks the onAbort hooks of that conversation's selection, not the root's (draw 34c)", async () => {
  // Draw 34c: the selection tests asked afterResponse, and every onAbort test aborted a call in the
  // root; an abort handler taking the root's hooks passed them.
  const { started, tool: slow } = slowUntilAborted();
  const asked: string[] = [];
  const onAbortOf = (name: string) =>
    defineExtension({
      name,
      hooks: [
        hook("pi.tool", {
          onAbort: (call, result) => {
            asked.push(`${name}:${call.name}`);
            return textResult(`${textOf(result as never).trim()} +${name}`);
          },
        }),
      ],
    });
  const { h, root } = await withExtensions(callsThenAnswer(fauxToolCall("slow", {}, { id: "c1" })), [
    defineExtension({ name: "tools", tools: [slow] }),
    onAbortOf("a"),
    onAbortOf("b"),
  ]);
  await root.configure({ extensions: ["tools", "a"] });
  const other = await h.createConversation({
    ownership: { kind: "ownerless" },
    agent: { extensions: ["tools", "b"] },
  });
  const sub = await other.submit({ type: "input", content: "go" });
  await started.promise;
  const [task] = await h.tasks({ kind: "pi.tool" });
  expect(task?.conversationId).toBe(other.id);
  expect(await h.abortTask(task!.id)).toBe("marked");
  expect((await h.waitForTask(task!.id)).state).toMatchObject({ outcome: { status: "aborted" } });
  expect((await sub.wait()).status).toBe("done");
  expect(asked).toEqual(["b:slow"]);
  const [result] = await toolResults(other);
  expect(textOf(messageOf(result!))).toMatch(/^durable \+b/);
});

test("a compaction in a conversation other than the root asks the beforeCompact hooks of that conversation's selection, not the root's (draw 35b)", async () => {
  // Draw 35b: every beforeCompact test compacted the root; a compaction asking the root's hooks
  // passed them.
  const big = (label: string) => `${label} ${"x".repeat(400)}`;
  const respond: FauxResponder = (req) =>
    req.systemPrompt === SUMMARY_SYSTEM_PROMPT
      ? fauxAssistantMessage("MODEL SUMMARY")
      : fauxAssistantMessage(big("a"));
  const asked: string[] = [];
  const summaryOf = (name: string) =>
    defineExtension({
      name,
      hooks: [
        hook("pi.compaction", {
          beforeCompact: () => {
            asked.push(name);
            return { summary: `FROM ${name}` };
          },
        }),
      ],
    });
  const { h, root, faux } = await withExtensions(respond, [summaryOf("a"), summaryOf("b")], {
    settings: { compaction: { keepRecentTokens: 250 } },
  });
  await root.configure({ extensions: ["a"] });
  const other = await h.createConversation({
    ownership: { kind: "ownerless" },
    agent: { extensions: ["b"] },
  });
  for (let i = 1; i <= 4; i++) await (await other.submit({ type: "input", content: big(`q${i}`) })).wait();
  const record = await h.waitForTask(await other.compact());
  expect(record.state).toMatchObject({ outcome: { status: "completed" } });
  expect(asked).toEqual(["b"]);
  expect(faux.requests.filter((r) => r.systemPrompt === SUMMARY_SYSTEM_PROMPT)).toEqual([]);
  expect(JSON.stringify((await other.entries()).at(-1)!.model)).toContain("FROM b");
});

test("afterTools in a conversation other than the root asks the observers of that conversation's selection, not the root's (draw 35c)", async () => {
  // Draw 35c: every afterTools test ran its round in the root; a round asking the root's afterTools
  // hooks passed them.
  const { tool } = itemTool({});
  const seen: string[] = [];
  const observer = (name: string) =>
    defineExtension({
      name,
      hooks: [
        hook("pi.generation", {
          afterTools: (results) => void seen.push(`${name}:${results.map((r) => r.callId)}`),
        }),
      ],
    });
  const { h, root } = await withExtensions(
    callsThenAnswer(fauxToolCall("apply", { item: "x" }, { id: "c1" })),
    [defineExtension({ name: "tools", tools: [tool] }), observer("a"), observer("b")],
  );
  await root.configure({ extensions: ["tools", "a"] });
  const other = await h.createConversation({
    ownership: { kind: "ownerless" },
    agent: { extensions: ["tools", "b"] },
  });
  expect(await (await other.submit({ type: "input", content: "go" })).wait()).toMatchObject({
    status: "done",
  });
  expect(seen).toEqual(["b:c1"]);
});

test("beforeTool and afterTool of a call in a conversation other than the root ask the hooks of that conversation's selection, not the root's (draw 39cD)", async () => {
  // Draw 39cD: the selection tests asked beforeTool and afterTool of calls in the root only; a call
  // phase taking the root's hooks (its tools still its own conversation's) passed them.
  const asked: string[] = [];
  const echo = defineTool({
    name: "echo",
    description: "Answers ran",
    parameters: Type.Object({}),
    execute: async () => textResult("ran"),
  });
  const watching = (name: string) =>
    defineExtension({
      name,
      hooks: [
        hook("pi.tool", {
          beforeTool: (call) => {
            asked.push(`${name}:before:${call.name}`);
            return undefined;
          },
          afterTool: (call) => {
            asked.push(`${name}:after:${call.name}`);
            return textResult(`${textOf(call.result as never)} +${name}`);
          },
        }),
      ],
    });
  const { h, root } = await withExtensions(callsThenAnswer(fauxToolCall("echo", {}, { id: "c1" })), [
    defineExtension({ name: "tools", tools: [echo] }),
    watching("a"),
    watching("b"),
  ]);
  await root.configure({ extensions: ["tools", "a"] });
  const other = await h.createConversation({
    ownership: { kind: "ownerless" },
    agent: { extensions: ["tools", "b"] },
  });
  expect(await (await other.submit({ type: "input", content: "go" })).wait()).toMatchObject({
    status: "done",
  });
  expect(asked).toEqual(["b:before:echo", "b:after:echo"]);
  const [result] = await toolResults(other);
  expect(textOf(messageOf(result!))).toBe("ran +b");
});

test("afterTools sees every call of the round, a call its request did not offer among them: the round's result entries in call order (draw 37b)", async () => {
  // Draw 37b: every afterTools test's round called offered tools only; results built from the calls
  // that ran as tool tasks (the not-offered call's slot, done with its entry and no task, left out)
  // passed them.
  const { tool } = itemTool({});
  const seen: Array<Array<{ callId: string; name: string; entryId: number | undefined; isError: boolean }>> =
    [];
  const { root } = await withExtensions(
    callsThenAnswer(
      fauxToolCall("apply", { item: "x" }, { id: "c1" }),
      fauxToolCall("ghost", {}, { id: "c2" }),
      fauxToolCall("apply", { item: "y" }, { id: "c3" }),
    ),
    [
      defineExtension({ name: "tools", tools: [tool] }),
      defineExtension({
        name: "a",
        hooks: [
          hook("pi.generation", {
            afterTools: (results) =>
              void seen.push(
                results.map(({ callId, name, entryId, isError }) => ({ callId, name, entryId, isError })),
              ),
          }),
        ],
      }),
    ],
  );
  expect(await (await root.submit({ type: "input", content: "go" })).wait()).toMatchObject({
    status: "done",
  });
  const entries = await toolResults(root);
  const entryOf = (callId: string) =>
    entries.find((e) => (messageOf(e) as { toolCallId?: string }).toolCallId === callId)?.id;
  expect(diagnosticsOf(entries.find((e) => entryOf("c2") === e.id)!).map((d) => d.code)).toEqual([
    "tool_unavailable",
  ]);
  expect(seen).toEqual([
    [
      { callId: "c1", name: "apply", entryId: entryOf("c1"), isError: false },
      { callId: "c2", name: "ghost", entryId: entryOf("c2"), isError: true },
      { callId: "c3", name: "apply", entryId: entryOf("c3"), isError: false },
    ],
  ]);
  expect(new Set(seen[0]!.map((r) => r.entryId)).size).toBe(3);
});

test("a changed selection is the next task's hooks: a conversation reconfigured from [a] to [b, a], then to none of them, asks exactly those, in that order", async () => {
  // Break 30B: every named test configured each conversation once, before its only run; hooks kept
  // per conversation from its first resolution passed them.
  const asked: string[] = [];
  const { root, registry } = await withExtensions(echo, [
    defineExtension({
      name: "a",
      hooks: [hook("pi.generation", { afterResponse: () => void asked.push("a") })],
    }),
    defineExtension({
      name: "b",
      hooks: [hook("pi.generation", { afterResponse: () => void asked.push("b") })],
    }),
  ]);
  await root.configure({ extensions: ["a"] });
  await (await root.submit({ type: "input", content: "one" })).wait();
  expect(asked).toEqual(["a"]);
  await root.configure({ extensions: ["b", "a"] });
  await (await root.submit({ type: "input", content: "two" })).wait();
  expect(asked).toEqual(["a", "b", "a"]);
  // An extension installed later and then selected first is asked first.
  registry.install(
    defineExtension({
      name: "c",
      hooks: [hook("pi.generation", { afterResponse: () => void asked.push("c") })],
    }),
  );
  await root.configure({ extensions: ["c", "a"] });
  await (await root.submit({ type: "input", content: "three" })).wait();
  expect(asked).toEqual(["a", "b", "a", "c", "a"]);
  await root.configure({ extensions: [] });
  await (await root.submit({ type: "input", content: "four" })).wait();
  expect(asked).toEqual(["a", "b", "a", "c", "a"]);
});

test("a tool task and a compaction task ask only the hooks of the extensions their conversation selects", async () => {
  // Break 29E: the named test asked the generation's hooks only; tool and compaction tasks given every
  // installed extension's hooks passed it.
  const { tool } = itemTool({});
  const asked: string[] = [];
  const watcher = (name: string) =>
    defineExtension({
      name,
      hooks: [
        hook("pi.tool", {
          beforeTool: () => void asked.push(`${name}:beforeTool`),
          afterTool: () => void asked.push(`${name}:afterTool`),
        }),
        hook("pi.compaction", {
          beforeCompact: () => {
            asked.push(`${name}:beforeCompact`);
            return { decline: true };
          },
        }),
      ],
    });
  const { h, root } = await withExtensions(
    callsThenAnswer(fauxToolCall("apply", { item: "go" }, { id: "c1" })),
    [
      defineExtension({ name: "tools", tools: [tool] }),
      watcher("a"),
      watcher("b"),
      defineExtension({
        name: "after",
        hooks: [hook("pi.tool", { afterTool: () => void asked.push("after:afterTool") })],
      }),
    ],
    { settings: { compaction: { keepRecentTokens: 1 } } },
  );
  await root.configure({ extensions: ["tools", "b"] });
  expect(await (await root.submit({ type: "input", content: "go" })).wait()).toMatchObject({
    status: "done",
  });
  expect(asked).toEqual(["b:beforeTool", "b:afterTool"]);
  const compaction = await root.compact();
  expect((await h.waitForTask(compaction)).state).toMatchObject({ status: "terminal" });
  expect(asked).toEqual(["b:beforeTool", "b:afterTool", "b:beforeCompact"]);
  // A conversation whose selection has no beforeTool hook: its call starts at the execute phase,
  // which resolves the hooks again, the selected ones only.
  asked.length = 0;
  const other = await h.createConversation({
    ownership: { kind: "ownerless" },
    agent: { extensions: ["tools", "after"] },
  });
  expect(await (await other.submit({ type: "input", content: "go" })).wait()).toMatchObject({
    status: "done",
  });
  expect(asked).toEqual(["after:afterTool"]);
});

test("every built-in hook is asked of the selected extensions only: beforeRequest, onYield, afterTools and an aborted call's onAbort", async () => {
  // Draw 32B: the named tests asked afterResponse, beforeTool, afterTool and beforeCompact only; the
  // tool task's abort handler given every installed extension's onAbort hooks passed them.
  const { started, tool: slow } = slowUntilAborted();
  const asked: string[] = [];
  const watcher = (name: string) =>
    defineExtension({
      name,
      hooks: [
        hook("pi.generation", {
          beforeRequest: () => void asked.push(`${name}:beforeRequest`),
          onYield: () => void asked.push(`${name}:onYield`),
          afterTools: () => void asked.push(`${name}:afterTools`),
        }),
        hook("pi.tool", { onAbort: () => void asked.push(`${name}:onAbort`) }),
      ],
    });
  const { h, root } = await withExtensions(callsThenAnswer(fauxToolCall("slow", {}, { id: "c1" })), [
    defineExtension({ name: "tools", tools: [slow] }),
    watcher("a"),
    watcher("b"),
  ]);
  await root.configure({ extensions: ["tools", "b"] });
  const sub = await root.submit({ type: "input", content: "go" });
  await started.promise;
  await until(() => Boolean(liveOf(h).tools?.find((t) => t.name === "slow")?.taskId));
  const slowTask = liveOf(h).tools!.find((t) => t.name === "slow")!.taskId!;
  expect(await h.abortTask(slowTask)).toBe("marked");
  expect((await h.waitForTask(slowTask)).state).toMatchObject({ outcome: { status: "aborted" } });
  expect((await sub.wait()).status).toBe("done");
  expect(asked.every((a) => a.startsWith("b:"))).toBe(true);
  expect(new Set(asked)).toEqual(new Set(["b:beforeRequest", "b:onAbort", "b:afterTools", "b:onYield"]));
});

test("a hook's error after its phase was aborted propagates: it is not reported and the run ends aborted", async () => {
  const entered = deferred();
  const leave = deferred();
  const { h, root, faux, reported } = await withExtensions(echo, [
    defineExtension({
      name: "slow",
      hooks: [
        hook("pi.generation", {
          beforeRequest: async () => {
            entered.resolve();
            await leave.promise;
            throw new Error("failed while aborting");
          },
        }),
      ],
    }),
  ]);
  const input = await root.submit({ type: "input", content: "hi" });
  await entered.promise;
  const aborting = root.abort();
  // The abort mark committed: the generation's invocation is signalled, then the hook fails.
  await until(() =>
    h.inspect().tasks.some((t) => t.record.kind === "pi.generation" && t.record.abortRequested),
  );
  await new Promise((r) => setTimeout(r, 10));
  leave.resolve();
  await aborting;
  expect(await input.wait()).toMatchObject({ status: "unanswered", reason: "aborted" });
  expect(reported).toEqual([]);
  // Propagated, not swallowed: the preparation stopped there, so no request was sent.
  expect(faux.requests).toHaveLength(0);
});

test("beforeRequest: an error after its phase was signalled by the harness closing (no abort mark) propagates too: not reported, the next hook not asked", async () => {
  // Break 28D: every run-phase case signalled through an abort mark; a guard that let only an abort
  // mark's signal propagate, reporting the error of a phase the closing harness signalled, passed.
  const entered = deferred<AbortSignal>();
  const leave = deferred();
  const next: string[] = [];
  const { h, root, faux, reported } = await withExtensions(echo, [
    defineExtension({
      name: "slow",
      hooks: [
        hook("pi.generation", {
          beforeRequest: async (_messages, _api, ctx) => {
            entered.resolve(ctx.signal);
            await leave.promise;
            throw new Error("failed while closing");
          },
        }),
      ],
    }),
    defineExtension({
      name: "next",
      hooks: [hook("pi.generation", { beforeRequest: () => void next.push("beforeRequest") })],
    }),
  ]);
  await root.submit({ type: "input", content: "hi" });
  const signal = await entered.promise;
  const closing = h.close();
  await until(() => signal.aborted, { what: "the phase signalled by the close" });
  leave.resolve();
  await closing;
  expect(reported).toEqual([]);
  expect(next).toEqual([]);
  expect(faux.requests).toHaveLength(0);
});

test.each([
  ["onYield", "pi.generation"],
  ["beforeTool", "pi.tool"],
  ["afterTool", "pi.tool"],
] as const)(
  "%s: an error after its phase was signalled by the harness closing (no abort mark) propagates too: not reported, the next hook not asked (draw 32c)",
  async (name, task) => {
    // Draw 32c: these hooks' cases were signalled through an abort mark only (each hook has its own
    // guard); a guard letting only an abort mark's signal propagate (reporting the error of a phase
    // the closing harness signalled) passed every test.
    const entered = deferred<AbortSignal>();
    const leave = deferred();
    const next: string[] = [];
    const failing = async (_input: unknown, _api: unknown, ctx: { signal: AbortSignal }) => {
      entered.resolve(ctx.signal);
      await leave.promise;
      throw new Error(`${name} failed while closing`);
    };
    const { tool } = itemTool({});
    const respond =
      task === "pi.tool" ? callsThenAnswer(fauxToolCall("apply", { item: "x" }, { id: "c1" })) : echo;
    const { h, reported, root } = await withExtensions(respond, [
      defineExtension({ name: "tools", tools: [tool] }),
      defineExtension({ name: "slow", hooks: [hook(task, { [name]: failing } as never)] }),
      defineExtension({ name: "next", hooks: [hook(task, { [name]: () => void next.push(name) } as never)] }),
    ]);
    await root.submit({ type: "input", content: "hi" });
    const signal = await entered.promise;
    const closing = h.close();
    await until(() => signal.aborted, { what: "the phase signalled by the close" });
    leave.resolve();
    await closing;
    expect(reported).toEqual([]);
    expect(next).toEqual([]);
  },
);

test.each([
  ["afterResponse", "pi.generation"],
  ["onYield", "pi.generation"],
  ["afterTools", "pi.generation"],
  ["beforeTool", "pi.tool"],
  ["afterTool", "pi.tool"],
] as const)(
  "%s: an error after its phase was aborted propagates too: not reported (nor a block), the run ends aborted",
  async (name, task) => {
    const entered = deferred();
    const leave = deferred();
    const failing = async () => {
      entered.resolve();
      await leave.promise;
      throw new Error(`${name} failed while aborting`);
    };
    const { tool } = itemTool({});
    // A tool round for the tool hooks and afterTools; a plain answer for the others.
    const respond =
      task === "pi.tool" || name === "afterTools"
        ? callsThenAnswer(fauxToolCall("apply", { item: "x" }, { id: "c1" }))
        : echo;
    // A second extension's hook of the same name: an error that propagates ends the chain before it.
    const next: string[] = [];
    const { h, root, reported } = await withExtensions(respond, [
      defineExtension({ name: "tools", tools: [tool] }),
      defineExtension({ name: "slow", hooks: [hook(task, { [name]: failing } as never)] }),
      defineExtension({
        name: "next",
        hooks: [hook(task, { [name]: () => void next.push(name) } as never)],
      }),
    ]);
    const input = await root.submit({ type: "input", content: "hi" });
    await entered.promise;
    const aborting = root.abort();
    await until(() => h.inspect().tasks.some((t) => t.record.kind === task && t.record.abortRequested), {
      what: `${task} marked`,
    });
    leave.resolve();
    await aborting;
    expect(await input.wait()).toMatchObject({ status: "unanswered", reason: "aborted" });
    expect(reported).toEqual([]);
    // No result carries the hook's error as its text (a beforeTool throw would otherwise block with it).
    for (const result of await toolResults(root))
      expect(textOf(messageOf(result))).not.toContain("failed while aborting");
    expect(next).toEqual([]);
  },
);

test("beforeCompact: an error after its compaction was aborted propagates too: not reported, the compaction ends aborted", async () => {
  const next: string[] = [];
  const big = (label: string) => `${label} ${"x".repeat(400)}`;
  const entered = deferred();
  const leave = deferred();
  const { h, root, reported } = await withExtensions(
    (req) =>
      req.systemPrompt === SUMMARY_SYSTEM_PROMPT
        ? fauxAssistantMessage("MODEL SUMMARY")
        : fauxAssistantMessage(big("a")),
    [
      defineExtension({
        name: "slow",
        hooks: [
          hook("pi.compaction", {
            beforeCompact: async () => {
              entered.resolve();
              await leave.promise;
              throw new Error("beforeCompact failed while aborting");
            },
          }),
        ],
      }),
      // The next extension's hook is never asked: the error ends the chain.
      defineExtension({
        name: "next",
        hooks: [hook("pi.compaction", { beforeCompact: () => void next.push("beforeCompact") })],
      }),
    ],
    { settings: { compaction: { keepRecentTokens: 250, enabled: false } } },
  );
  for (let i = 1; i <= 4; i++) await (await root.submit({ type: "input", content: big(`q${i}`) })).wait();
  const id = await root.compact();
  await entered.promise;
  const aborting = h.abortTask(id);
  await until(() => h.inspect().tasks.some((t) => t.record.id === id && t.record.abortRequested), {
    what: "compaction marked",
  });
  leave.resolve();
  await aborting;
  const record = await h.waitForTask(id);
  expect(record.state).toMatchObject({ outcome: { status: "aborted" } });
  expect(reported).toEqual([]);
  expect(next).toEqual([]);
});

test("beforeCompact: an error after its compaction was signalled by the harness closing (no abort mark) propagates too: not reported, the next hook not asked (draw 32c)", async () => {
  // Draw 32c: the compaction's case was signalled through an abort mark only; a guard letting only an
  // abort mark's signal propagate passed every test.
  const next: string[] = [];
  const big = (label: string) => `${label} ${"x".repeat(400)}`;
  const entered = deferred<AbortSignal>();
  const leave = deferred();
  const { h, root, reported } = await withExtensions(
    (req) =>
      req.systemPrompt === SUMMARY_SYSTEM_PROMPT
        ? fauxAssistantMessage("MODEL SUMMARY")
        : fauxAssistantMessage(big("a")),
    [
      defineExtension({
        name: "slow",
        hooks: [
          hook("pi.compaction", {
            beforeCompact: async (_input, _api, ctx) => {
              entered.resolve(ctx.signal);
              await leave.promise;
              throw new Error("beforeCompact failed while closing");
            },
          }),
        ],
      }),
      defineExtension({
        name: "next",
        hooks: [hook("pi.compaction", { beforeCompact: () => void next.push("beforeCompact") })],
      }),
    ],
    { settings: { compaction: { keepRecentTokens: 250, enabled: false } } },
  );
  for (let i = 1; i <= 4; i++) await (await root.submit({ type: "input", content: big(`q${i}`) })).wait();
  await root.compact();
  const signal = await entered.promise;
  const closing = h.close();
  await until(() => signal.aborted, { what: "the compaction signalled by the close" });
  leave.resolve();
  await closing;
  expect(reported).toEqual([]);
  expect(next).toEqual([]);
});

test("onAbort: an error after its abort invocation was signalled (the harness closing) propagates: not reported", async () => {
  const next: string[] = [];
  const started = deferred();
  const entered = deferred<AbortSignal>();
  const leave = deferred();
  const slow = defineTool({
    name: "slow",
    description: "Works until aborted",
    parameters: Type.Object({}),
    async execute(_args, api) {
      started.resolve();
      await new Promise<void>((_resolve, reject) => {
        api.signal.addEventListener("abort", () => reject(api.signal.reason), { once: true });
      });
      return textResult("finished");
    },
  });
  const { h, root, reported } = await withExtensions(
    callsThenAnswer(fauxToolCall("slow", {}, { id: "c1" })),
    [
      defineExtension({ name: "tools", tools: [slow] }),
      defineExtension({
        name: "slow-abort",
        hooks: [
          hook("pi.tool", {
            onAbort: async (_call, _result, _api, ctx) => {
              entered.resolve(ctx.signal);
              await leave.promise;
              throw new Error("onAbort failed while closing");
            },
          }),
        ],
      }),
      defineExtension({
        name: "next",
        hooks: [hook("pi.tool", { onAbort: () => void next.push("onAbort") })],
      }),
    ],
  );
  await root.submit({ type: "input", content: "go" });
  await started.promise;
  void root.abort().catch(() => undefined);
  const signal = await entered.promise;
  const closing = h.close();
  await until(() => signal.aborted, { what: "the abort invocation signalled" });
  leave.resolve();
  await closing;
  expect(reported).toEqual([]);
  expect(next).toEqual([]);
});

/** A tool that writes one durable line, then works until its call is aborted; `started` once it runs. */
function slowUntilAborted() {
  const started = deferred();
  const tool = defineTool({
    name: "slow",
    description: "Works until aborted",
    parameters: Type.Object({}),
    async execute(_args, api) {
      api.output("durable\n");
      started.resolve();
      await new Promise<void>((_resolve, reject) => {
        api.signal.addEventListener("abort", () => reject(api.signal.reason), { once: true });
      });
      return textResult("finished");
    },
  });
  return { started, tool };
}

test("a tool call keeps the afterTool hooks of the selection its phase resolved: a reconfigure while it runs reaches only the next call (draw 37C)", async () => {
  // Draw 37, 3: the named tests changed a selection between runs, or the registry during a call; a
  // tool's afterTool read from the committed pi.agent at dispatch (the phase's snapshot kept) passed.
  const { tool: work, started, release } = heldFirstCallTool();
  const tagger = (name: string) =>
    defineExtension({
      name,
      hooks: [
        hook("pi.tool", { afterTool: (call) => textResult(`${textOf(call.result as never)} ${name}`) }),
      ],
    });
  const eachTurn: FauxResponder = (req, n) =>
    req.messages[req.messages.length - 1]!.role === "user"
      ? fauxAssistantMessage([fauxToolCall("work", {}, { id: `call-${n}` })], { stopReason: "toolUse" })
      : fauxAssistantMessage("done");
  const { root } = await withExtensions(eachTurn, [
    defineExtension({ name: "tools", tools: [work] }),
    tagger("a"),
    tagger("b"),
  ]);
  await root.configure({ extensions: ["tools", "a"] });
  const one = await root.submit({ type: "input", content: "one" });
  await started.promise;
  await root.configure({ extensions: ["tools", "b"] });
  release.resolve();
  expect(await one.wait()).toMatchObject({ status: "done" });
  await (await root.submit({ type: "input", content: "two" })).wait();
  expect((await toolResults(root)).map((e) => textOf(messageOf(e)))).toEqual(["ran a", "ran b"]);
});
