/**
 * pi.system entries (spec §8.1, §8.3, §8.7): preparation appends one, with content "", only when
 * the instructions or the offered tools differ from what the active range replays; after a head
 * marker the next preparation writes a complete baseline again.
 */
import { expect, test } from "vitest";
import type { EntryRecord } from "../../../worker/index.ts";
import { echo, open } from "./fixtures.ts";

type SystemRecord = { role: string; content: string; sections: Record<string, string | null> };
const systemOf = (e: EntryRecord) => (e.model as unknown as SystemRecord[])[0]!;

test("preparation appends a pi.system entry only when the instructions change, and a full baseline after a head marker", async () => {
  const { root } = await open(echo);
  await root.configure({ instructions: "be brief" });
  const ask = async (content: string) => (await root.submit({ type: "input", content })).wait();
  await ask("one");
  await ask("two");
  const systems = async () => (await root.entries()).filter((e) => e.kind === "pi.system");
  expect((await systems()).map(systemOf)).toMatchObject([
    { role: "system", content: "", sections: { instructions: "be brief" } },
  ]);
  // The entry comes before the request it prepared: user, system, assistant.
  expect((await root.entries()).slice(0, 3).map((e) => e.kind)).toEqual([
    "pi.user",
    "pi.system",
    "pi.assistant",
  ]);

  await root.configure({ instructions: "be thorough" });
  await ask("three");
  expect((await systems()).map((e) => systemOf(e).sections)).toEqual([
    { instructions: "be brief" },
    { instructions: "be thorough" },
  ]);

  await root.reset();
  await ask("four");
  const after = await systems();
  expect(after).toHaveLength(3);
  expect(systemOf(after[2]!).sections).toEqual({ instructions: "be thorough" });
});
