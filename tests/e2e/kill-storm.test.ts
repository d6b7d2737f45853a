/**
 * The kill storm (issue 28 part 2): SIGKILLs of the whole Chromium at seeded moments across one run
 * of the built app that uses tools (ls, write to the OPFS workspace), code mode scripts, a subagent,
 * manual compactions and deploy handovers between builds; each relaunch on the same profile, the
 * same store. At the end every input is answered exactly once, every tool effect stayed within its
 * replay policy, nothing the test saw committed was lost and no entry is doubled.
 *
 * - The seed (`STORM_SEED`, printed) draws the workload and the kill plan: which kind of moment each
 *   kill aims at, after how long it starts looking, and when a new build is deployed. Chromium's timing
 *   is not seeded, so a seed replays the plan, not the exact interleaving. `STORM_KILLS` sets the
 *   number of kills (CI runs `CI_KILLS`; `npm run storm` runs 100); `STORM_KEEP_BUILD=1` reuses the
 *   storm's build from an earlier run.
 * - Effects are counted outside the browser: the engine's effect tools (worker/debug/effects.ts,
 *   installed because the page names `effects=/effect`) POST to this file's HTTP server, which records
 *   each request and holds its answer a little, so the test knows exactly when an effect is in flight.
 *   `effect_once` is `unsafe` (at most one POST per key, ever); `effect_keyed` is idempotency-keyed and
 *   `safe` (the server applies a key once; exactly one application per key).
 * - Deploys: the app is built once with a relative base; the server serves it under `/b<k>/` for
 *   deploy k and rewrites the engine's build id in the two worker entries to one that grows with k.
 *   Each deploy thus has its own SharedWorker URL and a newer build id, which is all the handover
 *   protocol (worker/browser/owner.ts) looks at; the code is the same, as in engine.test.ts's two
 *   builds of one source. A deploy opens the new build in a second tab; the old engine hands over.
 *   Every relaunch opens the newest deploy, as a browser would after the server moved on.
 * - A kill's moment is classified by what was observed just before it (the engine's live tasks from
 *   `tasks.inspect`, the server's requests in flight, the deploy in progress), by priority: handover,
 *   effect, compaction, subagent, code mode, other tool, model stream, idle, step boundary.
 * Waits poll what the page or the server shows; nothing sleeps a fixed time except the seeded delay
 * before a kill starts looking for its moment.
 */
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { cpSync, existsSync, mkdirSync, readFileSync, rmSync } from "node:fs";
import { stat } from "node:fs/promises";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { dirname, extname, join, normalize, resolve, sep } from "node:path";
import { fileURLToPath } from "node:url";
import type { Page } from "playwright-core";
import { afterAll, beforeAll, expect, test } from "vitest";
import { engine, type LaunchedBrowser, launchBrowser, MIME } from "./browser.ts";
import { storeKindOf, until, waitPhase } from "./page.ts";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "../..");

/** How many kills CI runs: as many as fit in about three minutes on the CI machine (2 cores). */
const CI_KILLS = 25;
/**
 * Debugging Chromium's own IndexedDB (docs/ARCHITECTURE.md, "The kill storm in the browser"):
 * `STORM_KEEP_IDB=<dir>` copies the profile's IndexedDB folder to `<dir>/kill-<k>-<moment>` after
 * each kill, before the relaunch opens it; `STORM_STOP_AFTER=<k>` ends the run after kill k, without
 * the final checks; `STORM_CHROMIUM_FLAGS` adds Chromium flags (e.g.
 * `--enable-features=IdbSqliteBackingStore`, IndexedDB on SQLite instead of LevelDB).
 */
const KEEP_IDB = process.env.STORM_KEEP_IDB;
const EXTRA_FLAGS = (process.env.STORM_CHROMIUM_FLAGS ?? "").split(/\s+/).filter(Boolean);
const STOP_AFTER = Number(process.env.STORM_STOP_AFTER ?? 0);
/** What Chromium logs when it found the origin's IndexedDB (LevelDB) damaged and deleted it. */
const DISCARDED = /recovering from a corrupted|Failed to open LevelDB/i;

function keepIndexedDb(profileDir: string, kill: number, moment: string): void {
  if (!KEEP_IDB) return;
  const from = join(profileDir, "Default", "IndexedDB");
  if (existsSync(from)) cpSync(from, join(KEEP_IDB, `kill-${kill}-${moment}`), { recursive: true });
}
const SEED = Number(process.env.STORM_SEED ?? 2028);
const KILLS = Number(process.env.STORM_KILLS ?? CI_KILLS);
/** The build id the one build carries, rewritten per deploy as it is served. */
const SENTINEL_BUILD = "2000-01-01T00:00:00.000Z";
const deployBuild = (k: number) =>
  `2100-01-01T00:${String(Math.floor(k / 60)).padStart(2, "0")}:${String(k % 60).padStart(2, "0")}.000Z`;
