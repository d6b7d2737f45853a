/**
 * Who may enter a space: a token per space, checked by the server's front door before any request
 * reaches the space's Durable Object (worker/entry/server.ts). Scheme: the token of space `s` is
 * `s.` followed by base64url(HMAC-SHA256(secret, "space:" + s)), the secret being the server's
 * `SPACE_TOKEN_SECRET` (its UTF-8 bytes). It grants that space only; it cannot be forged without
 * the secret, and its MAC is checked in constant time (Web Crypto's `verify`; the space's name
 * it carries is no secret: the URL names it too). `npm run server -- token <space>` computes the same
 * token in Node (scripts/server.mjs); the server tests check that the two agree.
 * Invariants:
 * - a token travels in `Authorization: Bearer <token>` or, from a browser's WebSocket (which cannot
 *   set headers), as a subprotocol `token.<token>` beside `durable-harness.v1`;
 * - the verdict names the refusal (`token-missing` 401, `token-wrong` 403, `token-other-space` 403,
 *   `not-configured` 500) and never contains the token or the secret.
 */

import { SPACE_NAME, TOKEN_SUBPROTOCOL_PREFIX } from "../protocol/server-socket.ts";

export type TokenVerdict =
  | { readonly ok: true }
  | {
      readonly ok: false;
      readonly status: 401 | 403 | 500;
      readonly code: "token-missing" | "token-wrong" | "token-other-space" | "not-configured";
      readonly error: string;
    };

const encoder = new TextEncoder();

function base64url(bytes: Uint8Array): string {
  let binary = "";
  for (const b of bytes) binary += String.fromCharCode(b);
  return btoa(binary).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

function fromBase64url(text: string): Uint8Array<ArrayBuffer> | undefined {
  if (!/^[A-Za-z0-9_-]{43}$/.test(text)) return undefined; // 32 bytes, unpadded
  const binary = atob(text.replace(/-/g, "+").replace(/_/g, "/"));
  return Uint8Array.from(binary, (c) => c.charCodeAt(0));
}

function hmacKey(secret: string, usage: "sign" | "verify"): Promise<CryptoKey> {
  return crypto.subtle.importKey("raw", encoder.encode(secret), { name: "HMAC", hash: "SHA-256" }, false, [
    usage,
  ]);
}

/** The token of `space` under `secret`. */
export async function spaceToken(secret: string, space: string): Promise<string> {
  if (!SPACE_NAME.test(space)) throw new TypeError("a space's name: 1 to 64 of A-Z a-z 0-9 _ -");
  const mac = await crypto.subtle.sign(
    "HMAC",
    await hmacKey(secret, "sign"),
    encoder.encode(`space:${space}`),
  );
  return `${space}.${base64url(new Uint8Array(mac))}`;
}

/** Whether `mac` is the MAC of `space` (constant time: Web Crypto's verify). */
async function macValid(secret: string, space: string, mac: string): Promise<boolean> {
  const bytes = fromBase64url(mac);
  if (!bytes) return false;
  return crypto.subtle.verify(
    "HMAC",
    await hmacKey(secret, "verify"),
    bytes,
    encoder.encode(`space:${space}`),
  );
}

/** The token a request carries: its bearer token, or its `token.` WebSocket subprotocol. */
export function requestToken(request: Request): string | undefined {
  const authorization = request.headers.get("authorization");
  const bearer = authorization && /^Bearer\s+(\S+)$/i.exec(authorization.trim());
  if (bearer) return bearer[1];
  const offered = request.headers.get("sec-websocket-protocol");
  for (const p of offered?.split(",") ?? []) {
    const name = p.trim();
    if (name.startsWith(TOKEN_SUBPROTOCOL_PREFIX)) return name.slice(TOKEN_SUBPROTOCOL_PREFIX.length);
  }
  return undefined;
}

/** Whether `token` opens `space` under `secret` (undefined secret: the server is not configured). */
export async function checkToken(
  secret: string | undefined,
  space: string,
  token: string | undefined,
): Promise<TokenVerdict> {
  if (!secret)
    return {
      ok: false,
      status: 500,
      code: "not-configured",
      error: "the server has no SPACE_TOKEN_SECRET: it admits no one",
    };
  if (!token) return { ok: false, status: 401, code: "token-missing", error: "this space needs its token" };
  const dot = token.lastIndexOf(".");
  const named = dot > 0 ? token.slice(0, dot) : "";
  const mac = dot > 0 ? token.slice(dot + 1) : "";
  if (named !== space) {
    // Another space's token (genuine or not): it never opens this space.
    const genuine = SPACE_NAME.test(named) && (await macValid(secret, named, mac));
    return genuine
      ? { ok: false, status: 403, code: "token-other-space", error: "this token is another space's" }
      : { ok: false, status: 403, code: "token-wrong", error: "this token does not open this space" };
  }
  return (await macValid(secret, space, mac))
    ? { ok: true }
    : { ok: false, status: 403, code: "token-wrong", error: "this token does not open this space" };
}
