/**
 * The server socket's transport (worker/server/socket.ts) on a fake socket and clock: what it refuses
 * before parsing (binary, too large, over the rate, not JSON), each with its typed code and the
 * call's id when the frame starts like a call, nothing delivered; acknowledgements not counted
 * against the rate; the bucket refilling with time; and the close told once. And a call too long
 * for one frame: cut in parts that each fit (server-socket.ts `messageFrames`), joined and delivered
 * once, and a broken or oversized run refused with the call's id, nothing delivered.
 */
import { expect, test } from "vitest";
import { DEFAULT_LIMITS } from "../../../worker/protocol/door.ts";
import { messageFrames, SERVER_MAX_MESSAGE_CHARS } from "../../../worker/protocol/server-socket.ts";
import { socketTransport } from "../../../worker/server/socket.ts";

function fixture(options: { maxChars?: number; ratePerSecond?: number; burst?: number } = {}) {
  const sent: Array<Record<string, unknown>> = [];
  const closes: number[] = [];
  let now = 1_000;
  const connection = socketTransport(
    { send: (m) => sent.push(JSON.parse(m)), close: (code) => closes.push(code ?? 0) },
    {
      limits: { ...DEFAULT_LIMITS, maxChars: options.maxChars ?? 100 },
      rate: { ratePerSecond: options.ratePerSecond ?? 2, burst: options.burst ?? 3 },
      now: () => now,
    },
  );
  const delivered: unknown[] = [];
  connection.transport.onMessage((m) => delivered.push(m));
  return { connection, sent, closes, delivered, advance: (ms: number) => (now += ms) };
}

const call = (id: number) => JSON.stringify({ id, method: "conversations.list", args: [] });
const codes = (sent: Array<Record<string, unknown>>) =>
  sent.map((m) => [
    m["id"],
    (m["error"] as { name: string; code: string }).name,
    (m["error"] as { code: string }).code,
  ]);

test("binary, oversized and non-JSON frames are refused with typed codes, the call's id when it has one", () => {
  const { connection, sent, delivered } = fixture();
  connection.receive(new ArrayBuffer(4));
  connection.receive(`{"id":12,"method":"conversations.create","args":["${"x".repeat(200)}"]}`);
  connection.receive(`{"id":13,"method":` + "[".repeat(200)); // too large before it is known not to be JSON
  connection.receive("{nope");
  expect(codes(sent)).toEqual([
    [null, "BadRequest", "malformed"],
    [12, "BadRequest", "too-large"],
    [13, "BadRequest", "too-large"],
    [null, "BadRequest", "malformed"],
  ]);
  expect(delivered).toEqual([]);
});

test("calls beyond the bucket are refused rate-limited; acknowledgements pass uncounted; the bucket refills", () => {
  const { connection, sent, delivered, advance } = fixture({ ratePerSecond: 2, burst: 3 });
  for (let id = 1; id <= 5; id++) connection.receive(call(id));
  expect(delivered.map((m) => (m as { id: number }).id)).toEqual([1, 2, 3]);
  expect(codes(sent)).toEqual([
    [4, "BadRequest", "rate-limited"],
    [5, "BadRequest", "rate-limited"],
  ]);
  // Acknowledgements are answers to the engine's frames: never refused for the rate.
  for (let seq = 1; seq <= 10; seq++) connection.receive(JSON.stringify({ ack: 1, seq }));
  expect(delivered).toHaveLength(13);
  // Half a second later one call fits again (2 a second), and only one.
  advance(500);
  connection.receive(call(6));
  connection.receive(call(7));
  expect((delivered.at(-1) as { id: number }).id).toBe(6);
  expect(codes(sent).at(-1)).toEqual([7, "BadRequest", "rate-limited"]);
});

test("what arrives before a receiver is held for it; the close is told once; a closed transport sends nothing", () => {
  const sent: string[] = [];
  const connection = socketTransport(
    { send: (m) => sent.push(m), close: () => undefined },
    { limits: DEFAULT_LIMITS, rate: { ratePerSecond: 10, burst: 10 } },
  );
  connection.receive(call(1));
  const delivered: unknown[] = [];
  connection.transport.onMessage((m) => delivered.push(m));
  expect(delivered).toEqual([{ id: 1, method: "conversations.list", args: [] }]);
  let told = 0;
  connection.transport.onClose(() => told++);
  connection.closed();
  connection.closed();
  expect(told).toBe(1);
  connection.transport.send({ push: "status", status: { phase: "starting", detail: "x" } });
  connection.receive(call(2));
  expect(sent).toEqual([]);
  expect(delivered).toHaveLength(1);
});