/** Filler that makes each input long, so a compaction has something to summarize within a few inputs. */
const FILLER_CHARS = 16_000;
/** Characters of input after which a compaction is asked for (the engine keeps the newest 20,000 tokens). */
const COMPACT_AFTER_CHARS = 110_000;

// ---------------------------------------------------------------------------------------------
// The seed

/** mulberry32: a small seeded generator, one stream per purpose. */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
const pick = <T>(random: () => number, items: readonly T[]): T => items[Math.floor(random() * items.length)]!;
const between = (random: () => number, lo: number, hi: number) => Math.floor(lo + random() * (hi - lo));

/** The kinds of moment, in the order a kill is classified by. */
const MOMENTS = [
  "handover",
  "effect",
  "compaction",
  "subagent",
  "codemode",
  "tool",
  "stream",
  "idle",
  "step",
] as const;
type Moment = (typeof MOMENTS)[number];
const MOMENT_WORDS: Record<Moment, string> = {
  handover: "mid deploy handover",
  effect: "mid tool effect (request at the server)",
  compaction: "mid compaction",
  subagent: "mid subagent",
  codemode: "mid code-mode script",
  tool: "mid other tool call (ls, write)",
  stream: "mid model stream",
  idle: "idle",
  step: "between steps (a task ready, preparing or waiting)",
};

type Aim = Exclude<Moment, "step"> | "any";

interface KillPlan {
  readonly aim: Aim;
  /** How long after the engine is ready the kill starts looking for its moment. */
  readonly delayMs: number;
  /** Give up looking after this long and kill at once. */
  readonly patienceMs: number;
}

function killPlans(seed: number, kills: number): KillPlan[] {
  const random = rng(seed ^ 0x9e3779b9);
  const deploys = Math.max(2, Math.round(kills / 10));
  // Deploys spread over the run, each on a cycle of its own (never the first).
  const deployAt = new Set<number>();
  while (deployAt.size < Math.min(deploys, kills - 1)) deployAt.add(between(random, 1, kills));
  const aims: Aim[] = [
    "stream",
    "effect",
    "effect",
    "codemode",
    "subagent",
    "compaction",
    "tool",
    "idle",
    "any",
    "any",
  ];
  return Array.from({ length: kills }, (_, i) => ({
    aim: deployAt.has(i) ? "handover" : pick(random, aims),
    delayMs: between(random, 0, 600),
    patienceMs: 6_000,
  }));
}

type InputKind = "chat" | "note" | "once" | "keyed" | "sub";

interface Input {
  readonly n: number;
  readonly kind: InputKind;
  readonly requestId: string;
  readonly text: string;
  /** The effect key it asks for (once, keyed, sub). */
  readonly key?: string;
}

function makeInput(seed: number, n: number, kind: InputKind, random: () => number): Input {
  const key = `s${seed}-i${n}`;
  const filler = `Context ${n}: ${"lorem ipsum dolor sit amet consectetur adipiscing elit ".repeat(Math.ceil(FILLER_CHARS / 55)).slice(0, FILLER_CHARS - between(random, 0, 2000))}.`;
  const ask = {
    chat: `Input ${n}: hello there.`,
    note: `Input ${n}: please write a note.`,
    once: `Input ${n}: use my tool effect_once with {"key":"${key}"}`,
    keyed: `Input ${n}: use my tool effect_keyed with {"key":"${key}"}`,
    sub: `Input ${n}: use my tool subagent with {"task":"use my tool effect_keyed with {\\"key\\":\\"${key}\\"}"}`,
  }[kind];
  return {
    n,
    kind,
    requestId: `storm-${seed}-${n}`,
    // The filler first: the demo model's tool request reads the JSON up to the text's last brace.
    text: `${filler}\n\n${ask}`,
    ...(kind === "once" || kind === "keyed" || kind === "sub" ? { key } : {}),
  };
}

/** The input kind a kill aiming at `aim` wants next in the pipeline (seeded otherwise). */
function kindFor(aim: Aim, random: () => number): InputKind {
  switch (aim) {
    case "effect":
      return pick(random, ["once", "keyed"] as const);
    case "codemode":
      return pick(random, ["once", "keyed"] as const);
    case "subagent":
      return "sub";
    case "tool":
      return "note";
    case "stream":
      return pick(random, ["chat", "chat", "note"] as const);
    default:
      return pick(random, ["chat", "note", "once", "keyed", "sub"] as const);
  }
}

