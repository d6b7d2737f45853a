/**
 * `npm run server`: the local server engine. It bundles worker/entry/server.ts with esbuild (as the
 * server tests do: tests/server/miniflare.ts) and serves it with miniflare 3 (workerd, the last line
 * that runs on Node 20) on a port (default 8787, `--port N`, `--host H`, default 127.0.0.1), one
 * SQLite-backed Durable Object per space, persisted under the data folder (default `.data/server/`,
 * `--data DIR`). Invariants:
 * - the token secret (`SPACE_TOKEN_SECRET`) is made on first start and kept in `<data>/secret`
 *   (mode 600); it is never printed; `npm run server -- token <space>` prints that space's token
 *   (worker/server/token.ts's scheme, computed here with node:crypto; the server tests check that
 *   the front door accepts it);
 * - every `<PROVIDER>_API_KEY` in the environment becomes the server's key for that provider, and
 *   every `MCP_<NAME>_TOKEN` the bearer token of the spaces' MCP server of that name (a value is
 *   never printed, only the variable's name); every other `SPACE_*` variable (the spaces'
 *   settings: `SPACE_HEARTBEAT_MS`, `SPACE_RATE_PER_SECOND`, `SPACE_RATE_BURST`,
 *   `SPACE_MAX_MESSAGE_CHARS`) is passed on as well; `SPACE_TOKEN_SECRET` only ever comes from the file;
 * - at start, the stored alarm of every space in the folder is armed again (`Space.rearm`): workerd
 *   run locally forgets alarm schedules when its process restarts. The spaces are the object files
 *   miniflare keeps in `<data>/objects/` (their names are object ids, which `idFromString` takes back);
 * - Ctrl-C (SIGINT) or SIGTERM stops workerd. A SIGKILL of this process alone leaves its workerd
 *   running (holding the port): kill the process group (`kill -9 -<pid>`). Nothing half-written
 *   stays that the next start cannot read (the store commits through SQLite).
 */
import { randomBytes } from "node:crypto";
import { chmodSync, existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { Miniflare } from "miniflare";
import { bundleServerWorker, QUICKJS_WASM_MODULE, quickjsWasm, spaceToken } from "./server-worker.mjs";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");

/** The compatibility date the worker runs at (workerd 1.20250718 knows dates up to its own). */
const COMPATIBILITY_DATE = "2025-07-01";
const SPACE_NAME = /^[A-Za-z0-9_-]{1,64}$/;

function usage(problem) {
  if (problem) console.error(`server: ${problem}`);
  console.error(
    "usage: npm run server [-- --port 8787] [--host 127.0.0.1] [--data .data/server]\n" +
      "       npm run server -- token <space> [--data .data/server]",
  );
  process.exit(2);
}

function parseArgs(argv) {
  const options = { port: 8787, host: "127.0.0.1", data: join(root, ".data", "server"), command: "serve" };
  const rest = [];
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    const value = () => argv[++i] ?? usage(`${arg} needs a value`);
    if (arg === "--port") {
      options.port = Number(value());
      if (!Number.isInteger(options.port) || options.port < 0 || options.port > 65535)
        usage("--port: 0 to 65535");
    } else if (arg === "--host") options.host = value();
    else if (arg === "--data") options.data = resolve(value());
    else if (arg === "--help" || arg === "-h") usage();
    else if (arg.startsWith("-")) usage(`unknown option ${arg}`);
    else rest.push(arg);
  }
  if (rest[0] === "token") {
    if (rest.length !== 2) usage("token takes one space name");
    if (!SPACE_NAME.test(rest[1])) usage("a space's name: 1 to 64 of A-Z a-z 0-9 _ -");
    return { ...options, command: "token", space: rest[1] };
  }
  if (rest.length > 0) usage(`unknown command ${rest[0]}`);
  return options;
}

/** The token secret in the data folder, made (mode 600) when there is none. */
function secretIn(data) {
  mkdirSync(data, { recursive: true });
  const file = join(data, "secret");
  if (!existsSync(file)) {
    writeFileSync(file, `${randomBytes(32).toString("base64url")}\n`, { mode: 0o600, flag: "wx" });
    console.error(`server: made a new token secret in ${file}`);
  }
  chmodSync(file, 0o600);
  const secret = readFileSync(file, "utf8").trim();
  if (secret.length < 32) throw new Error(`${file} holds no usable secret (32 characters at least)`);
  return secret;
}

