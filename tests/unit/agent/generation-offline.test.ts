/**
 * A model request that fails on the network while the platform says offline: the run waits durably
 * for the network (phase `offline`, shown in pi.live) without spending the retry budget, and goes on
 * when the network returns; a reload while waiting waits again; an abort ends the wait. A network
 * failure while online gets the timed retry, and a rejected key fails at once, offline or not. The
 * platform's network is the kit's `networkSwitch`.
 */
import type { AssistantMessage } from "@mariozechner/pi-ai";
import { describe, expect, test } from "vitest";
import type { NetworkState } from "../../../worker/agent/network.ts";
import { isNetworkError, isRetryableError } from "../../../worker/agent/services.ts";
import type { AgentHarness, MemoryStore } from "../../../worker/index.ts";
import {
  crashingStore,
  deferred,
  type FauxResponder,
  fauxError,
  type NetworkSwitch,
  networkSwitch,
  until,
} from "../../../worker/testing.ts";
import {
  alternationProblems,
  cleanups,
  echo,
  kinds,
  liveOf,
  messageOf,
  open,
  reopen,
  textOf,
  transcript,
} from "./fixtures.ts";

/** Browsers' and SDKs' words for a request that never reached its server. */
const OFFLINE = "Connection error.";
const settings = { retry: { baseDelayMs: 5, maxDelayMs: 20, maxRetries: 2 } };

/**
 * A harness on the kit's network switch (offline unless `online`) with this file's retry settings,
 * whose model answers with `respond(network)`: by default it echoes while the network is online and
 * fails with OFFLINE while not.
 */
async function openOffline(
  options: {
    online?: boolean;
    respond?: (network: NetworkSwitch) => FauxResponder;
    store?: MemoryStore;
  } = {},
) {
  const { online = false, respond, ...rest } = options;
  const network = networkSwitch({ online });
  const model: FauxResponder =
    respond?.(network) ?? ((req, n) => (network.online ? echo(req, n) : fauxError(OFFLINE)));
  return { ...(await open(model, { settings, network, ...rest })), network };
}

const stopReasons = (entries: Awaited<ReturnType<typeof transcript>>) =>
  entries.filter((e) => e.kind === "pi.assistant").map((e) => (messageOf(e) as AssistantMessage).stopReason);

