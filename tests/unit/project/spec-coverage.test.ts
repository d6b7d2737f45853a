/**
 * Every test the coverage lists name exists (issue 29, "Coverage lists that hold": a script in CI
 * checks that every named test exists). The lists are `tests/spec-coverage/*.md` and
 * `tests/NOT-APPLICABLE.md`; this test reads each, extracts every (file, test name) reference and
 * checks it against the test files under `tests/`. It does not judge whether the test asserts the
 * rule (that is a reader's work); it catches a reference to a file that moved or a test renamed.
 *
 * What counts as a reference (the Markdown is read with its line breaks and indentation folded into
 * single spaces, so a name wrapped over lines is one name):
 * - `file › "name"` and `file › describe › "name"` (a bare file word followed by ` › `);
 * - `` `file`: "name" `` and `` `file` ("name") ``, `file.test ("name")`, `tests/e2e/x.test.ts: "name"`;
 * - a bare `file: "name"` (as in a table), when `file` is the name of a test file (else it is prose:
 *   `reason: "..."`);
 * - `` `file.test.ts › describe › test` `` (a path in backticks, its parts unquoted) and
 *   `` `file` › `describe › test` ``;
 * - after the first name, more names of the same file: `"a", "b"`, `"a"; also "b"`, `"a" and "b"`,
 *   `"a"; "b"`, `"a" (a comment), "b"` (but not `"a" (a comment); "b"`: there the quote is prose).
 * A name's closing quote is a `"` followed by a space, `,;.)` or the end; a title holding a quote
 * (`content "": the prompt`) is read to the first such quote, or a later one if that one matches.
 *
 * Resolving a file: `tests/` and the `.test.ts` / `.test` ending are dropped, and the file is the one
 * test file under `tests/` whose path without its ending is the name or ends with `/` + the name
 * (`recovery` -> tests/unit/core/recovery.test.ts, `e2e/ui` -> tests/e2e/ui.test.ts). None is a
 * failure, and so is more than one: an ambiguous short name names its folder (`agent/conversations`).
 *
 * Matching a name (the titles of a file are read with the TypeScript parser: the first argument of
 * every `test`/`it`/`describe` call, `.each`/`.skip`/`.only`/... chains and `test.each` tables
 * included, and the `name:` of the conformance scenarios in the `tests/conformance/` modules it
 * imports): whitespace runs compare as one space; in a title, `%s`/`%d`/`%i`/`%j`/`%o`/`%#`,
 * `$name`/`$name.field` and a template's `${...}` stand for any text; in a name, `<word>`, `%s`,
 * `$name` and an ellipsis (`…` or `...`, with the spaces around it) do. A name matches a title when
 * either, its placeholders as wildcards, matches the other in full (so `"abort flows down: ..."`
 * matches a title that starts so, and `"input -> answer (<mode>)"` the title
 * `` `${scenario} (${mode})` ``; a name cut short without an ellipsis does not match). A
 * `describe › test` path matches when every part matches a title of the file. A name with no closing
 * quote reads on into the next text and fails.
 *
 * Every line a specification list marks asserted names a test (the second check): in
 * `sections-0-4.md` a rule whose first tag is `[A]` or `[NEW]`, in `sections-5-9.md` and
 * `section-7.md` (and `sections-10-11.md`) a rule whose `->` side is not N/A, MISSING, CONTRARY, another issue or in progress.
 * Such a line must hold at least one reference in the formats above, or say `check)`: a type-only
 * rule asserted by `npm run check` (strict tsc). Whether the named test asserts the whole rule is
 * still a reader's work (issue 29's reading notes); this catches a line that names none.
 *
 * Not checked: a file named without a quoted test (`` `tab/images` (4 tests) ``): a backticked word
 * cannot be told from code (`` `docs` ``, `` `close` ``). Excluded: only the lists' headers that
 * describe the format (`file › "name"`); an excluded line says its reason in EXCLUDED below. The
 * extractor and the matcher are tried on planted strings first.
 */
import fs from "node:fs";
import path from "node:path";
import ts from "typescript";
import { describe, expect, test } from "vitest";

