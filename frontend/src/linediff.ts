/**
 * The diff the side-by-side view draws (@codemirror/merge's `DiffConfig.override`): lines paired
 * first, by Myers' line diff (irdiff.ts) of their text without leading whitespace, so that a line
 * only re-indented (a node moved into a fused group's body by fuse-ops) stays an unchanged line,
 * drawn level with itself on both sides, and the changed runs between such lines are short; then,
 * inside each changed run, the package's own character diff, so changed words are marked (runs
 * longer than WORD_DIFF_MAX_CHARS are marked as whole lines: a 160 kB LLVM IR against its optimized
 * form took two minutes of the page's main thread).
 */
import { Change, diff } from "@codemirror/merge";
import { diffLines } from "./irdiff";

/** Changed runs longer than this (both sides, in characters) get no word-level marks. */
export const WORD_DIFF_MAX_CHARS = 8000;

export function lineAlignedDiff(a: string, b: string): Change[] {
  const la = a.split("\n");
  const lb = b.split("\n");
  // the start of each line, and one past the last (past the end when the text has no final newline)
  const offsets = (lines: string[]) => {
    const out = [0];
    for (const l of lines) out.push(out[out.length - 1] + l.length + 1);
    return out;
  };
  const oa = offsets(la);
  const ob = offsets(lb);
  const ops = diffLines(la.map((l) => l.trimStart()).join("\n"), lb.map((l) => l.trimStart()).join("\n"));
  const out: Change[] = [];
  let i = 0;
  let j = 0;
  let run: [number, number] | null = null;
  const close = () => {
    if (!run) return;
    const [i0, j0] = run;
    run = null;
    // A run that ends both texts starts at the newline before it, so that lines added or removed
    // at the end bring their own newline (the last line of a text may have none).
    const back = i === la.length && j === lb.length && i0 > 0 && j0 > 0 ? 1 : 0;
    const fromA = Math.min(a.length, oa[i0] - back);
    const fromB = Math.min(b.length, ob[j0] - back);
    const sa = a.slice(fromA, Math.min(a.length, oa[i]));
    const sb = b.slice(fromB, Math.min(b.length, ob[j]));
    if (sa.length + sb.length > WORD_DIFF_MAX_CHARS) {
      // A long changed run (LLVM IR against its optimized form is nearly one): marked as changed
      // lines, without words; the character diff's cost grows with the product of the lengths.
      out.push(new Change(fromA, fromA + sa.length, fromB, fromB + sb.length));
      return;
    }
    for (const c of diff(sa, sb)) out.push(new Change(c.fromA + fromA, c.toA + fromA, c.fromB + fromB, c.toB + fromB));
  };
  for (const op of ops) {
    if (op.op === "same") {
      close();
      i++;
      j++;
      continue;
    }
    run ??= [i, j];
    if (op.op === "del") i++;
    else j++;
  }
  if (i < la.length || j < lb.length) {
    run ??= [i, j];
    i = la.length;
    j = lb.length;
  }
  close();
  return out;
}
