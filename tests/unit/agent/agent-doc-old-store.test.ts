/**
 * pi.agent forks "asOf" (spec §2.2) also when its records were migrated from a store that kept no
 * fork rule (schema 7 stored the history only): the agent harness names pi.agent "asOf" for the
 * migration, so a fork of such a conversation gets the agent as of the fork entry (break 28L: with
 * the harness's own rule for pi.agent dropped, every other named test passed: their pi.agent records
 * are written by this code, with the token's fork rule).
 */
import { expect, test } from "vitest";
import { AgentHarness } from "../../../worker/index.ts";
import { fauxAgentModel } from "../../../worker/testing.ts";
import { v6Fixture as fixture, v6Store } from "../core/fixtures/v6-store.ts";
import { cleanups, echo } from "./fixtures.ts";

/** The core fixture's schema 6 store, its rewindable document "hist" renamed pi.agent (values kept as instructions). */
const v6StoreWithAgent = () =>
  v6Store((_table, row) => {
    if (row["name"] !== "hist") return row;
    const value = row["value"] ?? null;
    return {
      ...row,
      name: "pi.agent",
      value: typeof value === "string" ? JSON.stringify({ instructions: `n${JSON.parse(value).n}` }) : value,
    };
  });

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
