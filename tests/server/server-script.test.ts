/**
 * `npm run server` (scripts/server.mjs), spawned as a user runs it: `token <space>` prints a token
 * the front door admits for that space only (the Node computation agrees with the worker's Web
 * Crypto one); the secret is made once, mode 600, and never printed; provider keys from the
 * environment are named, never shown; and a server killed (SIGKILL of its process group: the
 * script and its workerd) mid-run and started again on the same folder re-arms the space's stored
 * alarm at start: the space wakes by that alarm with no request (the heartbeat is half a second
 * here, passed on as the script passes every `SPACE_*` setting) and the run finishes once.
 */
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, expect, test } from "vitest";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..");
const script = join(root, "scripts", "server.mjs");
let data: string;

interface Running {
  readonly child: ChildProcess;
  readonly url: string;
  output(): string;
}

const running = new Set<ChildProcess>();

/** Start the server on a free port; resolves once it printed its address. */
function startServer(env: Record<string, string> = {}): Promise<Running> {
  const child = spawn(process.execPath, [script, "--data", data, "--port", "0"], {
    cwd: root,
    env: { ...process.env, ...env },
    detached: true,
    stdio: ["ignore", "pipe", "pipe"],
  });
  running.add(child);
  let output = "";
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the server did not start: ${output}`)), 60_000);
    const read = (chunk: Buffer) => {
      output += chunk.toString();
      const url = /listening on (http:\/\/\S+)/.exec(output)?.[1];
      if (url && output.includes("a tab connects to")) {
        clearTimeout(timer);
        resolve({ child, url, output: () => output });
      }
    };
    child.stdout!.on("data", read);
    child.stderr!.on("data", read);
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`the server exited (${code}): ${output}`));
    });
  });
}

/** SIGKILL the server's whole process group (the script and the workerd it started). */
async function killServer(server: Running): Promise<void> {
  const exited = new Promise((r) => server.child.once("exit", r));
  process.kill(-server.child.pid!, "SIGKILL");
  await exited;
  running.delete(server.child);
}

function token(space: string): string {
  const result = spawnSync(process.execPath, [script, "token", space, "--data", data], { encoding: "utf8" });
  expect(result.status).toBe(0);
  return result.stdout.trim();
}

async function get(url: string, bearer?: string): Promise<{ status: number; body: Record<string, unknown> }> {
  const response = await fetch(url, bearer ? { headers: { authorization: `Bearer ${bearer}` } } : {});
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

beforeAll(() => {
  data = mkdtempSync(join(tmpdir(), "server-script-"));
});

afterAll(() => {
  for (const child of running) {
    try {
      process.kill(-child.pid!, "SIGKILL");
    } catch {
      // Gone already.
    }
  }
  rmSync(data, { recursive: true, force: true });
});

test("`npm run server -- token <space>` prints a token the front door admits for that space only", async () => {
  const alpha = token("alpha");
  expect(alpha).toMatch(/^alpha\.[A-Za-z0-9_-]{43}$/);
  expect(token("alpha")).toBe(alpha); // the same secret the second time
  expect(statSync(join(data, "secret")).mode & 0o777).toBe(0o600);
  const server = await startServer({ EXAMPLE_API_KEY: "sk-never-printed" });
  expect(await get(`${server.url}/space/alpha/check`, alpha)).toEqual({
    status: 200,
    body: { ok: true, space: "alpha" },
  });
  expect(await get(`${server.url}/space/beta/check`, alpha)).toMatchObject({
    status: 403,
    body: { code: "token-other-space" },
  });
  expect(await get(`${server.url}/space/alpha/check`)).toMatchObject({
    status: 401,
    body: { code: "token-missing" },
  });
  expect(server.output()).toContain("EXAMPLE_API_KEY");
  expect(server.output()).not.toContain("sk-never-printed");
  expect(server.output()).not.toContain(alpha.split(".")[1]);
  await killServer(server);
});

test("a server killed mid-run re-arms the space's alarm at its next start, and the run finishes", async () => {
  const bearer = token("long");
  const fast = { SPACE_HEARTBEAT_MS: "500" };
  let server = await startServer(fast);
  const submitted = await fetch(`${server.url}/space/long/submit`, {
    method: "POST",
    headers: { authorization: `Bearer ${bearer}`, "content-type": "application/json" },
    body: JSON.stringify({ text: "run a long task", requestId: "long-1" }),
  });
  const { conversation } = (await submitted.json()) as { conversation: number };
  const view = async () =>
    (await get(`${server.url}/space/long/view?conversation=${conversation}`, bearer)).body as {
      busy: boolean;
      live: number;
      entries: Array<{ kind: string }>;
    };
  // The tool call is committed and the tool (3 s) runs: kill there.
  for (let v = await view(); !v.entries.some((e) => e.kind === "pi.assistant"); v = await view())
    await new Promise((r) => setTimeout(r, 100));
  await killServer(server);
  server = await startServer(fast);
  expect(server.output()).toMatch(/1 space\(s\), 1 alarm\(s\) re-armed/);
  // No request for a while: only the re-armed alarm can open the space.
  await new Promise((r) => setTimeout(r, 1_500));
  expect((await get(`${server.url}/space/long/status`, bearer)).body).toMatchObject({ by: "alarm" });
  let v = await view();
  for (let i = 0; v.busy || v.live > 0; i++) {
    if (i > 300) throw new Error(`the run did not finish: ${JSON.stringify(v)}`);
    await new Promise((r) => setTimeout(r, 100));
    v = await view();
  }
  expect(v.entries.map((e) => e.kind)).toEqual([
    "pi.user",
    "pi.system",
    "pi.assistant",
    "pi.tool-result",
    "pi.assistant",
  ]);
  await killServer(server);
});
