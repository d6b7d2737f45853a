/** lib/memo.ts: the markdown renderer's cache keeps the newest results and calls through once per key. */
import { expect, test } from "vitest";
import { memoized } from "../../../src/lib/memo.ts";

test("a kept result is returned without calling the function again", () => {
  const calls: string[] = [];
  const render = memoized((text: string) => {
    calls.push(text);
    return `<p>${text}</p>`;
  }, 10);
  expect(render("a")).toBe("<p>a</p>");
  expect(render("b")).toBe("<p>b</p>");
  expect(render("a")).toBe("<p>a</p>");
  expect(calls).toEqual(["a", "b"]);
});

test("at most `size` results are kept, the oldest stored leaving first", () => {
  const calls: string[] = [];
  const render = memoized((text: string) => {
    calls.push(text);
    return text.length;
  }, 2);
  render("a");
  render("bb");
  render("ccc"); // "a" leaves
  render("bb");
  render("ccc");
  expect(calls).toEqual(["a", "bb", "ccc"]);
  render("a"); // computed again; "bb" leaves
  render("ccc");
  render("bb");
  expect(calls).toEqual(["a", "bb", "ccc", "a", "bb"]);
});
