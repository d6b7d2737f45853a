/**
 * The server connection's state and a connection test in words (src/lib/server-words.ts): each state
 * gets one of the four dots and a label a person understands; a test's result says what to do next
 * (the command that makes a token, for a refused one), and never holds the token.
 */
import { expect, test } from "vitest";
import { checkWords, serverWords } from "../../../src/lib/server-words.ts";

test("each connection state has its dot and words", () => {
  expect(serverWords({ state: "connected", build: "b" })).toEqual({ dot: "connected", label: "Connected" });
  expect(serverWords({ state: "connecting" }).dot).toBe("reconnecting");
  expect(serverWords({ state: "reconnecting", attempt: 2, delayMs: 500, reached: true })).toEqual({
    dot: "reconnecting",
    label: "Reconnecting…",
  });
  // Nothing answered, or the browser is offline: offline, still trying.
  expect(serverWords({ state: "reconnecting", attempt: 2, delayMs: 500, reached: false }).dot).toBe(
    "offline",
  );
  expect(serverWords({ state: "reconnecting", attempt: 2, delayMs: 500, reached: true }, false).dot).toBe(
    "offline",
  );
  expect(serverWords({ state: "unauthorized", message: "m" })).toEqual({
    dot: "unauthorized",
    label: "Token refused",
  });
  expect(serverWords({ state: "closed" }).dot).toBe("offline");
});

test("a connection test says what it found and what to do", () => {
  expect(checkWords({ ok: true, build: "b" }, "home")).toBe("Connected: the space “home” answered.");
  expect(checkWords({ ok: false, problem: "unauthorized", message: "m" }, "home")).toBe(
    "The server refused the token for “home”. Make a new one with “npm run server -- token home” and paste it here.",
  );
  expect(checkWords({ ok: false, problem: "unreachable", message: "m" }, "home")).toMatch(
    /^Nothing answered at that address/,
  );
  expect(checkWords({ ok: false, problem: "refused", message: "m" }, "home")).toMatch(/its log says why/);
  expect(checkWords({ ok: false, problem: "incompatible", message: "m" }, "home")).toMatch(/another version/);
});
