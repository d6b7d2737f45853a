/**
 * The tab's initial JavaScript stays within its budget (issue 31: 80 KB gzip; heavy parts load on
 * demand). A check of the built app in dist/ (the e2e project runs on a fresh build in `npm test`),
 * no browser: every script index.html loads and the closure of the entry's static imports, gzip at
 * zlib's default level (tests/bench/initial-js.ts measures; `npm run bench` reports the same figure).
 * A size is not a timing: it is the same on any machine, so it is asserted here.
 */
import { expect, inject, test } from "vitest";
import { INITIAL_JS_BUDGET_KB, measureInitialJs } from "../bench/initial-js.ts";

test(`the tab's initial JavaScript is at most ${INITIAL_JS_BUDGET_KB} KB gzip; lazy chunks are not counted`, () => {
  const m = measureInitialJs(inject("appDir"));
  const kb = (bytes: number) => (bytes / 1024).toFixed(1);
  console.log(
    `[initial-js] ${kb(m.gzip)} KB gzip in ${m.files.length} files: ${m.files.map((f) => `${f.path} ${kb(f.gzip)} KB`).join(", ")}`,
  );
  // The entry module is among them, and nothing lazy (pi-ai's catalogue, the markdown renderer) is.
  expect(m.files.some((f) => f.path.startsWith("assets/index-"))).toBe(true);
  expect(m.gzip / 1024).toBeLessThanOrEqual(INITIAL_JS_BUDGET_KB);
});