/** The provider keys in the environment (`<PROVIDER>_API_KEY`), as the worker's bindings. */
function providerKeys() {
  return Object.fromEntries(
    Object.entries(process.env).filter(([name, value]) => /^[A-Z0-9_]+_API_KEY$/.test(name) && value),
  );
}

/** The MCP servers' bearer tokens from the environment: `MCP_<NAME>_TOKEN` (worker/app/mcp/store.ts). */
function mcpTokens() {
  return Object.fromEntries(
    Object.entries(process.env).filter(([name, value]) => /^MCP_[A-Z0-9_]+_TOKEN$/.test(name) && value),
  );
}

/** The spaces' settings from the environment (`SPACE_HEARTBEAT_MS`, `SPACE_RATE_*`, ...; worker/server/space.ts). */
function spaceSettings() {
  return Object.fromEntries(
    Object.entries(process.env).filter(
      ([name, value]) => /^SPACE_[A-Z0-9_]+$/.test(name) && name !== "SPACE_TOKEN_SECRET" && value,
    ),
  );
}

/** The object ids of the spaces kept in the folder (miniflare names each object's file by its id). */
function storedSpaceIds(objects) {
  if (!existsSync(objects)) return [];
  const ids = [];
  for (const dir of readdirSync(objects, { withFileTypes: true })) {
    if (!dir.isDirectory() || !dir.name.endsWith("SpaceObject")) continue;
    for (const file of readdirSync(join(objects, dir.name)))
      if (/^[0-9a-f]{64}\.sqlite$/.test(file)) ids.push(file.slice(0, 64));
  }
  return ids;
}

async function serve(options) {
  const secret = secretIn(options.data);
  const objects = join(options.data, "objects");
  const keys = providerKeys();
  const tokens = mcpTokens();
  const script = await bundleServerWorker(join(root, "worker", "entry", "server.ts"));
  const mf = new Miniflare({
    modules: [
      { type: "ESModule", path: join(root, "worker", "entry", "server.js"), contents: script },
      {
        type: "CompiledWasm",
        path: join(root, "worker", "entry", QUICKJS_WASM_MODULE),
        contents: quickjsWasm(),
      },
    ],
    compatibilityDate: COMPATIBILITY_DATE,
    durableObjects: { SPACES: { className: "SpaceObject", useSQLite: true } },
    durableObjectsPersist: objects,
    bindings: {
      ...spaceSettings(),
      ...keys,
      ...tokens,
      SPACE_TOKEN_SECRET: secret,
      SPACE_BUILD: `server-${new Date().toISOString()}`,
    },
    host: options.host,
    port: options.port,
  });
  const url = await mf.ready;
  // Arm again the alarms a previous run left (see Space.rearm).
  const namespace = await mf.getDurableObjectNamespace("SPACES");
  let armed = 0;
  const ids = storedSpaceIds(objects);
  for (const id of ids) {
    try {
      const response = await namespace
        .get(namespace.idFromString(id))
        .fetch("http://server.local/space/_/rearm", { method: "POST" });
      const body = await response.json();
      if (body.alarm !== null && body.alarm !== undefined) armed++;
    } catch (error) {
      console.error(`server: could not re-arm space ${id.slice(0, 12)}…: ${error?.message ?? error}`);
    }
  }
  const names = Object.keys(keys);
  console.log(`server: listening on ${url.href.replace(/\/$/, "")}`);
  console.log(`server: data in ${options.data} (${ids.length} space(s), ${armed} alarm(s) re-armed)`);
  console.log(
    `server: model keys from the environment: ${names.length > 0 ? names.join(", ") : "none (the demo model only)"}`,
  );
  const tokenNames = Object.keys(tokens);
  if (tokenNames.length > 0) console.log(`server: MCP tokens from the environment: ${tokenNames.join(", ")}`);
  console.log("server: a space's token: npm run server -- token <space>");
  console.log(`server: a tab connects to ${url.href.replace(/^http/, "ws")}space/<space>/socket`);
  const stop = async () => {
    await mf.dispose().catch(() => undefined);
    process.exit(0);
  };
  process.once("SIGINT", stop);
  process.once("SIGTERM", stop);
}

const options = parseArgs(process.argv.slice(2));
if (options.command === "token") {
  console.log(spaceToken(secretIn(options.data), options.space));
} else {
  serve(options).catch((error) => {
    console.error(`server: could not start: ${error instanceof Error ? error.message : String(error)}`);
    process.exit(1);
  });
}
