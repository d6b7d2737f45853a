/**
 * Space tokens (worker/server/token.ts): the token of a space opens it and no other; a wrong MAC,
 * another secret's token, garbage and no token are refused with their codes; no secret admits no one;
 * the verdict never carries the token; where a request carries its token (a bearer header or a
 * `token.` subprotocol); and the Web Crypto computation agrees with Node's HMAC (what
 * `npm run server -- token` prints).
 */
import { createHmac } from "node:crypto";
import { expect, test } from "vitest";
import { checkToken, requestToken, spaceToken } from "../../../worker/server/token.ts";

const SECRET = "a-test-secret-of-some-length-0123456789";

test("a space's token opens it; Node's HMAC computes the same token", async () => {
  const token = await spaceToken(SECRET, "home");
  expect(token).toBe(`home.${createHmac("sha256", SECRET).update("space:home").digest("base64url")}`);
  expect(await checkToken(SECRET, "home", token)).toEqual({ ok: true });
});

test("each refusal has its status and code, and never the token", async () => {
  const home = await spaceToken(SECRET, "home");
  const other = await spaceToken(SECRET, "other");
  const foreign = await spaceToken("another secret entirely, just as long", "home");
  const flipped = `${home.slice(0, -2)}${home.at(-2) === "A" ? "B" : "A"}${home.at(-1)}`;
  const cases: Array<[string | undefined, number, string]> = [
    [undefined, 401, "token-missing"],
    ["", 401, "token-missing"],
    [other, 403, "token-other-space"],
    [foreign, 403, "token-wrong"],
    [flipped, 403, "token-wrong"],
    ["home.", 403, "token-wrong"],
    ["home", 403, "token-wrong"],
    ["garbage.with.dots", 403, "token-wrong"],
  ];
  for (const [token, status, code] of cases) {
    const verdict = await checkToken(SECRET, "home", token);
    expect(verdict).toMatchObject({ ok: false, status, code });
    if (token) expect(JSON.stringify(verdict)).not.toContain(token);
  }
  expect(await checkToken(undefined, "home", home)).toMatchObject({ status: 500, code: "not-configured" });
  expect(await checkToken("", "home", home)).toMatchObject({ status: 500, code: "not-configured" });
});

test("a request carries its token as a bearer header or as a token. subprotocol", () => {
  const at = (headers: Record<string, string>) => requestToken(new Request("http://x/", { headers }));
  expect(at({ authorization: "Bearer abc.def" })).toBe("abc.def");
  expect(at({ "sec-websocket-protocol": "durable-harness.v1, token.abc.def" })).toBe("abc.def");
  expect(at({ "sec-websocket-protocol": "durable-harness.v1" })).toBeUndefined();
  expect(at({ authorization: "Basic abc" })).toBeUndefined();
  expect(at({})).toBeUndefined();
});