// ---------------------------------------------------------------------------------------------
// The server: the deploys and the effect endpoint

interface EffectLog {
  mode: string;
  /** POSTs received. */
  attempts: number;
  /** Times the effect was applied (every POST for `once`, the first for `keyed`). */
  applied: number;
  callIds: string[];
}

interface StormServer {
  readonly origin: string;
  readonly effects: Map<string, EffectLog>;
  /** Effect requests received and not answered yet. */
  inFlight(): number;
  close(): Promise<void>;
}

async function serveStorm(buildDir: string, seed: number): Promise<StormServer> {
  const base = resolve(buildDir);
  const effects = new Map<string, EffectLog>();
  const hold = rng(seed ^ 0x51ed27);
  let inFlight = 0;
  const effect = async (req: IncomingMessage, res: ServerResponse) => {
    let body = "";
    for await (const chunk of req) body += String(chunk);
    const { key, mode, callId } = JSON.parse(body) as { key: string; mode: string; callId: string };
    const log = effects.get(key) ?? { mode, attempts: 0, applied: 0, callIds: [] };
    effects.set(key, log);
    log.attempts++;
    log.callIds.push(callId);
    if (mode === "once" || log.applied === 0) log.applied++;
    // Held a little, so a kill can land while the effect is in flight.
    inFlight++;
    await new Promise((r) => setTimeout(r, between(hold, 150, 500)));
    inFlight--;
    res.writeHead(200, { "Content-Type": "text/plain; charset=utf-8" }).end(`applied ${key}`);
  };
  const server = createServer(async (req, res) => {
    try {
      const path = decodeURIComponent(new URL(req.url ?? "/", "http://x").pathname);
      if (req.method === "POST" && path === "/effect") return await effect(req, res);
      const match = /^\/b(\d+)(\/.*)$/.exec(path);
      if (req.method !== "GET" || !match) return void res.writeHead(404).end();
      const k = Number(match[1]);
      let file = normalize(join(base, match[2]!));
      if (!file.startsWith(base + sep) && file !== base) return void res.writeHead(403).end();
      if ((await stat(file).catch(() => undefined))?.isDirectory()) file = join(file, "index.html");
      let body: Buffer;
      try {
        body = readFileSync(file);
      } catch {
        return void res.writeHead(404).end();
      }
      const name = file.slice(base.length + 1);
      if (/^assets\/(shared|dedicated)-worker-[^/]+\.js$/.test(name)) {
        const text = body.toString("utf8");
        if (text.split(SENTINEL_BUILD).length !== 2)
          throw new Error(`${name} does not name the build ${SENTINEL_BUILD} exactly once`);
        body = Buffer.from(text.replace(SENTINEL_BUILD, deployBuild(k)));
      }
      res
        .writeHead(200, {
          "Content-Type": MIME[extname(file).toLowerCase()] ?? "application/octet-stream",
          "Cache-Control": "no-cache",
        })
        .end(body);
    } catch (error) {
      res.writeHead(500).end(String(error));
    }
  });
  await new Promise<void>((ok) => server.listen(0, "127.0.0.1", () => ok()));
  const { port } = server.address() as AddressInfo;
  return {
    origin: `http://127.0.0.1:${port}`,
    effects,
    inFlight: () => inFlight,
    close: () =>
      new Promise<void>((ok) => {
        server.closeAllConnections();
        server.close(() => ok());
      }),
  };
}

// ---------------------------------------------------------------------------------------------
// The page side

/** What the test keeps of an entry: its id, kind and a digest of everything it holds. */
interface Seen {
  readonly id: number;
  readonly conversationId: number;
  readonly kind: string;
  readonly digest: string;
}

interface RawEntry {
  id: number;
  conversationId: number;
  kind: string;
  data?: unknown;
  model?: unknown;
  head?: number;
}

const digestOf = (e: RawEntry): Seen => ({
  id: e.id,
  conversationId: e.conversationId,
  kind: e.kind,
  digest: createHash("sha256")
    .update(JSON.stringify([e.kind, e.data ?? null, e.model ?? null, e.head ?? null]))
    .digest("hex"),
});

