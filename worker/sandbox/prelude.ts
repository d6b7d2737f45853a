/**
 * The script run before every model-written script, inside QuickJS, to make its world deterministic:
 * a virtual clock (`Date`) that starts at the call's recorded start and moves 1 ms per reading, a
 * seeded `Math.random` (mulberry32), UTC for every local-time method, no `WeakRef` or
 * `FinalizationRegistry` (their timing depends on the collector), `console` writing to the call's
 * output, and one async function per host tool. It captures the two host functions it is given and
 * removes them from the global object, so the script only reaches the host through the wrappers.
 */

/** The global names the prelude consumes (defined by the runner, deleted by the prelude). */
export const HOST_PRINT = "__sandboxPrint";
export const HOST_CALL = "__sandboxCall";

/** Bumped whenever the prelude changes what a script observes: part of every fingerprint. */
export const PRELUDE_VERSION = 1;

const IDENTIFIER = /^[A-Za-z_$][A-Za-z0-9_$]*$/;

/** The prelude's source for one run. */
export function preludeSource(options: {
  start: number;
  seed: number;
  functions: readonly string[];
  globals: Readonly<Record<string, unknown>>;
}): string {
  const globals = options.functions.filter((name) => IDENTIFIER.test(name));
  return `(function (start, seed, names, globals, values) {
  "use strict";
  const g = globalThis;
  const print = g.${HOST_PRINT};
  const call = g.${HOST_CALL};
  delete g.${HOST_PRINT};
  delete g.${HOST_CALL};
  delete g.WeakRef;
  delete g.FinalizationRegistry;
  const stringify = JSON.stringify;
  const parse = JSON.parse;

  let state = seed >>> 0;
  function random() {
    state = (state + 0x6d2b79f5) | 0;
    let t = Math.imul(state ^ (state >>> 15), 1 | state);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }
  Object.defineProperty(Math, "random", { value: random, writable: true, configurable: true });

  const RealDate = Date;
  const proto = RealDate.prototype;
  let ticks = 0;
  const now = () => start + ticks++;
  function VirtualDate(...args) {
    if (!new.target) return new RealDate(now()).toUTCString();
    if (args.length === 0) return Reflect.construct(RealDate, [now()], new.target);
    if (args.length === 1) return Reflect.construct(RealDate, args, new.target);
    return Reflect.construct(RealDate, [RealDate.UTC(...args)], new.target);
  }
  Object.defineProperty(VirtualDate, "prototype", { value: proto });
  Object.defineProperty(proto, "constructor", { value: VirtualDate, writable: true, configurable: true });
  VirtualDate.now = now;
  VirtualDate.UTC = RealDate.UTC;
  VirtualDate.parse = RealDate.parse;
  for (const part of ["FullYear", "Month", "Date", "Day", "Hours", "Minutes", "Seconds", "Milliseconds"]) {
    proto["get" + part] = proto["getUTC" + part];
    if (part !== "Day") proto["set" + part] = proto["setUTC" + part];
  }
  proto.getTimezoneOffset = function () { return 0; };
  proto.toString = proto.toUTCString;
  proto.toDateString = function () { return this.toISOString().slice(0, 10); };
  proto.toTimeString = function () { return this.toISOString().slice(11, 23) + " GMT+0000"; };
  proto.toLocaleString = proto.toUTCString;
  proto.toLocaleDateString = proto.toDateString;
  proto.toLocaleTimeString = proto.toTimeString;
  g.Date = VirtualDate;

  const show = (value) => {
    if (typeof value === "string") return value;
    if (value instanceof Error) return value.name + ": " + value.message;
    try {
      const text = stringify(value);
      return text === undefined ? String(value) : text;
    } catch {
      return String(value);
    }
  };
  const log = (...args) => { print(args.map(show).join(" ") + "\\n"); };
  g.console = { log, info: log, warn: log, error: log, debug: log };

  const tools = {};
  for (const name of names) {
    tools[name] = async function (args) {
      const answer = parse(await call(name, stringify(args === undefined ? {} : args)));
      if (answer.isError) throw new Error(answer.text);
      return answer.value;
    };
  }
  g.tools = tools;
  // A tool named like a global the script relies on is reached through \`tools\` only.
  for (const name of globals) if (!(name in g)) g[name] = tools[name];
  for (const name of Object.keys(values))
    if (!(name in g)) Object.defineProperty(g, name, { value: Object.freeze(values[name]), enumerable: true });
})(${JSON.stringify(options.start)}, ${JSON.stringify(options.seed)}, ${JSON.stringify(options.functions)}, ${JSON.stringify(globals)}, ${JSON.stringify(options.globals)});`;
}
