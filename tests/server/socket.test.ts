/**
 * Tabs attach to a server space over a real WebSocket (the `ws` package, to workerd through
 * miniflare): the front door admits a socket only with its space's token (worker/server/token.ts,
 * worker/entry/server.ts), the space serves the protocol's door on it (worker/server/space.ts,
 * socket.ts) over the app's engine service. Shown here: a tab's hello, a conversation created, a
 * demo run submitted and watched frame by frame until the answer is committed; two sockets seeing
 * each other's commits; and each refusal, with its status or code, and nothing written (the space's
 * conversation list afterwards, read with a good token, is a fresh space's). The rate limit is
 * lowered for this server (20 at once, 5 a second) so that a flood is quick to send.
 */
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { type ServerWorker, spaceTokenOf, startServerWorker } from "./miniflare.ts";
import { Refused, SocketTab } from "./socket-tab.ts";

let server: ServerWorker;

beforeAll(async () => {
  server = await startServerWorker({
    entry: "space-entry.ts",
    objects: { SPACES: "TestSpace" },
    bindings: { SPACE_RATE_BURST: "20", SPACE_RATE_PER_SECOND: "5" },
  });
});

afterAll(async () => {
  await server?.stop();
});

function socketUrl(space: string): URL {
  const url = new URL(`/space/${space}/socket`, server.url());
  url.protocol = "ws:";
  return url;
}

const tabs: SocketTab[] = [];

/** A tab on `space` with its token (as a browser sends it: a subprotocol), said hello. */
async function tabOn(space: string, tabId = `tab-${tabs.length + 1}`): Promise<SocketTab> {
  const tab = await SocketTab.open(socketUrl(space), {
    protocols: ["durable-harness.v1", `token.${server.token(space)}`],
  });
  tabs.push(tab);
  await tab.hello(tabId);
  return tab;
}

afterAll(async () => {
  await Promise.all(tabs.map((t) => t.close()));
});

interface Entry {
  id: number;
  kind: string;
  model?: Array<{ content: Array<{ type: string; text?: string }> }>;
}
type Frame =
  | { seq: number; ops: [{ op: "replace" }]; value: { entries: Entry[] } }
  | { seq: number; ops: Array<{ op: string; entries?: Entry[] }> };

/** The entries a conversation watch's frames add up to (snapshots replace, appends add). */
function entriesOf(frames: readonly unknown[]): Entry[] {
  let entries: Entry[] = [];
  for (const frame of frames as Frame[]) {
    if ("value" in frame) entries = [...frame.value.entries];
    else for (const op of frame.ops) if (op.op === "append" && op.entries) entries.push(...op.entries);
  }
  return entries;
}

/** The text of an assistant entry (its model messages' text blocks); "" for any other entry. */
const textOf = (entry: Entry | undefined) =>
  entry?.kind !== "pi.assistant"
    ? ""
    : (entry.model ?? [])
        .flatMap((m) => m.content.filter((c) => c.type === "text").map((c) => c.text))
        .join("");

/** The titles of a space's conversations, read over a socket with a good token. */
async function titlesOf(space: string): Promise<string[]> {
  const tab = await tabOn(space);
  const list = await tab.value<Array<{ title: string }>>("conversations.list");
  await tab.close();
  return list.map((c) => c.title);
}