const ROOT = path.resolve(import.meta.dirname, "../../..");
const TESTS = path.join(ROOT, "tests");

/** One (file, test name) reference of a coverage list. */
interface Reference {
  /** The coverage file, repository-relative, and the 1-based line where the name starts. */
  readonly list: string;
  readonly line: number;
  /** The file as written (`recovery`, `e2e/ui`, `fork.test.ts`). */
  readonly file: string;
  /** The describe/test path (one part for a plain name); each part's alternative readings. */
  readonly parts: readonly (readonly string[])[];
  /** A bare `word: "text"`: a reference only if the word is the name of a test file. */
  readonly loose?: boolean;
}

/** References not checked, each with the reason: the list (all if absent), a substring of the line the
 * name starts on, and the file as written, whichever are given, must all match. */
const EXCLUDED: readonly {
  readonly list?: string;
  readonly text?: string;
  readonly file?: string;
  readonly reason: string;
}[] = [
  {
    file: "file",
    reason: 'a list\'s header describing the format (`file`: "test name", `file › test`), not a reference',
  },
];

// ---------------------------------------------------------------- extraction

/** The Markdown with each line break and its indentation folded into one space, and the line of each
 * character of the folded text. */
function fold(text: string): { readonly text: string; readonly lines: readonly number[] } {
  let out = "";
  const lines: number[] = [];
  let line = 1;
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (c === "\n") {
      line++;
      let j = i + 1;
      while (text[j] === " " || text[j] === "\t") j++;
      out += " ";
      lines.push(line);
      i = j - 1;
      continue;
    }
    out += c;
    lines.push(line);
  }
  return { text: out, lines };
}

const FILE_WORD = /^[A-Za-z0-9][\w./-]*$/;

/** The end positions (exclusive, after the closing quote) a quoted name at `start` may have. */
function closings(text: string, start: number): number[] {
  const ends: number[] = [];
  for (let i = start + 1; i < text.length && i < start + 600; i++) {
    if (text[i] !== '"') continue;
    const next = text[i + 1];
    if (next === undefined || /[\s,;.)]/.test(next)) ends.push(i + 1);
  }
  return ends;
}

/** After a name ending at `end`: the start of the next name of the same file, if one follows. */
function nextName(text: string, end: number): number | undefined {
  const m =
    /^(?:\s*;\s*(?:also\s+)?|(?:\s*\((?:[^()]|\([^()]*\))*\))?\s*(?:,\s*(?:(?:and|or)\s+)?|(?:and|or)\s+))"/.exec(
      text.slice(end, end + 400),
    );
  return m ? end + m[0].length - 1 : undefined;
}

