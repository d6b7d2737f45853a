/**
 * A PDF's text, extracted in the tab with pdf.js (`pdfjs-dist`). Loaded on demand only
 * (attachments.ts imports it dynamically when a PDF is attached), so neither pdf.js nor its worker
 * is part of the tab's initial JavaScript. Invariants: pdf.js runs in its own worker from this
 * origin (the CSP's `worker-src 'self'`; the CSP also forbids `eval`, so no font program of the
 * file is ever compiled to code), installs no font faces, and is given the bytes, never a URL; pages are read in order, each
 * page's text separated from the next by a blank line; the document is destroyed after reading.
 */

import { GlobalWorkerOptions, getDocument } from "pdfjs-dist";
import workerUrl from "pdfjs-dist/build/pdf.worker.min.mjs?url";

GlobalWorkerOptions.workerSrc = workerUrl;

/** The text of every page of the PDF in `data`, and how many pages it has. */
export async function pdfText(data: Uint8Array): Promise<{ text: string; pages: number }> {
  const task = getDocument({ data, disableFontFace: true, useSystemFonts: false });
  const doc = await task.promise;
  try {
    const pages: string[] = [];
    for (let n = 1; n <= doc.numPages; n++) {
      const page = await doc.getPage(n);
      const content = await page.getTextContent();
      let text = "";
      for (const item of content.items) {
        if (!("str" in item)) continue;
        text += item.str;
        if (item.hasEOL) text += "\n";
      }
      pages.push(text.trim());
      page.cleanup();
    }
    return { text: pages.join("\n\n"), pages: doc.numPages };
  } finally {
    await task.destroy();
  }
}
