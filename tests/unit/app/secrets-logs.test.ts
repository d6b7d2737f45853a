/**
 * A saved key and a server token never appear in any log (issue 28 part 3): the engine's console
 * output (every console method, the engine's reports among them) is captured through a run that
 * uses the key, an answer from the provider whose error message carries the key and the token, and
 * an export; neither secret appears in any captured line. The engine runs in this process here, as
 * the browser's SharedWorker engine runs in its worker: what it logs goes to this console.
 */
import { fauxAssistantMessage } from "@mariozechner/pi-ai";
import { afterEach, beforeEach, expect, test, vi } from "vitest";
import { remoteApi } from "../../../worker/app/remote.ts";
import { type FauxResponder, fauxError } from "../../../worker/testing.ts";
import { hostileEngine } from "./hostile-fixtures.ts";

const KEY = "sk-ant-api03-LOGGEDnowhere0123456789abcdef";
const TOKEN = "home.TOKENneverLOGGED_0123456789abcdef";

const METHODS = ["log", "info", "warn", "error", "debug", "trace"] as const;
const lines: string[] = [];
beforeEach(() => {
  for (const method of METHODS)
    vi.spyOn(console, method).mockImplementation((...args: unknown[]) => {
      lines.push(
        args
          .map((a) =>
            a instanceof Error
              ? `${a.name}: ${a.message}\n${a.stack}`
              : typeof a === "string"
                ? a
                : JSON.stringify(a),
          )
          .join(" "),
      );
    });
});
afterEach(() => {
  vi.restoreAllMocks();
  lines.length = 0;
});

test("a run with the key, a provider error carrying the key and the token, and an export: no console line holds either", async () => {
  let call = 0;
  const respond: FauxResponder = () =>
    ++call === 1
      ? fauxAssistantMessage("first answer")
      : fauxError(`401 Unauthorized: invalid x-api-key ${KEY} (token ${TOKEN})`);
  const { service, harness, faux, close } = await hostileEngine(respond);
  const tab = service.tab("logs");
  await tab.keys.set(faux.model.provider, KEY);
  await remoteApi(async () => harness).set("http://127.0.0.1:8787", TOKEN);
  const id = await tab.conversations.create();
  await tab.run.submit(id, { text: "hello" });
  await harness.waitForIdle();
  await tab.run.submit(id, { text: "again" });
  await harness.waitForIdle();
  const entries = await tab.watches.entries(id);
  expect(entries.some((e) => JSON.stringify(e.model).includes("401 Unauthorized"))).toBe(true); // the error arrived
  const exported = await tab.conversations.export(id);
  await close();
  const holding = lines.filter((line) => line.includes(KEY) || line.includes(TOKEN));
  expect(holding).toEqual([]);
  expect(exported.fileName.includes(KEY) || exported.fileName.includes(TOKEN)).toBe(false);
  // The stored error keeps the provider's words without either secret: the call's key and the saved
  // server token it quoted back are both redacted before the answer is committed.
  const stored = JSON.stringify(entries);
  expect(stored).toContain("[redacted]");
  expect(stored.includes(KEY) || stored.includes(TOKEN)).toBe(false);
  expect(exported.text.includes(KEY) || exported.text.includes(TOKEN)).toBe(false);
});