/** Every reference of one coverage list; a name's readings are its possible closings. */
function extract(list: string, markdown: string): Reference[] {
  const { text, lines } = fold(markdown);
  const refs: Reference[] = [];
  const names = (file: string, prefix: readonly (readonly string[])[], at: number, loose = false) => {
    let start: number | undefined = at;
    while (start !== undefined) {
      const ends = closings(text, start);
      if (ends.length === 0) return;
      const readings = ends.map((e) => text.slice(start! + 1, e - 1));
      refs.push({
        list,
        line: lines[start]!,
        file,
        parts: [...prefix, readings],
        ...(loose ? { loose } : {}),
      });
      start = nextName(text, ends[0]!);
    }
  };
  const seen = new Set<number>();
  // `file › ...` with a path in backticks, or a backticked file followed by `:`/`(`/` › `.
  for (const m of text.matchAll(/`([^`]+)`/g)) {
    const inner = m[1]!;
    const after = m.index + m[0].length;
    if (inner.includes(" › ")) {
      const [file, ...rest] = inner.split(" › ");
      if (!FILE_WORD.test(file!)) continue;
      refs.push({ list, line: lines[m.index]!, file: file!, parts: rest.map((p) => [unquote(p)]) });
      seen.add(m.index);
      continue;
    }
    if (!FILE_WORD.test(inner)) continue;
    const tail = text.slice(after, after + 200);
    const path = /^ › `([^`]+)`/.exec(tail);
    if (path) {
      refs.push({
        list,
        line: lines[m.index]!,
        file: inner,
        parts: path[1]!.split(" › ").map((p) => [unquote(p)]),
      });
      continue;
    }
    const quoted = /^(?::\s*|\s*\(\s*| › )"/.exec(tail);
    if (quoted) names(inner, [], after + quoted[0].length - 1);
  }
  // Bare `file › "name"` (or `file › describe › "name"`), and `x.test ("name")` / `x.test.ts: "name"`.
  for (const m of text.matchAll(/(?<![\w`./-])([A-Za-z0-9][\w./-]*)((?: › [^›"`]+?)*) › "/g)) {
    const prefix = (m[2] ?? "")
      .split(" › ")
      .filter((p) => p !== "")
      .map((p) => [p.trim()]);
    names(m[1]!, prefix, m.index + m[0].length - 1);
  }
  for (const m of text.matchAll(/(?<![\w`./-])([A-Za-z0-9][\w./-]*\.test(?:\.ts)?)(?::\s*|\s*\(\s*)"/g)) {
    names(m[1]!, [], m.index + m[0].length - 1);
  }
  for (const m of text.matchAll(/(?<![\w`./-])([A-Za-z0-9][\w/-]*): "/g)) {
    names(m[1]!, [], m.index + m[0].length - 1, true);
  }
  return refs.sort((a, b) => a.line - b.line);
}

function unquote(part: string): string {
  const p = part.trim();
  return p.length >= 2 && p.startsWith('"') && p.endsWith('"') ? p.slice(1, -1) : p;
}

// ---------------------------------------------------------------- test files and their titles

/** Every `*.test.ts` under `tests/`, relative to it. */
function testFiles(): string[] {
  return (fs.readdirSync(TESTS, { recursive: true }) as string[])
    .map((f) => f.split(path.sep).join("/"))
    .filter((f) => f.endsWith(".test.ts"));
}

/** The one test file a reference names, or why there is none. */
function resolveFile(
  name: string,
  files: readonly string[],
): { readonly file: string } | { readonly error: string; readonly candidates: readonly string[] } {
  const bare = name.replace(/^tests\//, "").replace(/(\.test)?(\.ts)?$/, "");
  const hits = files.filter((f) => {
    const stem = f.replace(/\.test\.ts$/, "");
    return stem === bare || stem.endsWith(`/${bare}`);
  });
  if (hits.length === 1) return { file: hits[0]! };
  if (hits.length === 0) return { error: `no test file ${bare}.test.ts under tests/`, candidates: [] };
  return { error: `ambiguous file name: ${hits.map((h) => `tests/${h}`).join(", ")}`, candidates: hits };
}

const HOLE = "\u0000";
const TEST_CALLEES = new Set(["test", "it", "describe", "suite"]);

/** The name a call's callee chain starts with: `test` for `test.each(rows)` or `describe.skipIf(x)`. */
function calleeRoot(node: ts.Expression): string | undefined {
  if (ts.isIdentifier(node)) return node.text;
  if (ts.isPropertyAccessExpression(node)) return calleeRoot(node.expression);
  if (ts.isCallExpression(node)) return calleeRoot(node.expression);
  if (ts.isTaggedTemplateExpression(node)) return calleeRoot(node.tag);
  return undefined;
}

function literalText(node: ts.Node): string | undefined {
  if (ts.isStringLiteral(node) || ts.isNoSubstitutionTemplateLiteral(node)) return node.text;
  if (ts.isTemplateExpression(node)) {
    return node.head.text + node.templateSpans.map((s) => HOLE + s.literal.text).join("");
  }
  return undefined;
}

/** The titles a test source defines: test/it/describe titles, and scenario `name:`s if asked. */
function titlesOf(source: string, options: { readonly names?: boolean } = {}): string[] {
  const sf = ts.createSourceFile("x.ts", source, ts.ScriptTarget.Latest, true);
  const titles: string[] = [];
  const visit = (node: ts.Node): void => {
    if (ts.isCallExpression(node) && node.arguments.length > 0) {
      const root = calleeRoot(node.expression);
      if (root !== undefined && TEST_CALLEES.has(root)) {
        const title = literalText(node.arguments[0]!);
        if (title !== undefined) titles.push(title);
      }
    }
    if (options.names && ts.isPropertyAssignment(node) && node.name.getText(sf) === "name") {
      const title = literalText(node.initializer);
      if (title !== undefined) titles.push(title);
    }
    ts.forEachChild(node, visit);
  };
  visit(sf);
  return titles;
}

/** The titles of a test file under tests/, with the scenarios of the conformance modules it imports. */
function fileTitles(file: string): string[] {
  const full = path.join(TESTS, file);
  const source = fs.readFileSync(full, "utf8");
  const titles = titlesOf(source);
  const conformance = path.join(TESTS, "conformance");
  for (const m of source.matchAll(/from\s+"(\.[^"]+)"/g)) {
    const target = path.resolve(path.dirname(full), m[1]!);
    if (target.startsWith(conformance + path.sep) && fs.existsSync(target)) {
      titles.push(...titlesOf(fs.readFileSync(target, "utf8"), { names: true }));
    }
  }
  return titles;
}

// ---------------------------------------------------------------- matching

function holes(text: string, kind: "title" | "name"): string {
  const spaced = text.replace(/\s+/g, " ").trim();
  const marked =
    kind === "title"
      ? spaced.replace(/%[sdifjo#%]|\$[A-Za-z_][\w.]*/g, HOLE)
      : spaced.replace(/<[\w -]+>|%[sdifjo#]|\$[A-Za-z_]\w*|\s*(?:…|\.\.\.)\s*/g, HOLE);
  return marked;
}

function pattern(text: string): RegExp {
  const body = text
    .split(HOLE)
    .map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"))
    .join("[\\s\\S]*?");
  return new RegExp(`^${body}$`);
}

/** Whether a name (one part of a reference) matches a title. */
function nameMatches(name: string, title: string): boolean {
  const n = holes(name, "name");
  const t = holes(title, "title");
  return n === t || pattern(t).test(n) || pattern(n).test(t);
}

/** Whether every part of a reference, in one of its readings, matches a title. */
function referenceMatches(parts: readonly (readonly string[])[], titles: readonly string[]): boolean {
  return parts.every((readings) => readings.some((r) => titles.some((t) => nameMatches(r, t))));
}

/** Every reference that does not hold, as `list:line: reference: why`. */
function check(
  refs: readonly Reference[],
  files: readonly string[],
  titlesFor: (file: string) => readonly string[],
): string[] {
  const failures: string[] = [];
  for (const ref of refs) {
    const shown = `${ref.file} › ${ref.parts.map((p) => `"${p[0]}"`).join(" › ")}`;
    const resolved = resolveFile(ref.file, files);
    if (ref.loose && "error" in resolved && resolved.candidates.length === 0) continue;
    if ("error" in resolved) {
      const holding = resolved.candidates.filter((f) => referenceMatches(ref.parts, titlesFor(f)));
      const hint =
        holding.length > 0 ? ` (the name is in ${holding.map((f) => `tests/${f}`).join(", ")})` : "";
      failures.push(`${ref.list}:${ref.line}: ${shown}: ${resolved.error}${hint}`);
      continue;
    }
    if (!referenceMatches(ref.parts, titlesFor(resolved.file))) {
      failures.push(`${ref.list}:${ref.line}: ${shown}: no such test in tests/${resolved.file}`);
    }
  }
  return failures;
}

// ---------------------------------------------------------------- asserted lines name a test

/** The specification lists whose asserted lines must each name a test, and how each marks one. */
const SPEC_LISTS = {
  "tests/spec-coverage/sections-0-4.md": "tags",
  "tests/spec-coverage/sections-5-9.md": "arrow",
  "tests/spec-coverage/section-7.md": "arrow",
  "tests/spec-coverage/sections-10-11.md": "arrow",
} as const;

/** One rule of a list: a `- ` line at the margin with its indented continuation lines. */
interface Rule {
  readonly line: number;
  readonly text: string;
}

function rules(markdown: string): Rule[] {
  const out: Rule[] = [];
  let current: { line: number; text: string } | undefined;
  markdown.split("\n").forEach((l, i) => {
    if (l.startsWith("- ")) {
      if (current) out.push(current);
      current = { line: i + 1, text: l };
    } else if (current && /^\s+\S/.test(l)) current.text += `\n${l}`;
    else if (current) {
      out.push(current);
      current = undefined;
    }
  });
  if (current) out.push(current);
  return out;
}

/** Whether a rule line says it is asserted, by its list's convention. */
function markedAsserted(rule: Rule, style: "tags" | "arrow"): boolean {
  if (style === "tags") {
    const tag = /\[(A|NEW|N\/A|MISSING|CONTRARY|UNASSERTED|I\d+|WIP[^\]]*)\]/.exec(rule.text);
    return tag?.[1] === "A" || tag?.[1] === "NEW";
  }
  const arrow = rule.text.indexOf(" -> ");
  if (arrow < 0) return false;
  const rhs = rule.text.slice(arrow + 4).trimStart();
  return !/^\**(N\/A|MISSING|CONTRARY|issue \d+|in progress)/i.test(rhs);
}

/** Every rule a list marks asserted that names no test (nor says `check)`), as `list:line: rule`. */
function assertedWithoutTest(list: string, markdown: string, style: "tags" | "arrow"): string[] {
  return rules(markdown)
    .filter((r) => markedAsserted(r, style))
    .filter((r) => extract(list, r.text).length === 0 && !r.text.includes("check)"))
    .map((r) => `${list}:${r.line}: ${r.text.split("\n")[0]!.slice(0, 120)}`);
}

// ---------------------------------------------------------------- the tests

describe("the extractor and the matcher", () => {
  const files = [
    "unit/core/recovery.test.ts",
    "unit/agent/fork.test.ts",
    "e2e/ui.test.ts",
    "unit/tab/ui.test.ts",
  ];
  const sources: Record<string, string> = {
    "unit/core/recovery.test.ts": `describe("recovery", () => { test("after a restart, the run goes on", () => {}); });
      test.each([["a"], ["b"]])("%s is stopped with its limit's error", () => {});
      for (const m of modes) test(\`input -> answer (\${m.name})\`, () => {});`,
    "unit/agent/fork.test.ts": `test('written content "": the prompt lives in sections', () => {});`,
  };
  const titlesFor = (f: string) => titlesOf(sources[f] ?? "");
  const run = (md: string) => check(extract("list.md", md), files, titlesFor);

  test("a good reference in each format holds", () => {
    const md = [
      '- rule A [A] recovery › "after a restart, the run goes on"; fork › "written content "": the prompt lives in sections"',
      '- rule B -> `recovery`: "after a restart,',
      '  the run goes on", "%s is stopped with its limit\'s error" (a comment), "input -> answer (<mode>)"',
      "- rule C -> `recovery.test.ts › recovery › after a restart, the run goes on`",
      '- rule D -> recovery.test ("after a restart…"); `tests/unit/core/recovery.test.ts`: "input -> answer (fast)"',
      '| 7 | rule E | asserted | fork: "written content "": the prompt lives in sections"; reason: "prose" |',
    ].join("\n");
    const refs = extract("list.md", md);
    expect(refs.map((r) => [r.line, r.file])).toEqual([
      [1, "recovery"],
      [1, "fork"],
      [2, "recovery"],
      [3, "recovery"],
      [3, "recovery"],
      [4, "recovery.test.ts"],
      [5, "tests/unit/core/recovery.test.ts"],
      [5, "recovery.test"],
      [6, "fork"],
      [6, "reason"],
    ]);
    expect(run(md)).toEqual([]);
  });

  test("a misspelt name, a missing file and an ambiguous short name each fail with their line", () => {
    const md = [
      '- rule A [A] recovery › "after a restart the run goes on"',
      '- rule B -> `restore`: "after a restart, the run goes on"',
      '- rule C -> `ui`: "anything"; `e2e/ui`: "anything"',
      "- rule D -> `recovery.test.ts › recovery › after a crash, the run goes on`",
      '| 7 | rule E | asserted | fork: "written content: the prompt lives in sections" |',
    ].join("\n");
    expect(run(md)).toEqual([
      'list.md:1: recovery › "after a restart the run goes on": no such test in tests/unit/core/recovery.test.ts',
      'list.md:2: restore › "after a restart, the run goes on": no test file restore.test.ts under tests/',
      'list.md:3: ui › "anything": ambiguous file name: tests/e2e/ui.test.ts, tests/unit/tab/ui.test.ts',
      'list.md:3: e2e/ui › "anything": no such test in tests/e2e/ui.test.ts',
      'list.md:4: recovery.test.ts › "recovery" › "after a crash, the run goes on": no such test in tests/unit/core/recovery.test.ts',
      'list.md:5: fork › "written content: the prompt lives in sections": no such test in tests/unit/agent/fork.test.ts',
    ]);
  });
});

describe("asserted lines name a test", () => {
  test("an asserted line without a reference is found, by either convention; N/A, missing and type-only lines are not", () => {
    const tags = [
      '- rule A [A] recovery › "after a restart, the run goes on"',
      "- rule B [NEW] every harness test",
      "- rule C [N/A] not here",
      "- rule D [MISSING] not built",
      "- rule E [A] wrapped over",
      '  two lines: `recovery`: "after a restart, the run goes on"',
    ].join("\n");
    expect(assertedWithoutTest("a.md", tags, "tags")).toEqual(["a.md:2: - rule B [NEW] every harness test"]);
    const arrows = [
      '- rule A -> `recovery`: "after a restart, the run goes on"',
      "- rule B -> see the line above",
      "- rule C -> **N/A** (listed)",
      "- rule D -> MISSING: not built",
      "- rule E -> issue 13",
      "- rule F -> types.ts (check)",
      "- rule G -> details implemented, not asserted",
    ].join("\n");
    expect(assertedWithoutTest("b.md", arrows, "arrow")).toEqual([
      "b.md:2: - rule B -> see the line above",
      "b.md:7: - rule G -> details implemented, not asserted",
    ]);
  });

  test("every line a specification list marks asserted names at least one test", () => {
    const failures = Object.entries(SPEC_LISTS).flatMap(([list, style]) =>
      assertedWithoutTest(list, fs.readFileSync(path.join(ROOT, list), "utf8"), style),
    );
    expect(failures).toEqual([]);
  });
});

describe("the coverage lists", () => {
  const lists = [
    ...fs
      .readdirSync(path.join(TESTS, "spec-coverage"))
      .filter((f) => f.endsWith(".md"))
      .map((f) => `tests/spec-coverage/${f}`),
    "tests/NOT-APPLICABLE.md",
  ].sort();

  test("every test a coverage list names exists", () => {
    const files = testFiles();
    const cache = new Map<string, readonly string[]>();
    const titlesFor = (file: string) => {
      let titles = cache.get(file);
      if (titles === undefined) cache.set(file, (titles = fileTitles(file)));
      return titles;
    };
    const refs: Reference[] = [];
    for (const list of lists) {
      const markdown = fs.readFileSync(path.join(ROOT, list), "utf8");
      const lines = markdown.split("\n");
      for (const ref of extract(list, markdown)) {
        const line = lines[ref.line - 1] ?? "";
        const excluded = EXCLUDED.some(
          (x) =>
            (x.list === undefined || x.list === list) &&
            (x.text === undefined || line.includes(x.text)) &&
            (x.file === undefined || x.file === ref.file),
        );
        if (excluded) continue;
        refs.push(ref);
      }
    }
    const failures = check(refs, files, titlesFor);
    console.log(`spec coverage: ${refs.length} references checked, ${failures.length} unresolved`);
    for (const failure of failures) console.log(failure);
    expect(refs.length).toBeGreaterThan(500);
    expect(failures).toEqual([]);
  });
});