/** Watch conversation `c` in the page: every entry a frame carries is kept until the next poll takes it. */
async function installRecorder(page: Page, c: number): Promise<void> {
  await page.evaluate(async (c) => {
    type Frame = { value?: { entries: unknown[] }; ops: Array<{ op: string; entries?: unknown[] }> };
    const g = globalThis as unknown as {
      __storm: { fresh: unknown[] };
      __engine: { watch(c: number, l: (f: Frame) => void): Promise<number> };
    };
    g.__storm = { fresh: [] };
    await g.__engine.watch(c, (frame) => {
      if (frame.value) g.__storm.fresh.push(...frame.value.entries);
      else for (const op of frame.ops) if (op.entries) g.__storm.fresh.push(...op.entries);
    });
  }, c);
}

interface LiveTask {
  id: number;
  kind: string;
  conversationId: number;
  running: boolean;
  phase?: string;
  nested?: string;
  callId?: string;
}

interface Poll {
  tasks: LiveTask[];
  submissions: Array<{ conversationId: number; requestId?: string }>;
  fresh: RawEntry[];
}

function poll(page: Page): Promise<Poll> {
  return page.evaluate(async () => {
    const g = globalThis as unknown as {
      __storm: { fresh: unknown[] };
      __engine: { api: { tasks: { inspect(): Promise<unknown> } } };
    };
    type Inspection = {
      tasks: Array<{
        record: {
          id: number;
          kind: string;
          conversationId: number;
          input: { nested?: { name: string }; callId?: string } | null;
          state: { checkpoint?: { phase?: string } };
        };
        state: { kind: string };
      }>;
      submissions: Array<{ conversationId: number; requestId?: string }>;
    };
    const inspection = (await g.__engine.api.tasks.inspect()) as Inspection;
    return {
      tasks: inspection.tasks.map(({ record, state }) => ({
        id: record.id,
        kind: record.kind,
        conversationId: record.conversationId,
        running: state.kind === "running",
        ...(record.state.checkpoint?.phase ? { phase: record.state.checkpoint.phase } : {}),
        ...(record.input?.nested ? { nested: record.input.nested.name } : {}),
        ...(record.input?.callId ? { callId: record.input.callId } : {}),
      })),
      submissions: inspection.submissions.map((s) => ({
        conversationId: s.conversationId,
        ...(s.requestId ? { requestId: s.requestId } : {}),
      })),
      fresh: g.__storm.fresh.splice(0) as RawEntry[],
    };
  });
}

const phaseOf = (page: Page) =>
  page.evaluate(() => document.querySelector('[data-testid="engine-status"]')?.getAttribute("data-phase"));

// ---------------------------------------------------------------------------------------------
// Reading a transcript

interface Message {
  role: string;
  stopReason?: string;
  toolCallId?: string;
  toolName?: string;
  content?: string | Array<{ type: string; text?: string; id?: string; name?: string }>;
}
const messageOf = (e: RawEntry): Message | undefined =>
  Array.isArray(e.model) ? (e.model[0] as Message) : undefined;
const textOf = (m: Message | undefined): string =>
  typeof m?.content === "string"
    ? m.content
    : (m?.content ?? []).map((c) => (c.type === "text" ? (c.text ?? "") : "")).join("\n");
const callsOf = (m: Message | undefined) =>
  typeof m?.content === "string" || !m?.content
    ? []
    : m.content.filter((c) => c.type === "toolCall").map((c) => ({ id: c.id!, name: c.name! }));

const INTERRUPTED = "interrupted before it reported a result";

// ---------------------------------------------------------------------------------------------

const buildDir = join(root, "test-results/e2e-storm");
let server: StormServer;

beforeAll(async () => {
  server = await serveStorm(buildDir, SEED);
  // STORM_KEEP_BUILD=1 reuses the build of an earlier run (replaying seeds after no source change).
  if (process.env.STORM_KEEP_BUILD === "1" && existsSync(join(buildDir, "index.html"))) return;
  rmSync(buildDir, { recursive: true, force: true });
  mkdirSync(buildDir, { recursive: true });
  const started = Date.now();
  const result = spawnSync(
    process.execPath,
    [
      join(root, "node_modules/vite/bin/vite.js"),
      "build",
      "--logLevel",
      "warn",
      "--outDir",
      buildDir,
      "--emptyOutDir",
      "--base",
      "./",
    ],
    { cwd: root, stdio: ["ignore", "ignore", "inherit"], env: { ...process.env, BUILD_ID: SENTINEL_BUILD } },
  );
  if (result.status !== 0)
    throw new Error(`building the storm's app failed: exit ${result.status ?? result.signal}`);
  console.log(`[e2e] built the storm's app (relative base) in ${Date.now() - started} ms`);
});

afterAll(async () => {
  await server?.close();
});