/** The server's transport at its real frame limit, taking calls in parts up to `maxPartedChars`. */
function partedFixture(maxPartedChars = 10_000_000) {
  const sent: Array<Record<string, unknown>> = [];
  const connection = socketTransport(
    { send: (m) => sent.push(JSON.parse(m)), close: () => undefined },
    {
      limits: { ...DEFAULT_LIMITS, maxChars: SERVER_MAX_MESSAGE_CHARS },
      rate: { ratePerSecond: 1000, burst: 1000 },
      maxPartedChars,
    },
  );
  const delivered: unknown[] = [];
  connection.transport.onMessage((m) => delivered.push(m));
  return { connection, sent, delivered };
}

/** A call whose JSON is ~3.3 million characters: quotes, backslashes, non-ASCII and pairs in it. */
const longCall = (id: number) => ({
  id,
  method: "run.submit",
  args: [2, { text: `"\\é${"🙂".repeat(600_000)}${'ab"c\\'.repeat(300_000)}` }],
});

test("a call too long for a frame goes in parts that each fit, and is delivered once, whole", () => {
  const message = longCall(7);
  const frames = messageFrames(JSON.stringify(message), 7);
  expect(frames.length).toBeGreaterThan(3);
  for (const frame of frames) {
    expect(frame.length).toBeLessThanOrEqual(SERVER_MAX_MESSAGE_CHARS);
    expect(Buffer.byteLength(frame, "utf8")).toBeLessThan(1024 * 1024);
  }
  // A short call is one frame, as it was.
  expect(messageFrames(call(8), 8)).toEqual([call(8)]);
  const { connection, sent, delivered } = partedFixture();
  for (const frame of frames) connection.receive(frame);
  expect(sent).toEqual([]);
  expect(delivered).toEqual([message]);
});

test("a broken run of parts is refused bad-parts (missing, repeated, out of order, interrupted), nothing delivered", () => {
  const { connection, sent, delivered } = partedFixture();
  const parts = (id: number) => messageFrames(JSON.stringify(longCall(id)), id);
  const [a0, , a2] = parts(1);
  connection.receive(a0!);
  connection.receive(a2!); // part 1 missing
  const [b0, b1] = parts(2);
  connection.receive(b0!);
  connection.receive(b1!);
  connection.receive(b1!); // part 1 again
  const [c0] = parts(3);
  connection.receive(c0!);
  connection.receive(call(4)); // another call between two parts: the run ends, the call is served
  const d = parts(5);
  connection.receive(d[1]!); // a run that starts in the middle
  const e = parts(6);
  for (const frame of e.slice(0, -1)) connection.receive(frame);
  connection.receive(d.at(-1)!); // another call's last part
  expect(codes(sent)).toEqual([
    [1, "BadRequest", "bad-parts"],
    [2, "BadRequest", "bad-parts"],
    [3, "BadRequest", "bad-parts"],
    [5, "BadRequest", "bad-parts"],
    [6, "BadRequest", "bad-parts"],
    [5, "BadRequest", "bad-parts"],
  ]);
  expect(delivered).toEqual([JSON.parse(call(4))]);
  // Run 6 was ended by the stray part: its last part alone is refused too.
  connection.receive(e.at(-1)!);
  expect(codes(sent).at(-1)).toEqual([6, "BadRequest", "bad-parts"]);
  expect(delivered).toHaveLength(1);
});

test("parts joining to more than the bound are refused too-large and dropped", () => {
  const { connection, sent, delivered } = partedFixture(2_000_000);
  for (const frame of messageFrames(JSON.stringify(longCall(9)), 9)) connection.receive(frame);
  expect(codes(sent)[0]).toEqual([9, "BadRequest", "too-large"]);
  expect(delivered).toEqual([]);
});
