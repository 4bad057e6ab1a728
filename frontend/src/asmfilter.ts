/**
 * Assembly as Compiler Explorer shows it (its "Filter" menu, lib/asm-parser.ts): LLVM's assembly
 * text with directives, labels nothing refers to, comments and constant pools (`.LCPI…`) left out,
 * the kernels' generated symbols (`prism_k_<hash>`) shown by their kernel names, and loops found
 * from backward branches, the innermost ones marked. Pure: the kernels pane renders the result.
 *
 * Line kinds (GNU as syntax): a label `name:`; a directive `.name …` (not a label); a comment line
 * (`#` on x86-64 and RISC-V, `//` on AArch64, where `#` starts an immediate); else an instruction.
 * A label is used when an instruction (or a kept directive) names it; only local labels (`.L…`)
 * are ever dropped as unused, so function entry points stay. A constant pool is a `.LCPI…` label
 * and the data directives after it.
 */

export interface AsmFilters {
  directives: boolean;
  unusedLabels: boolean;
  comments: boolean;
  constantPools: boolean;
  /** Show `prism_k_<hash>` by the kernel's name. */
  readableNames: boolean;
}

export const DEFAULT_FILTERS: AsmFilters = { directives: true, unusedLabels: true, comments: true, constantPools: true, readableNames: true };

export interface AsmLoop {
  /** 1-based lines of the shown text: the loop's label and its backward branch. */
  start: number;
  end: number;
  innermost: boolean;
}

export interface FilteredAsm {
  text: string;
  /** For each shown line (index 0 = line 1), its 1-based line in the original text. */
  origin: number[];
  loops: AsmLoop[];
  /** Lines left out by each filter. */
  hidden: Record<"directives" | "unusedLabels" | "comments" | "constantPools", number>;
}

const LABEL = /^([.\w$@]+):/;
const DIRECTIVE = /^\s*\.[A-Za-z_]/;
const DATA = /^\s*\.(byte|short|word|long|quad|int|float|double|zero|space|ascii|asciz|string|value|octa|p2align|align)\b/;
const BRANCH = /^\s*(j[a-z]*|b(?:\.[a-z]+)?|b[a-z]{1,4}|cbn?z|tbn?z)\s/i;

/** The comment marker of a target's assembly: `//` for AArch64, `#` otherwise. */
export function commentMarker(target: string): string {
  return /aarch64|arm64/i.test(target) ? "//" : "#";
}

function stripComment(line: string, marker: string): string {
  const at = line.indexOf(marker);
  return at < 0 ? line : line.slice(0, at).replace(/\s+$/, "");
}

/** Filters `asm` (see the module docstring); `symbols` maps generated symbols to kernel names. */
export function filterAsm(asm: string, filters: AsmFilters, marker = "#", symbols: Record<string, string> = {}): FilteredAsm {
  const lines = asm.replace(/\n$/, "").split("\n");
  const isComment = (l: string) => l.trimStart().startsWith(marker);
  const label = (l: string) => LABEL.exec(l)?.[1] ?? null;
  const kind = lines.map((l) => (label(l) ? "label" : isComment(l) ? "comment" : DIRECTIVE.test(l) ? "directive" : l.trim() ? "insn" : "blank"));
  // constant pools: a .LCPI label and the data directives after it
  const pool = new Array<boolean>(lines.length).fill(false);
  for (let i = 0; i < lines.length; i++) {
    if (kind[i] !== "label" || !/^\.?LCPI/.test(label(lines[i]) ?? "")) continue;
    pool[i] = true;
    for (let j = i + 1; j < lines.length && (kind[j] === "directive" && DATA.test(lines[j]) || kind[j] === "comment"); j++) pool[j] = true;
  }
  const hidden = { directives: 0, unusedLabels: 0, comments: 0, constantPools: 0 };
  const keep = lines.map((_, i) => {
    if (filters.constantPools && pool[i]) return (hidden.constantPools++, false);
    if (filters.comments && kind[i] === "comment") return (hidden.comments++, false);
    if (filters.directives && kind[i] === "directive") return (hidden.directives++, false);
    return kind[i] !== "blank" || !filters.directives;
  });
  const words = new Set<string>();
  lines.forEach((l, i) => {
    if (!keep[i] || kind[i] === "label" || kind[i] === "comment") return;
    for (const w of stripComment(l, marker).matchAll(/[.\w$@]+/g)) words.add(w[0]);
  });
  lines.forEach((l, i) => {
    const name = kind[i] === "label" ? label(l) : null;
    if (keep[i] && filters.unusedLabels && name && name.startsWith(".L") && !words.has(name)) {
      keep[i] = false;
      hidden.unusedLabels++;
    }
  });
  const origin: number[] = [];
  const shown: string[] = [];
  const rename = Object.entries(symbols);
  lines.forEach((l, i) => {
    if (!keep[i]) return;
    let t = filters.comments && kind[i] !== "comment" ? stripComment(l, marker) : l;
    if (filters.readableNames) for (const [sym, name] of rename) t = t.split(sym).join(name);
    origin.push(i + 1);
    shown.push(t);
  });
  return { text: shown.join("\n"), origin, loops: findLoops(shown), hidden };
}

/** Loops from backward branches: a branch to a label above it closes the loop that label opens. */
export function findLoops(lines: string[]): AsmLoop[] {
  const at = new Map<string, number>();
  lines.forEach((l, i) => {
    const name = LABEL.exec(l)?.[1];
    if (name) at.set(name, i + 1);
  });
  const loops: AsmLoop[] = [];
  lines.forEach((l, i) => {
    if (!BRANCH.test(l)) return;
    const target = [...l.matchAll(/\.L[\w$.]+/g)].map((m) => m[0]).pop();
    const start = target ? at.get(target) : undefined;
    if (start !== undefined && start <= i + 1) loops.push({ start, end: i + 1, innermost: false });
  });
  for (const lp of loops) lp.innermost = !loops.some((o) => o !== lp && o.start >= lp.start && o.end <= lp.end && (o.start > lp.start || o.end < lp.end));
  return loops;
}
