/**
 * The transcript as one stop in the Tab order (a roving focus over its entries). Every rendered
 * entry (a child of the list element) can take the focus by script; only the current entry (the one
 * that has, or last had, the focus) keeps its controls (Copy, Edit, Fork, a code block's Copy,
 * links, disclosures, scrollable blocks) in the Tab order, the other entries' controls are taken out
 * of it (tabindex=-1: still clickable). So Tab and Shift+Tab cross the transcript in a bounded number
 * of stops however many messages are rendered; Arrow Up and Down (`step`) move the focus from entry
 * to entry, and Tab from a focused entry enters its controls.
 * Invariants: only what this module changed is ever put back (each such element carries its former
 * tabindex in `data-roved`); the entries themselves stay focusable (tabindex=-1) and out of the Tab
 * order; entries rendered later (the window moving, a message committed) are handled as they come.
 */

/** What takes part in the Tab order of its own (or scrolls, which Chromium makes a Tab stop). */
const CONTROLS =
  'a[href], button, input, select, textarea, summary, iframe, [contenteditable], [tabindex]:not([tabindex="-1"]), pre, table, .text';
const ROVED = "data-roved";

/** Take `el`'s controls (and `el`, if it is one) out of the Tab order, remembering their tabindex. */
function takeOut(el: Element): void {
  const all = el.matches(CONTROLS) ? [el, ...el.querySelectorAll(CONTROLS)] : el.querySelectorAll(CONTROLS);
  for (const c of all) {
    if (c.hasAttribute(ROVED)) continue;
    c.setAttribute(ROVED, c.getAttribute("tabindex") ?? "");
    c.setAttribute("tabindex", "-1");
  }
}

/** Put back what `takeOut` changed inside `entry`. */
function putBack(entry: Element): void {
  for (const c of entry.querySelectorAll(`[${ROVED}]`)) {
    const former = c.getAttribute(ROVED) ?? "";
    c.removeAttribute(ROVED);
    if (former === "") c.removeAttribute("tabindex");
    else c.setAttribute("tabindex", former);
  }
}

/** The entry (a child of `list`) that contains `node`, if any. */
export function entryOf(list: HTMLElement, node: Node | null): HTMLElement | undefined {
  let n: Node | null = node;
  while (n && n.parentNode !== list) n = n.parentNode;
  return n instanceof HTMLElement ? n : undefined;
}

/**
 * Keep `list`'s entries in a roving focus until the returned function is called (which puts every
 * control back as it was).
 */
export function roveEntries(list: HTMLElement): () => void {
  let current: HTMLElement | undefined;
  const prepare = (entry: Element) => {
    if (!entry.hasAttribute("tabindex")) entry.setAttribute("tabindex", "-1");
    if (entry !== current) takeOut(entry);
  };
  for (const entry of list.children) prepare(entry);

  const observer = new MutationObserver((records) => {
    for (const record of records)
      for (const node of record.addedNodes) {
        if (!(node instanceof Element)) continue;
        if (node.parentNode === list) prepare(node);
        else if (entryOf(list, node) !== current) takeOut(node);
      }
  });
  observer.observe(list, { childList: true, subtree: true });

  const focusIn = (event: FocusEvent) => {
    const entry = entryOf(list, event.target as Node);
    if (!entry || entry === current) return;
    if (current) takeOut(current);
    current = entry;
    putBack(entry);
  };
  list.addEventListener("focusin", focusIn);

  return () => {
    observer.disconnect();
    list.removeEventListener("focusin", focusIn);
    for (const entry of list.children) putBack(entry);
  };
}

/**
 * The entry Arrow Up (`-1`) or Down (`1`) moves the focus to from `from`: the one before or after
 * the entry that holds it; from the scroller itself (`from` outside the list), the lowest entry in
 * view going up, the highest going down. Undefined at either end of what is rendered (the keys then
 * scroll as usual, and the window renders more).
 */
export function step(
  list: HTMLElement,
  view: HTMLElement,
  from: Node,
  direction: -1 | 1,
): HTMLElement | undefined {
  const entry = entryOf(list, from);
  if (entry) {
    const next = direction < 0 ? entry.previousElementSibling : entry.nextElementSibling;
    return next instanceof HTMLElement ? next : undefined;
  }
  const { top, bottom } = view.getBoundingClientRect();
  const inView = [...list.children].filter((e): e is HTMLElement => {
    const r = e.getBoundingClientRect();
    return e instanceof HTMLElement && r.bottom > top && r.top < bottom && r.height > 0;
  });
  return direction < 0 ? inView.at(-1) : inView[0];
}
