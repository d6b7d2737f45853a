/**
 * The tab's pure rendering helpers: markdown.ts (untrusted model text to HTML, before DOMPurify) and
 * tools.ts (a tool call's status in words, its arguments, its result without the harness block).
 */
import { describe, expect, test } from "vitest";
import { markdownToHtml, safeUrl } from "../../../src/lib/markdown.ts";
import { diagnosticsOf, formatArgs, toolStatus, withoutHarness } from "../../../src/lib/tools.ts";

describe("markdownToHtml", () => {
  test("markdown and code blocks become elements", () => {
    const html = markdownToHtml("# Title\n\n**bold** and `code`\n\n```ts\nconst x = 1 < 2;\n```\n");
    expect(html).toContain("<h1>Title</h1>");
    expect(html).toContain("<strong>bold</strong>");
    expect(html).toContain("<code>code</code>");
    expect(html).toMatch(/<pre><code class="language-ts">const x = 1 &lt; 2;\n<\/code><\/pre>/);
  });

  test("raw HTML in the text is escaped, never parsed", () => {
    const html = markdownToHtml(
      'hi <img src=x onerror="alert(1)"> <script>alert(2)</script>\n\n<div onclick=x>block</div>',
    );
    expect(html).not.toMatch(/<img|<script|<div/i);
    expect(html).toContain("&#60;img src=x onerror=&#34;alert(1)&#34;&#62;");
    expect(html).toContain("&#60;script&#62;");
  });

  test("text after an inline <script>, <pre>, <code> or <kbd> tag is escaped too (marked passes it raw)", () => {
    for (const tag of ["script", "pre", "code", "kbd"]) {
      const html = markdownToHtml(`--><${tag}><svg/onload=alert(1)> <b onclick=x>`);
      expect(html, tag).not.toMatch(/<svg|<b\b/i);
      expect(html, tag).toContain("svg/onload=alert(1)");
    }
  });

  test("a javascript: (or data:, vbscript:) link keeps only its text; http links open safely", () => {
    for (const href of [
      "javascript:alert(1)",
      "JavaScript:alert(1)",
      "java\tscript:alert(1)",
      "data:text/html,x",
      "vbscript:x",
    ]) {
      const html = markdownToHtml(`[click](${href.replace("\t", "%09")}) <${href}>`);
      expect(html, href).not.toMatch(/<a\b|href=/i);
      expect(html, href).toContain("click");
    }
    expect(markdownToHtml("[site](https://example.com)")).toContain(
      '<a href="https://example.com" rel="noopener noreferrer nofollow" target="_blank">site</a>',
    );
  });

  test("images never load: they become links to their source, or text for an unsafe one", () => {
    expect(markdownToHtml("![a cat](https://example.com/cat.png)")).not.toContain("<img");
    expect(markdownToHtml("![a cat](javascript:x)")).toBe("<p>a cat</p>\n");
  });

  test("safeUrl accepts http(s), mailto and relative URLs only", () => {
    expect(safeUrl("https://a.b/c")).toBe("https://a.b/c");
    expect(safeUrl("mailto:a@b.c")).toBe("mailto:a@b.c");
    expect(safeUrl("notes/note-1.md")).toBe("notes/note-1.md");
    expect(safeUrl(" javascript:x")).toBeUndefined();
    expect(safeUrl("java\nscript:x")).toBeUndefined();
  });
});

describe("tool calls in words", () => {
  test("the status comes from the result's diagnostics, else from the live slot", () => {
    const aborted = [{ severity: "error", code: "aborted", message: "the tool call was aborted" }];
    expect(toolStatus({ isError: true, diagnostics: aborted }, undefined)).toBe("aborted");
    expect(
      toolStatus(
        { isError: true, diagnostics: [{ severity: "error", code: "interrupted", message: "x" }] },
        undefined,
      ),
    ).toBe("interrupted");
    expect(toolStatus({ isError: true, diagnostics: [] }, undefined)).toBe("failed");
    expect(toolStatus({ isError: false, diagnostics: [] }, { status: "running" })).toBe("done");
    expect(toolStatus(undefined, { status: "pending" })).toBe("queued");
    expect(toolStatus(undefined, { status: "running" })).toBe("running");
    expect(toolStatus(undefined, { status: "done" })).toBe("running");
    expect(toolStatus(undefined, undefined)).toBe("queued");
    expect(toolStatus(undefined, undefined, { runLive: false })).toBe("interrupted");
    // A conversation that moved to another home: an unfinished call went on there.
    expect(toolStatus(undefined, undefined, { runLive: false, moved: true })).toBe("moved");
    expect(toolStatus({ isError: false, diagnostics: [] }, undefined, { runLive: false, moved: true })).toBe(
      "done",
    );
  });

  test("the harness block is cut from a result's text; diagnostics are read from entry data", () => {
    expect(withoutHarness("output\n<harness>\n[error] the tool call was aborted\n</harness>")).toBe("output");
    expect(withoutHarness("<harness>\n[warn] x\n</harness>")).toBe("");
    expect(diagnosticsOf({ diagnostics: [{ severity: "warn", message: "m" }, 3] })).toEqual([
      { severity: "warn", message: "m" },
    ]);
    expect(diagnosticsOf(undefined)).toEqual([]);
  });

  test("arguments show strings as written and other values as indented JSON", () => {
    expect(formatArgs({ path: "a.md", content: "line 1\nline 2", n: { x: 1 } })).toEqual([
      { name: "path", value: "a.md" },
      { name: "content", value: "line 1\nline 2" },
      { name: "n", value: '{\n  "x": 1\n}' },
    ]);
    expect(formatArgs(undefined)).toEqual([]);
  });
});