describe("a tab over a WebSocket", () => {
  test("hello, a conversation created, a demo run submitted and watched until its answer is committed", async () => {
    const tab = await tabOn("home");
    expect(tab.ws.protocol).toBe("durable-harness.v1");
    expect(tab.statuses).toContainEqual(
      expect.objectContaining({ phase: "ready", storeKind: "durable-object" }),
    );
    const conversation = await tab.value<number>("conversations.create", "notes");
    const watch = await tab.value<number>("watches.conversation", conversation);
    await tab.until(() => (tab.frames.get(watch) ?? []).length >= 1, "the watch's first frame");
    expect(entriesOf(tab.frames.get(watch)!)).toEqual([]);
    const submission = await tab.value<number>("run.submit", conversation, {
      text: "write a note",
      requestId: "note-1",
    });
    expect(submission).toBeGreaterThan(0);
    await tab.until(
      () => /^Done: Wrote \d+ bytes/.test(textOf(entriesOf(tab.frames.get(watch)!).at(-1))),
      "the demo model's answer committed",
    );
    const entries = entriesOf(tab.frames.get(watch)!);
    expect(entries.map((e) => e.kind)).toEqual([
      "pi.user",
      "pi.system",
      "pi.assistant",
      "pi.tool-result",
      "pi.assistant",
      "pi.tool-result",
      "pi.assistant",
    ]);
    // Each commit once: the frames carry every entry once, in order.
    expect(entries.map((e) => e.id)).toEqual([1, 2, 3, 4, 5, 6, 7]);
    expect(await tab.value("watches.unwatch", watch)).toBeNull();
    expect(await titlesOf("home")).toContain("notes");
  });

  test("two sockets on one space each see a commit made through the other", async () => {
    const a = await tabOn("shared", "device-a");
    const b = await tabOn("shared", "device-b");
    const conversation = await a.value<number>("conversations.create", "together");
    const watchA = await a.value<number>("watches.conversation", conversation);
    const watchB = await b.value<number>("watches.conversation", conversation);
    const users = (tab: SocketTab, watch: number) =>
      entriesOf(tab.frames.get(watch) ?? [])
        .filter((e) => e.kind === "pi.user")
        .map((e) => e.id);
    await b.value("run.submit", conversation, { text: "hello from b", requestId: "b-1" });
    await a.until(() => users(a, watchA).length === 1, "a seeing b's input");
    await b.until(() => users(b, watchB).length === 1, "b seeing its own input");
    // Wait for the first run to settle before the second input, so each input is a run of its own.
    const settled = async () => {
      for (;;) {
        const list = await a.value<Array<{ id: number; busy: boolean }>>("conversations.list");
        if (!list.find((c) => c.id === conversation)?.busy) return;
        await new Promise((r) => setTimeout(r, 50));
      }
    };
    await settled();
    await a.value("run.submit", conversation, { text: "hello from a", requestId: "a-1" });
    await b.until(() => users(b, watchB).length === 2, "b seeing a's input");
    await a.until(() => users(a, watchA).length === 2, "a seeing its own input");
    expect(users(a, watchA)).toEqual(users(b, watchB));
  });

  test("a socket's close ends its watches; a tab reconnecting with the same tab id is served afresh", async () => {
    const first = await tabOn("again", "same-tab");
    const conversation = await first.value<number>("conversations.create", "kept");
    await first.value("watches.conversation", conversation);
    await first.close();
    const second = await tabOn("again", "same-tab");
    const watch = await second.value<number>("watches.conversation", conversation);
    await second.until(() => (second.frames.get(watch) ?? []).length === 1, "the new socket's first frame");
    await second.value("run.submit", conversation, { text: "still here", requestId: "again-1" });
    await second.until(
      () => entriesOf(second.frames.get(watch)!).some((e) => e.kind === "pi.user"),
      "the new socket hearing the commit",
    );
  });
});

