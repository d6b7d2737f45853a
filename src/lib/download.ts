/** Save `text` as a file the person downloads (a Blob URL on a temporary link). */
export function downloadText(fileName: string, text: string, type = "application/json"): void {
  downloadBlob(fileName, new Blob([text], { type }));
}

/** Save `bytes` as a file the person downloads. */
export function downloadBytes(fileName: string, bytes: Uint8Array, type = "application/octet-stream"): void {
  downloadBlob(fileName, new Blob([bytes as Uint8Array<ArrayBuffer>], { type }));
}

/** A size in words: 12 B, 3.4 KB, 1.2 MB. */
export function formatBytes(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KB`;
  return `${(bytes / 1024 / 1024).toFixed(1)} MB`;
}

/** The download itself: a Blob URL on a temporary link, revoked a little after the click. */
function downloadBlob(fileName: string, blob: Blob): void {
  const url = URL.createObjectURL(blob);
  const a = document.createElement("a");
  a.href = url;
  a.download = fileName;
  a.rel = "noopener";
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}