test(`kill storm: ${KILLS} SIGKILLs of Chromium across tools, code mode, a subagent, compactions and deploy handovers (seed ${SEED})`, async () => {
  console.log(`[storm] seed ${SEED}, ${KILLS} kills: replay with STORM_SEED=${SEED} STORM_KILLS=${KILLS}`);
  const plans = killPlans(SEED, KILLS);
  const workload = rng(SEED);
  const store = `storm-${SEED}-${Date.now().toString(36)}`;
  const logs: string[] = [];
  let b: LaunchedBrowser = await launchBrowser({ args: EXTRA_FLAGS });
  let deploy = 0;
  const urlOf = (k: number) =>
    `${server.origin}/b${k}/?${new URLSearchParams({ debug: "1", store, effects: "/effect" })}`;
  const record = (page: Page, label: string) => {
    page.on("console", (m) => logs.push(`[${label} ${m.type()}] ${m.text()}`));
    page.on("pageerror", (e) => logs.push(`[${label} pageerror] ${e.message}`));
    return page;
  };
  const openTab = async (k: number, label: string, wait = true) => {
    const page = record(await b.newPage(), label);
    await page.goto(urlOf(k));
    if (wait) await waitPhase(page, "ready");
    return page;
  };

  // What the test knows.
  const inputs: Input[] = [];
  const seen = new Map<number, Seen>();
  const callNames = new Map<string, string>();
  let charsSinceCompaction = 0;
  let compactions = 0;
  const counts = Object.fromEntries(MOMENTS.map((m) => [m, 0])) as Record<Moment, number>;
  const aimed = Object.fromEntries(MOMENTS.map((m) => [m, 0])) as Record<string, number>;
  let workAtKill = 0;
  let relaunched = 0;
  /** The store kind the engine reported at the first open and at each relaunch: it never changes. */
  const kinds: Array<string | undefined> = [];
  /** Per cycle: Chromium up (DevTools connected), then the app's engine ready, then the wait for the moment. */
  const timing = { launch: [] as number[], ready: [] as number[], look: [] as number[] };

  try {
    let page = await openTab(deploy, `b${deploy}`);
    kinds.push(await storeKindOf(page));
    const c = await engine<number>(page, "conversations.create", "Kill storm");
    await installRecorder(page, c);

    const take = (p: Poll) => {
      for (const raw of p.fresh) {
        const s = digestOf(raw);
        const before = seen.get(s.id);
        if (before && before.digest !== s.digest)
          throw new Error(`entry ${s.id} changed after it was committed: ${before.kind} -> ${s.kind}`);
        seen.set(s.id, s);
        for (const call of callsOf(messageOf(raw))) callNames.set(call.id, call.name);
      }
    };
    const classify = (p: Poll | undefined, handover: boolean): Moment => {
      if (handover) return "handover";
      if (server.inFlight() > 0) return "effect";
      if (!p) return "step";
      const name = (t: LiveTask) => t.nested ?? (t.callId ? callNames.get(t.callId) : undefined);
      const tools = p.tasks.filter((t) => t.kind === "pi.tool");
      if (p.tasks.some((t) => t.kind === "pi.compaction")) return "compaction";
      if (p.tasks.some((t) => t.conversationId !== c) || tools.some((t) => name(t) === "subagent"))
        return "subagent";
      if (tools.some((t) => name(t) === "codemode")) return "codemode";
      if (tools.some((t) => t.running)) return "tool";
      if (p.tasks.some((t) => t.kind === "pi.generation" && t.running && t.phase === "request"))
        return "stream";
      if (p.tasks.length === 0 && p.submissions.length === 0) return "idle";
      return "step";
    };
    const outstanding = (p: Poll) => p.submissions.filter((s) => s.conversationId === c).length;
    const submit = async (kind: InputKind) => {
      const input = makeInput(SEED, inputs.length + 1, kind, workload);
      await engine(page, "run.submit", c, { text: input.text, requestId: input.requestId });
      inputs.push(input);
      charsSinceCompaction += input.text.length;
    };
    const compact = () => {
      compactions++;
      charsSinceCompaction = 0;
      void engine(page, "run.compact", c).catch(() => undefined);
    };

    for (let i = 0; i < plans.length; i++) {
      const plan = plans[i]!;
      aimed[plan.aim] = (aimed[plan.aim] ?? 0) + 1;
      const readyAt = Date.now();
      let last: Poll | undefined;
      let handover: Page | undefined;
      let handoverAt: number | undefined;
      let moment: Moment | undefined;
      if (plan.aim === "handover") {
        // Deploy a newer build: its tab asks the running engine to hand over.
        deploy++;
        handover = await openTab(deploy, `b${deploy}`, false);
      }
      for (;;) {
        if (handover) {
          const [phase, oldPhase] = await Promise.all([
            phaseOf(handover).catch(() => undefined),
            phaseOf(page).catch(() => undefined),
          ]);
          // The handover proper: the new engine asked (it waits for the lock) or the old one lets go.
          if (
            handoverAt === undefined &&
            (phase === "waiting-for-lock" || oldPhase === "handing-over" || oldPhase === "handed-over")
          )
            handoverAt = Date.now();
          if (phase === "ready") {
            // The handover finished before the kill came: the new build's tab carries on.
            const old = page;
            page = handover;
            handover = undefined;
            await old.close();
            await installRecorder(page, c);
          } else if (handoverAt !== undefined && Date.now() - handoverAt >= plan.delayMs) {
            moment = "handover";
            break;
          } else if (Date.now() - readyAt > 60_000) {
            throw new Error(
              `deploy ${deploy} did not take over within 60 s (its tab: ${phase}, the old: ${oldPhase})`,
            );
          } else continue;
        }
        last = await poll(page);
        take(last);
        const elapsed = Date.now() - readyAt;
        // Feed the run: at most two inputs waiting, none while an idle moment is wanted.
        if (plan.aim !== "idle" && outstanding(last) < 2) {
          const wanted = kindFor(plan.aim, workload);
          await submit(wanted);
        }
        if (
          plan.aim === "compaction" &&
          charsSinceCompaction >= COMPACT_AFTER_CHARS &&
          !last.tasks.some((t) => t.kind === "pi.compaction")
        )
          compact();
        if (elapsed < plan.delayMs) continue;
        const now = classify(last, false);
        if (plan.aim === "any" || now === plan.aim || elapsed >= plan.delayMs + plan.patienceMs) {
          moment = now;
          break;
        }
      }
      timing.look.push(Date.now() - readyAt);
      // SIGKILL the whole browser at this moment.
      const live = last ? last.tasks.length > 0 || last.submissions.length > 0 : true;
      await b.kill();
      counts[moment]++;
      if (live) workAtKill++;
      keepIndexedDb(b.profileDir, i + 1, moment);
      const started = Date.now();
      b = await launchBrowser({ profileDir: b.profileDir, args: EXTRA_FLAGS });
      const launched = Date.now();
      page = await openTab(deploy, `b${deploy} after kill ${i + 1}`, false);
      // Chromium says so on stderr when it threw the origin's IndexedDB away at this open (the
      // engine then waits for a person's "start fresh" instead of getting ready).
      await until(
        "the engine ready, or Chromium saying it discarded the store",
        () => phaseOf(page).catch(() => undefined),
        (phase) => phase === "ready" || DISCARDED.test(b.log()),
        60_000,
      );
      if (DISCARDED.test(b.log()))
        throw new Error(
          `Chromium discarded the origin's IndexedDB at the relaunch after kill ${i + 1} (${MOMENT_WORDS[moment]}):\n` +
            b
              .log()
              .split("\n")
              .filter((line) => DISCARDED.test(line))
              .join("\n"),
        );
      if (i + 1 === STOP_AFTER) {
        console.log(`[storm] STORM_STOP_AFTER=${STOP_AFTER}: stopping after kill ${i + 1}`);
        return;
      }
      timing.launch.push(launched - started);
      timing.ready.push(Date.now() - launched);
      relaunched++;
      kinds.push(await storeKindOf(page));
      await installRecorder(page, c);
    }

    // The storm is over: let every input be answered.
    const settled = await until(
      "every input answered and nothing live",
      async () => {
        const p = await poll(page);
        take(p);
        return p;
      },
      (p) => p.tasks.length === 0 && p.submissions.length === 0,
      180_000,
    );
    take(settled);

    // ------------------------------------------------------------------------------------------
    // The checks, on the store's committed records as the engine hands them out.
    const entriesOf = (id: number) => engine<RawEntry[]>(page, "watches.entries", id);
    const main = await entriesOf(c);
    const children: RawEntry[][] = [];
    for (let id = c + 1, misses = 0; misses < 10; id++) {
      const found = await entriesOf(id).catch(() => undefined);
      if (found) children.push(found);
      else misses++;
    }
    const all = [...main, ...children.flat()];

    // Nothing lost: every entry the test saw committed is there, unchanged.
    const final = new Map(all.map((e) => [e.id, digestOf(e)]));
    const lost = [...seen.values()].filter((s) => final.get(s.id)?.digest !== s.digest);
    // No entry doubled: ids unique, one user entry per input, one result per tool call.
    const doubled: string[] = [];
    if (final.size !== all.length) doubled.push("an entry id twice");

    const problems: string[] = [];
    const checkConversation = (entries: RawEntry[], label: string, expectedUsers: string[] | undefined) => {
      const users = entries.filter((e) => e.kind === "pi.user").map((e) => textOf(messageOf(e)));
      if (expectedUsers) {
        for (const text of expectedUsers) {
          const n = users.filter((u) => u === text).length;
          if (n === 0) problems.push(`${label}: input "${text.slice(-60)}" is missing`);
          if (n > 1) doubled.push(`${label}: input "${text.slice(-60)}" ${n} times`);
        }
        const extra = users.filter((u) => !expectedUsers.includes(u));
        if (extra.length > 0) problems.push(`${label}: inputs nobody sent: ${extra.length}`);
      } else if (users.length !== 1) problems.push(`${label}: ${users.length} inputs, not 1`);
      // Each input answered exactly once: one final answer between it and the next input.
      let answers = -1;
      const closeSegment = (at: string) => {
        if (answers !== -1 && answers !== 1)
          problems.push(`${label}: ${answers} answers to the input before ${at}`);
      };
      // A call is its assistant entry and its id: the demo model derives ids from the context's
      // length, which starts over smaller after a compaction, so an id can come back later on.
      const calls = new Map<string, number>();
      const issuedBy = new Map<string, number>();
      for (const e of entries) {
        const m = messageOf(e);
        if (e.kind === "pi.user") {
          closeSegment(`entry ${e.id}`);
          answers = 0;
        } else if (e.kind === "pi.assistant" && m) {
          if (m.stopReason === "aborted") continue; // a stream a kill cut short: kept, never run
          for (const call of callsOf(m)) {
            const key = `${e.id}:${call.id}`;
            if (calls.has(key)) doubled.push(`${label}: answer ${e.id} asks for call ${call.id} twice`);
            calls.set(key, 0);
            issuedBy.set(call.id, e.id);
          }
          if (m.stopReason === "toolUse") continue;
          if (m.stopReason !== "stop") problems.push(`${label}: answer ${e.id} ended ${m.stopReason}`);
          answers++;
        } else if (e.kind === "pi.tool-result" && m?.toolCallId) {
          // A result belongs to the newest answer before it that asked for its id.
          const key = `${issuedBy.get(m.toolCallId)}:${m.toolCallId}`;
          const n = calls.get(key);
          if (n === undefined)
            problems.push(`${label}: result ${e.id} for a call nobody asked (${m.toolCallId})`);
          else calls.set(key, n + 1);
          const text = textOf(m);
          if (text.includes("replay diverged")) problems.push(`${label}: ${m.toolName} replay diverged`);
        }
      }
      closeSegment("the end");
      for (const [key, n] of calls) {
        if (n === 0) problems.push(`${label}: tool call ${key} has no result`);
        if (n > 1) doubled.push(`${label}: tool call ${key} has ${n} results`);
      }
      // A compaction's summary is placed once: never two at the same cut.
      const cuts = entries.filter((e) => e.kind === "pi.compaction").map((e) => e.head);
      if (new Set(cuts).size !== cuts.length) doubled.push(`${label}: a compaction summary placed twice`);
    };
    checkConversation(
      main,
      "main",
      inputs.map((i) => i.text),
    );
    children.forEach((entries, i) => {
      checkConversation(entries, `subagent ${i + 1}`, undefined);
    });

    // Tool effects within their replay policy, counted by the server.
    const answerTo = (input: Input): string => {
      const start = main.findIndex((e) => e.kind === "pi.user" && textOf(messageOf(e)) === input.text);
      const next = main.findIndex((e, i) => i > start && e.kind === "pi.user");
      return main
        .slice(start, next === -1 ? undefined : next)
        .filter((e) => e.kind !== "pi.user")
        .map((e) => textOf(messageOf(e)))
        .join("\n");
    };
    // One child conversation per subagent input, found by the effect key its task names (checked
    // before the figures print, so a missing child comes with the rest of the run's findings).
    const subs = inputs.filter((i) => i.kind === "sub");
    for (const input of subs) {
      const mine = children.filter((entries) =>
        entries.some((e) => e.kind === "pi.user" && textOf(messageOf(e)).includes(`"key":"${input.key}"`)),
      ).length;
      if (mine === 0)
        problems.push(
          `input ${input.n} (sub): no child conversation; its answer ends: ${answerTo(input).slice(-400)}`,
        );
      if (mine > 1) doubled.push(`input ${input.n} (sub): ${mine} child conversations`);
    }
    if (children.length !== subs.length)
      problems.push(`${children.length} child conversations for ${subs.length} subagent inputs`);
    const effectRows = { once: 0, onceInterrupted: 0, keyed: 0, keyedRetries: 0 };
    for (const input of inputs) {
      if (!input.key) continue;
      const log = server.effects.get(input.key);
      const said = answerTo(input);
      if (input.kind === "once") {
        effectRows.once++;
        if ((log?.attempts ?? 0) > 1) doubled.push(`effect_once ${input.key} ran ${log?.attempts} times`);
        if (said.includes(`effect_once answered: applied ${input.key}`)) {
          if (log?.applied !== 1)
            problems.push(`effect_once ${input.key} answered but applied ${log?.applied ?? 0}`);
        } else if (said.includes(INTERRUPTED)) effectRows.onceInterrupted++;
        else problems.push(`effect_once ${input.key}: neither answered nor interrupted`);
      } else {
        effectRows.keyed++;
        if (log?.applied !== 1) problems.push(`effect_keyed ${input.key} applied ${log?.applied ?? 0} times`);
        // The answer's end says what the call got instead (a handover once committed "harness is closed").
        if (!said.includes(`applied ${input.key}`))
          problems.push(`effect_keyed ${input.key} not in its answer, which ends: ${said.slice(-400)}`);
        effectRows.keyedRetries += Math.max(0, (log?.attempts ?? 0) - 1);
      }
      if (input.kind !== "once" && said.includes(INTERRUPTED))
        problems.push(`input ${input.n} (${input.kind}): a replay-safe call was recorded as interrupted`);
    }
    const asked = new Set(inputs.map((i) => i.key));
    for (const key of server.effects.keys())
      if (!asked.has(key)) problems.push(`an effect nobody asked for: ${key}`);
    // Each manual request gives at most one summary (the engine also compacts on its own as the
    // context nears the model's window: those summaries say "threshold").
    const summaries = main.filter((e) => e.kind === "pi.compaction");
    const manual = summaries.filter((e) => (e.data as { reason?: string } | undefined)?.reason === "manual");
    if (manual.length > compactions)
      doubled.push(`${manual.length} manual summaries for ${compactions} requests`);

    // The figures.
    console.log(`[storm] seed ${SEED}: kills by moment (aimed at, then observed):`);
    for (const m of MOMENTS) console.log(`  ${MOMENT_WORDS[m].padEnd(54)} ${String(counts[m]).padStart(4)}`);
    console.log(`  aims: ${JSON.stringify(aimed)}`);
    const median = (xs: number[]) => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)] ?? 0;
    console.log(
      `[storm] kills ${KILLS}, resumed ${relaunched} (work in flight at ${workAtKill} of them), deploys ${deploy}, ` +
        `inputs ${inputs.length} (${(["chat", "note", "once", "keyed", "sub"] as const).map((k) => `${k} ${inputs.filter((i) => i.kind === k).length}`).join(", ")}), ` +
        `subagents ${children.length}, compactions asked ${compactions} / summaries ${manual.length} manual + ${summaries.length - manual.length} automatic, ` +
        `effect_once ${effectRows.once} (${effectRows.onceInterrupted} interrupted), effect_keyed ${effectRows.keyed} (${effectRows.keyedRetries} retried), ` +
        `entries ${all.length}, lost = ${lost.length}, doubled = ${doubled.length}; medians per cycle: Chromium up ${median(timing.launch)} ms, engine ready ${median(timing.ready)} ms, ` +
        `moment found ${median(timing.look)} ms; store kind ${kinds[0]} at the first open and at ${kinds.filter((k) => k === kinds[0]).length - 1} of ${relaunched} relaunches`,
    );
    // A new profile's store is the shipped kind, and no kill ever moves it (a store that came back as
    // another kind would be an empty one).
    expect(kinds[0]).toBe("opfs-lent");
    expect(kinds.filter((k) => k !== kinds[0])).toEqual([]);
    expect(lost.map((s) => `${s.kind} ${s.id}`)).toEqual([]);
    expect(doubled).toEqual([]);
    expect(problems).toEqual([]);
    expect(relaunched).toBe(KILLS);
    expect(Object.values(counts).reduce((x, y) => x + y, 0)).toBe(KILLS);
  } catch (error) {
    console.log(
      `[storm] FAILED with seed ${SEED} (STORM_SEED=${SEED} STORM_KILLS=${KILLS} replays the plan)`,
    );
    console.log(
      `page logs:\n${logs.slice(-200).join("\n")}\nchromium stderr (tail):\n${b.log().slice(-3000)}`,
    );
    throw error;
  } finally {
    await b.close();
  }
}, 1_800_000);