describe("a network failure while offline", () => {
  test("when the platform next looks for the network goes to pi.live as it is scheduled, and goes with the wait", async () => {
    const { h, root, network } = await openOffline();
    const sub = await root.submit({ type: "input", content: "hi" });
    await until(() => network.waiting === 1, { what: "the run waits for the network" });
    expect(liveOf(h).generation?.offline?.nextCheckAt).toBeUndefined();
    network.announce(1_700_000_010_000);
    await until(() => liveOf(h).generation?.offline?.nextCheckAt === 1_700_000_010_000, {
      what: "the next look in pi.live",
    });
    network.announce(1_700_000_020_000);
    await until(() => liveOf(h).generation?.offline?.nextCheckAt === 1_700_000_020_000, {
      what: "the one after",
    });
    expect(liveOf(h).generation?.offline?.error).toBe(OFFLINE);
    network.set(true);
    expect((await sub.wait()).status).toBe("done");
    expect(liveOf(h).generation).toBeUndefined();
  });

  test("waits for the network past the old retry budget, shown in pi.live, then runs once when it returns", async () => {
    const { h, root, faux, network } = await openOffline();
    const sub = await root.submit({ type: "input", content: "hi" });
    await until(() => network.waiting === 1, { what: "the run waits for the network" });
    const waiting = liveOf(h).generation;
    expect(waiting).toMatchObject({ attempt: 1, offline: { error: OFFLINE } });
    expect(waiting?.retry).toBeUndefined();
    // Three backoffs of at most 20 ms were the whole budget: well past it, nothing more was sent.
    await new Promise((r) => setTimeout(r, 200));
    expect(faux.requests).toHaveLength(1);
    expect(root.busy).toBe(true);
    expect(network.waiting).toBe(1);

    network.set(true);
    expect((await sub.wait()).status).toBe("done");
    expect(faux.requests).toHaveLength(2);
    const entries = await transcript(root);
    expect(kinds(entries)).toEqual(["pi.user", "pi.assistant", "pi.assistant"]);
    expect(stopReasons(entries)).toEqual(["error", "stop"]);
    expect(textOf(messageOf(entries[2]!))).toBe("echo: hi");
    expect(alternationProblems(entries)).toEqual([]);
    await root.waitForIdle();
    expect(liveOf(h).generation).toBeUndefined();
  });

  test("attempts that failed offline are not counted: more of them than maxRetries, then an answer", async () => {
    // Each time the network "returns", the request fails on it again (and the platform says offline).
    const { root, faux, network } = await openOffline({
      respond: (network) => (req, n) => {
        if (n > 4) return echo(req, n);
        network.set(false);
        return fauxError("TypeError: Failed to fetch");
      },
    });
    const sub = await root.submit({ type: "input", content: "hi" });
    for (let woken = 0; woken < 4; woken++) {
      await until(() => network.waiting === 1, { what: `wait ${woken + 1} for the network` });
      network.set(true);
    }
    expect((await sub.wait()).status).toBe("done");
    expect(faux.requests).toHaveLength(5);
    expect(stopReasons(await transcript(root))).toEqual(["error", "error", "error", "error", "stop"]);
  });

  test("the retry budget counts only the attempts made online: after an offline wait, 503s get maxRetries retries", async () => {
    const { root, faux, network } = await openOffline({
      respond: () => (_req, n) => (n === 1 ? fauxError(OFFLINE) : fauxError("503 Service Unavailable")),
    });
    const sub = await root.submit({ type: "input", content: "hi" });
    await until(() => network.waiting === 1, { what: "the run waits for the network" });
    network.set(true);
    expect(await sub.wait()).toMatchObject({ status: "unanswered", reason: "model_error" });
    // One uncounted attempt, then the first try and maxRetries (2) retries.
    expect(faux.requests).toHaveLength(4);
  });

  test("a retry after an offline wait is at now + retryDelayMs of the attempts made online: the first retry waits the base delay, not a doubled one (draw 34C)", async () => {
    // Draw 34C: the backoff counting the attempt that failed offline (a doubled first delay) passed
    // every test: the retries after an offline wait were counted, never timed.
    let clock = 2_000_000_000;
    const network = networkSwitch({ online: false });
    const { h, root, faux } = await open(
      (req, n) =>
        n === 1 ? fauxError(OFFLINE) : n === 2 ? fauxError("503 Service Unavailable") : echo(req, n),
      {
        now: () => clock,
        settings: { retry: { baseDelayMs: 40, maxDelayMs: 10_000, maxRetries: 2 } },
        network,
      },
    );
    const sub = await root.submit({ type: "input", content: "hi" });
    await until(() => network.waiting === 1, { what: "the run waits for the network" });
    network.set(true);
    await until(() => liveOf(h).generation?.retry !== undefined && faux.requests.length === 2, {
      what: "the retry after the 503",
    });
    expect(liveOf(h).generation).toMatchObject({ attempt: 2, retry: { at: 2_000_000_000 + 40 } });
    clock += 10_000;
    expect((await sub.wait()).status).toBe("done");
    expect(faux.requests).toHaveLength(3);
  });

  test("a reload while waiting waits again, sends nothing until the network returns, then answers once", async () => {
    const crash = await crashingStore({ at: Number.POSITIVE_INFINITY });
    const { h, root, faux, network } = await openOffline({ store: crash.store });
    await root.submit({ type: "input", content: "hi", requestId: "r1" });
    await until(() => network.waiting === 1, { what: "the run waits for the network" });
    // The engine dies here: a new one opens what was committed.
    crash.store.kill("the page was reloaded");
    cleanups.push(() => h.close().catch(() => undefined));
    const after = networkSwitch({ online: false });
    const h2 = await reopen(await crash.recover(), {
      models: faux.models,
      defaultModel: faux.ref,
      settings,
      network: after,
    });
    await until(() => after.waiting === 1, { what: "the reopened engine waits for the network" });
    expect(faux.requests).toHaveLength(1);
    network.set(true);
    after.set(true);
    const root2 = await h2.root();
    const again = await root2.submit({ type: "input", content: "hi", requestId: "r1" });
    expect((await again.wait()).status).toBe("done");
    expect(faux.requests).toHaveLength(2);
    expect(stopReasons(await transcript(root2))).toEqual(["error", "stop"]);
  });

  test("an abort while waiting ends the run aborted; the network's return sends nothing", async () => {
    const { h, root, faux, network } = await openOffline();
    const sub = await root.submit({ type: "input", content: "hi" });
    await until(() => network.waiting === 1, { what: "the run waits for the network" });
    await root.abort();
    expect(await sub.wait()).toMatchObject({ status: "unanswered", reason: "aborted" });
    expect(network.waiting).toBe(0);
    await root.waitForIdle();
    network.set(true);
    expect(faux.requests).toHaveLength(1);
    expect(liveOf(h).run).toBeUndefined();
    expect(liveOf(h).generation).toBeUndefined();
    expect(root.busy).toBe(false);
  });
  test("the network is asked outside the transaction: a commit the check starts lands before the failed attempt is kept (draw 41b, 11)", async () => {
    // Draw 41b, 11: the network's check (an external effect: it may probe) taken inside the commit
    // that classifies the failed attempt passed every test; here the check starts a commit of its
    // own, which lands first only when the check runs off the line.
    let harness: AgentHarness | undefined;
    let noted: Promise<unknown> | undefined;
    const base = networkSwitch({ online: false });
    const network: NetworkState = {
      check(signal) {
        noted ??= harness!.transaction((tx) =>
          tx.appendEntry(2, { kind: "app.note", data: "from the check" }),
        );
        return base.check(signal);
      },
      whenOnline: (signal, onNextCheck) => base.whenOnline(signal, onNextCheck),
    };
    const { h, root } = await open((req, n) => (base.online ? echo(req, n) : fauxError(OFFLINE)), {
      settings,
      network,
    });
    harness = h;
    const other = await h.createConversation({ ownership: { kind: "ownerless" } });
    expect(other.id).toBe(2);
    const sub = await root.submit({ type: "input", content: "hi" });
    await until(() => base.waiting === 1, { what: "the run waits for the network" });
    await noted;
    base.set(true);
    expect((await sub.wait()).status).toBe("done");
    const note = (await other.entries()).find((e) => e.kind === "app.note");
    const failed = (await transcript(root)).find(
      (e) => e.kind === "pi.assistant" && (messageOf(e) as AssistantMessage).stopReason === "error",
    );
    expect(note).toBeDefined();
    expect(failed).toBeDefined();
    expect(note!.id).toBeLessThan(failed!.id);
  });
});

