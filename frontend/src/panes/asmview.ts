/**
 * The kernel's assembly as Compiler Explorer shows it: filtered (asmfilter.ts) with toggles above
 * it (directives, unused labels, comments, constant pools, readable names: all on by default,
 * remembered in this browser), the innermost loops marked, a "go to the innermost loop" link, and
 * the comment gutter on the original line numbers (an anchor names the assembly's own line).
 */
import type { Extension } from "@codemirror/state";
import { commentGutter } from "../commentgutter";
import { codeViewer, lineClasses, type CodeViewer } from "../editor";
import { h } from "../dom";
import { asm } from "../lang/llvmir";
import { commentMarker, DEFAULT_FILTERS, filterAsm, type AsmFilters } from "../asmfilter";

const STORE = "prism.asmFilters";
const LABELS: [keyof AsmFilters, string, string][] = [
  ["directives", "directives", "hide assembler directives (.p2align, .section, .globl, .loc ...)"],
  ["unusedLabels", "unused labels", "hide local labels nothing jumps to or reads"],
  ["comments", "comments", "hide comment lines and trailing comments"],
  ["constantPools", "constant pools", "hide .LCPI constant-pool labels and their data"],
  ["readableNames", "kernel names", "show generated symbols (prism_k_<hash>) by their kernel's name"],
];

/** The assembly filters this browser remembers (all on by default). */
export function loadFilters(): AsmFilters {
  try {
    return { ...DEFAULT_FILTERS, ...(JSON.parse(localStorage.getItem(STORE) ?? "{}") as Partial<AsmFilters>) };
  } catch {
    return { ...DEFAULT_FILTERS };
  }
}

export interface AsmView {
  viewer: CodeViewer;
  /** For each shown line (index 0 = line 1), its 1-based line in the original text. */
  origin: readonly number[];
  /** The shown line of an original 1-based line (null when filtered out), for comment counts. */
  shownLine(original: number): number | null;
}

/**
 * Renders into `host` (after a toolbar appended to `bar`); `onComment(line, text)` gets the
 * original line number and text. `rerender` is called when a toggle changes.
 */
export function asmView(host: HTMLElement, bar: HTMLElement, text: string, opts: {
  target: string; symbols: Record<string, string>; counts: ReadonlyMap<number, number>;
  onComment?: (line: number, text: string) => void; rerender: () => void; extensions?: Extension[];
}): AsmView {
  const filters = loadFilters();
  const f = filterAsm(text, filters, commentMarker(opts.target), opts.symbols);
  const original = text.replace(/\n$/, "").split("\n");
  const shown = new Map(f.origin.map((o, i) => [o, i + 1]));
  const classes = new Map<number, string>();
  for (const lp of f.loops) for (let l = lp.start; l <= lp.end; l++) if (lp.innermost || !classes.has(l)) classes.set(l, lp.innermost ? "asm-hot-loop" : "asm-loop");
  const hot = f.loops.filter((l) => l.innermost);
  const toggles = LABELS.map(([key, label, title]) => {
    const box = h("input", { type: "checkbox", checked: filters[key], dataset: { filter: key } });
    box.addEventListener("change", () => {
      localStorage.setItem(STORE, JSON.stringify({ ...filters, [key]: box.checked }));
      opts.rerender();
    });
    return h("label", { class: "asm-filter", title }, box, ` ${label}`);
  });
  const hiddenTotal = original.length - f.origin.length;  // every line not shown, blank lines included
  const goto = hot.length ? h("a", { class: "asm-goto-loop", href: "#", title: "innermost loop: the code that runs most" }, `innermost loop${hot.length > 1 ? `s (${hot.length})` : ""}: lines ${hot.map((l) => `${l.start}–${l.end}`).join(", ")}`) : null;
  bar.append(h("div", { class: "asm-toolbar" }, h("span", { class: "muted" }, "Filter: "), ...toggles,
    h("span", { class: "muted asm-count" }, ` · ${f.origin.length} of ${original.length} lines shown${hiddenTotal ? ` (${hiddenTotal} hidden)` : ""}`),
    goto ? " · " : "", goto));
  const counts = new Map<number, number>();
  for (const [line, n] of opts.counts) {
    const s = shown.get(line);
    if (s !== undefined) counts.set(s, n);
  }
  const extra = [lineClasses(classes), ...(opts.extensions ?? [])];
  if (opts.onComment) {
    const cb = opts.onComment;
    extra.push(commentGutter(counts, (line) => cb(f.origin[line - 1], original[f.origin[line - 1] - 1] ?? "")));
  }
  const viewer = codeViewer(host, f.text, asm, undefined, extra);
  goto?.addEventListener("click", (e) => {
    e.preventDefault();
    viewer.markLine(hot[0].start);
  });
  return { viewer, origin: f.origin, shownLine: (o) => shown.get(o) ?? null };
}
