/**
 * Images in the transcript (src/lib/images.ts): raster data shows as a data URL; SVG, HTML, unknown
 * types and damaged base64 are described in words and never become a URL.
 */
import { describe, expect, test } from "vitest";
import { showImage } from "../../../src/lib/images.ts";

// A 1x1 transparent PNG.
const PIXEL = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII=";

describe("showImage", () => {
  test("a PNG shows as a data URL of its own type and data, with its size in words", () => {
    const shown = showImage({ data: PIXEL, mimeType: "image/png" });
    expect(shown).toEqual({
      shown: true,
      src: `data:image/png;base64,${PIXEL}`,
      label: "Image (png, 68 bytes)",
    });
  });

  test("whitespace in the base64 (wrapped lines) is dropped, and the type is read in any case", () => {
    const wrapped = `${PIXEL.slice(0, 40)}\n${PIXEL.slice(40)}`;
    const shown = showImage({ data: wrapped, mimeType: " IMAGE/PNG " });
    expect(shown.shown && shown.src).toBe(`data:image/png;base64,${PIXEL}`);
  });

  test("SVG, HTML and types that are not images are refused in words, never as a URL", () => {
    for (const mimeType of ["image/svg+xml", "text/html", "application/javascript", ""]) {
      const shown = showImage({ data: PIXEL, mimeType });
      expect(shown.shown).toBe(false);
      expect(JSON.stringify(shown)).not.toContain("data:");
      expect(shown.label).toMatch(/not shown/);
    }
  });

  test("data that is not plain base64 cannot smuggle anything into the URL", () => {
    for (const data of ["", "abc", `${PIXEL}"onerror="x`, "AAAA);background:url(x", "AA==AA=="]) {
      const shown = showImage({ data, mimeType: "image/png" });
      expect(shown).toEqual({ shown: false, label: "An image (png) whose data is damaged, not shown" });
    }
  });
});
