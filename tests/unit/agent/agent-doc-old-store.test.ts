/**
 * pi.agent forks "asOf" (spec §2.2) also when its records were migrated from a store that kept no
 * fork rule (schema 7 stored the history only): the agent harness names pi.agent "asOf" for the
 * migration, so a fork of such a conversation gets the agent as of the fork entry (break 28L: with
 * the harness's own rule for pi.agent dropped, every other named test passed: their pi.agent records
 * are written by this code, with the token's fork rule).
 */
import { expect, test } from "vitest";
import { AgentHarness } from "../../../worker/index.ts";
import { fauxAgentModel, memoryStore } from "../../../worker/testing.ts";
import fixture from "../core/fixtures/v6-store.json" with { type: "json" };
import { cleanups, echo } from "./fixtures.ts";

type Row = Record<string, string | number | null>;

/** The core fixture's schema 6 store, its rewindable document "hist" renamed pi.agent (values kept as instructions). */
async function v6StoreWithAgent() {
  const old = await memoryStore(undefined, { schemaVersion: fixture.schemaVersion });
  await old.commit(async (sql) => {
    for (const [table, rows] of Object.entries(fixture.tables as Record<string, Row[]>))
      for (const given of rows) {
        const row = { ...given };
        if (row["name"] === "hist") {
          row["name"] = "pi.agent";
          if (typeof row["value"] === "string")
            row["value"] = JSON.stringify({ instructions: `n${JSON.parse(row["value"]).n}` });
        }
        const columns = Object.keys(row);
        await sql.run(
          `INSERT INTO ${table} (${columns.join(", ")}) VALUES (${columns.map(() => "?").join(", ")})`,
          columns.map((c) => row[c] ?? null),
        );
      }
  });
  const image = old.image();
  await old.close();
  return memoryStore(image);
}

test("a pi.agent migrated from a store that kept no fork rule forks asOf: the child gets the agent as of the fork entry", async () => {
  const faux = fauxAgentModel(echo);
  cleanups.push(async () => faux.unregister());
  const h = await AgentHarness.open(await v6StoreWithAgent(), {
    models: faux.models,
    defaultModel: faux.ref,
  });
  cleanups.push(() => h.close().catch(() => undefined));
  expect(await h.docRecord(1, "pi.agent")).toMatchObject({ history: "rewindable", fork: "asOf" });
  const root = (await h.loadedConversation(1))!;
  const child = await root.fork(fixture.at.e2, { ownership: { kind: "ownerless" } });
  expect(await child.agentState()).toEqual({ instructions: "n2" }); // as of e2, not the current n4
  expect(await h.docRecord(child.id, "pi.agent")).toMatchObject({ history: "rewindable", fork: "asOf" });
});