describe("other failures are as before", () => {
  test("a network failure while online is retried on the timed backoff and gives up after maxRetries", async () => {
    const { root, faux, network } = await openOffline({
      online: true,
      respond: () => () => fauxError(OFFLINE),
    });
    const sub = await root.submit({ type: "input", content: "hi" });
    expect(await sub.wait()).toMatchObject({ status: "unanswered", reason: "model_error" });
    expect(faux.requests).toHaveLength(3);
    expect(network.checks).toBe(3);
  });

  test("with the retry policy disabled, a network failure while offline fails at once: no wait, and the network is not asked", async () => {
    // Break 26C: the disabled policy was tried only with a provider error while online, so an
    // offline wait that ignored it went unseen.
    const network = networkSwitch({ online: false });
    const { root, faux } = await open(() => fauxError(OFFLINE), {
      settings: { retry: { enabled: false } },
      network,
    });
    const sub = await root.submit({ type: "input", content: "hi" });
    expect(await sub.wait()).toMatchObject({ status: "unanswered", reason: "model_error", detail: OFFLINE });
    expect(faux.requests).toHaveLength(1);
    expect(network.checks).toBe(0);
  });

  test("the retry policy is read when the offline failure is classified: turned off while the request is out, it fails at once and the network is not asked (draw 35b C)", async () => {
    // Draw 35b C: the policy's enabled flag for the offline wait read as the request was sent
    // passed every test (the disabled one above is disabled from the start).
    const network = networkSwitch({ online: false });
    const gate = deferred();
    let retry = { enabled: true };
    const { root, faux } = await open(
      async () => {
        await gate.promise;
        return fauxError(OFFLINE);
      },
      { settings: () => ({ retry: { ...retry, baseDelayMs: 5 } }), network },
    );
    const sub = await root.submit({ type: "input", content: "hi" });
    await until(() => faux.requests.length === 1, { what: "request sent" });
    retry = { enabled: false };
    gate.resolve();
    await until(() => !root.busy || network.checks > 0, { what: "the failure classified" });
    expect(network.checks).toBe(0);
    expect(await sub.wait()).toMatchObject({ status: "unanswered", reason: "model_error", detail: OFFLINE });
    expect(faux.requests).toHaveLength(1);
  });

  test("a rejected key fails at once, offline or not, and the network is not asked", async () => {
    const { root, faux, network } = await openOffline({
      respond: () => () => fauxError("401 Unauthorized: invalid api key"),
    });
    const sub = await root.submit({ type: "input", content: "hi" });
    expect(await sub.wait()).toMatchObject({ status: "unanswered", reason: "model_error" });
    expect(faux.requests).toHaveLength(1);
    expect(network.checks).toBe(0);
  });

  test("network failures are retryable and are told apart from a provider's answer", () => {
    for (const m of [OFFLINE, "TypeError: Failed to fetch", "Load failed", "fetch failed"]) {
      expect([m, isNetworkError(m), isRetryableError(m)]).toEqual([m, true, true]);
    }
    for (const m of ["401 Unauthorized: invalid api key", "400 Bad Request", "No API key for provider"]) {
      expect([m, isNetworkError(m), isRetryableError(m)]).toEqual([m, false, false]);
    }
  });
});
