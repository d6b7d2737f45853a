/**
 * axe-core in the built app, for the e2e files that check accessibility: its source is read once per
 * file and injected into a page through the devtools protocol (the app's CSP refuses inline
 * scripts; that evaluation is not bound by it), then run on the whole page or one part of it.
 * Invariant: only serious and critical violations are reported, each as its rule id and a few targets.
 */
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import type { Page } from "playwright-core";

const require = createRequire(import.meta.url);
let axeCode: string | undefined;

/** axe-core's minified source (read on first use). */
export const axeSource = (): string =>
  (axeCode ??= readFileSync(require.resolve("axe-core/axe.min.js"), "utf8"));

/**
 * axe-core's serious and critical violations on the page as it is now (rule id and a few targets),
 * within the element `selector` names, or the whole document without one.
 */
export async function seriousViolations(page: Page, selector?: string): Promise<string[]> {
  if (!(await page.evaluate(() => "axe" in globalThis))) await page.evaluate(axeSource());
  return page.evaluate(async (selector) => {
    const axe = (
      globalThis as unknown as {
        axe: {
          run(ctx: Document | Element): Promise<{
            violations: Array<{ id: string; impact: string; nodes: Array<{ target: string[] }> }>;
          }>;
        };
      }
    ).axe;
    const context = selector === null ? document : document.querySelector(selector);
    if (!context) throw new Error(`axe: nothing matches ${selector}`);
    const result = await axe.run(context);
    return result.violations
      .filter((v) => v.impact === "serious" || v.impact === "critical")
      .map(
        (v) =>
          `${v.id}: ${v.nodes
            .slice(0, 3)
            .map((n) => n.target.join(" "))
            .join(", ")}`,
      );
  }, selector ?? null);
}