describe("refusals", () => {
  const PRISTINE = ["Main"];

  test("a fresh space lists only its main conversation (what the refusal tests compare with)", async () => {
    expect(await titlesOf("pristine")).toEqual(PRISTINE);
  });

  test("no token: 401 token-missing, for a socket and for a route; nothing written", async () => {
    const refused = await SocketTab.open(socketUrl("no-token"), { protocols: ["durable-harness.v1"] }).catch(
      (e: unknown) => e,
    );
    expect(refused).toBeInstanceOf(Refused);
    expect(refused).toMatchObject({ status: 401, body: { code: "token-missing" } });
    const submit = await server.raw("/space/no-token/submit", { method: "POST", body: { text: "in?" } });
    expect(submit).toMatchObject({ status: 401, body: { code: "token-missing" } });
    expect(await titlesOf("no-token")).toEqual(PRISTINE);
  });

  test("a wrong token: 403 token-wrong; nothing written", async () => {
    const forged = `wrong.${"A".repeat(43)}`;
    const refused = await SocketTab.open(socketUrl("wrong"), {
      protocols: ["durable-harness.v1", `token.${forged}`],
    }).catch((e: unknown) => e);
    expect(refused).toMatchObject({ status: 403, body: { code: "token-wrong" } });
    // A token made with another secret, and a bearer token that is no token at all.
    const otherSecret = spaceTokenOf("not the server's secret", "wrong");
    for (const token of [otherSecret, "garbage"]) {
      const submit = await server.raw("/space/wrong/submit", {
        method: "POST",
        body: { text: "in?" },
        headers: { authorization: `Bearer ${token}` },
      });
      expect(submit).toMatchObject({ status: 403, body: { code: "token-wrong" } });
      expect(JSON.stringify(submit.body)).not.toContain(token);
    }
    expect(await titlesOf("wrong")).toEqual(PRISTINE);
  });

  test("another space's token: 403 token-other-space; nothing written", async () => {
    const refused = await SocketTab.open(socketUrl("mine"), {
      protocols: ["durable-harness.v1", `token.${server.token("theirs")}`],
    }).catch((e: unknown) => e);
    expect(refused).toMatchObject({ status: 403, body: { code: "token-other-space" } });
    const submit = await server.raw("/space/mine/submit", {
      method: "POST",
      body: { text: "in?" },
      headers: { authorization: `Bearer ${server.token("theirs")}` },
    });
    expect(submit).toMatchObject({ status: 403, body: { code: "token-other-space" } });
    expect(await titlesOf("mine")).toEqual(PRISTINE);
  });

  test("a bearer token opens a socket too (a client that can set headers)", async () => {
    const tab = await SocketTab.open(socketUrl("bearer"), {
      headers: { authorization: `Bearer ${server.token("bearer")}` },
    });
    tabs.push(tab);
    expect((await tab.hello("cli")).protocol).toBeGreaterThan(0);
    expect(await tab.value("conversations.list")).toHaveLength(1);
  });

  test("a malformed message: BadRequest malformed, and the connection goes on; nothing written", async () => {
    const tab = await tabOn("malformed");
    tab.send("{not json");
    tab.send(JSON.stringify({ id: 7, method: "conversations.create", args: [42] }));
    tab.send(Buffer.from([1, 2, 3]));
    await tab.until(() => tab.replies.length >= 4, "three refusals after the hello's reply");
    expect(tab.replies.slice(1).map((r) => [r.id, r.error?.name, r.error?.code])).toEqual([
      [null, "BadRequest", "malformed"],
      [7, "BadRequest", "bad-args"],
      [null, "BadRequest", "malformed"],
    ]);
    // The connection goes on.
    expect(await tab.value("conversations.list")).toHaveLength(1);
    expect(await titlesOf("malformed")).toEqual(PRISTINE);
  });

  test("an oversized frame: too-large before it is parsed (even when it is not JSON); nothing written", async () => {
    const tab = await tabOn("oversized");
    const big = "x".repeat(1_000_001);
    const refused = await tab.call("conversations.create", big);
    expect(refused.error).toMatchObject({ name: "BadRequest", code: "too-large" });
    // Not JSON past its start: the size is refused first (a parse would say malformed).
    tab.send(`{"id":99,"method":"conversations.create","args":["${big}`);
    await tab.until(() => tab.replies.some((r) => r.id === 99), "the second refusal");
    expect(tab.replies.find((r) => r.id === 99)?.error).toMatchObject({ code: "too-large" });
    expect(await tab.value("conversations.list")).toHaveLength(1);
    expect(await titlesOf("oversized")).toEqual(PRISTINE);
  });

  test("a flood beyond the rate limit: the calls over it are refused rate-limited and none of them runs", async () => {
    const tab = await tabOn("flood");
    const replies = await Promise.all(
      Array.from({ length: 100 }, (_, i) => tab.call("conversations.create", `flood ${i}`)),
    );
    const created = replies.filter((r) => r.ok);
    const limited = replies.filter((r) => r.error?.code === "rate-limited");
    expect(created.length + limited.length).toBe(100);
    // The bucket held 20 calls; the hello took one.
    expect(created.length).toBeGreaterThanOrEqual(19);
    expect(limited.length).toBeGreaterThan(0);
    expect(limited[0]!.error?.name).toBe("BadRequest");
    const titles = await titlesOf("flood");
    expect(titles.filter((t) => t.startsWith("flood ")).sort()).toEqual(
      created.map((r) => `flood ${replies.indexOf(r)}`).sort(),
    );
  });

  test("the debug group is never served on the server", async () => {
    const tab = await tabOn("debug");
    expect((await tab.call("debug.stats")).error).toMatchObject({
      name: "BadRequest",
      code: "unknown-method",
    });
  });
});
