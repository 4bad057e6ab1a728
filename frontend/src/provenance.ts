/**
 * Provenance line by line (issue 15 item 2), the pure part: which lines of a kernel's loop IR,
 * LLVM IR and assembly belong together. `kernel.compiled` carries, per line of each text, the
 * loop-IR line its debug location names (`asm_loop_lines`, `llvm_ir_loop_lines`,
 * `llvm_ir_optimized_loop_lines`: 1-based; 0 none; -N for assembly LLVM left at DWARF line 0,
 * attributed to the next located line N); `kernel.lowered.nodes` names the kernel's ONNX nodes.
 * A selected line in any of the texts resolves to one loop-IR line; the related lines of each text
 * are those mapped to it (as Compiler Explorer colours source and assembly together).
 */
import type { KernelState } from "./state";

export type ProvText = "loop" | "llvm" | "opt" | "asm";

/** The per-line map of `text` (null for the loop IR itself, whose lines map to themselves). */
export function lineMap(k: KernelState | undefined, text: ProvText): readonly number[] | null {
  const c = k?.compiled;
  if (text === "llvm") return c?.llvm_ir_loop_lines ?? [];
  if (text === "opt") return c?.llvm_ir_optimized_loop_lines ?? [];
  if (text === "asm") return c?.asm_loop_lines ?? [];
  return null;
}

/** The loop-IR line of 1-based `line` of a text with per-line `map` (null map: the loop IR). */
export function loopLineOf(map: readonly number[] | null, line: number): number | null {
  if (map === null) return line >= 1 ? line : null;
  const m = Math.abs(map[line - 1] ?? 0);
  return m > 0 ? m : null;
}

/**
 * The 1-based lines of a text (per-line `map`; null: the loop IR) that belong to loop-IR line
 * `loopLine`; `shown` (index 0 = shown line 1 -> its original 1-based line, the assembly filter's
 * `origin`) turns them into shown lines, dropping those filtered out.
 */
export function relatedLines(map: readonly number[] | null, loopLine: number, shown?: readonly number[]): number[] {
  const hit = (orig: number) => (map === null ? orig === loopLine : Math.abs(map[orig - 1] ?? 0) === loopLine);
  if (shown) return shown.flatMap((orig, i) => (hit(orig) ? [i + 1] : []));
  if (map === null) return [loopLine];
  return map.flatMap((m, i) => (Math.abs(m) === loopLine ? [i + 1] : []));
}

/** One line of text saying what a loop-IR line is and where it came from. */
export function describe(k: KernelState | undefined, loopLine: number): string {
  const text = k?.lowered?.loop_ir.split("\n")[loopLine - 1]?.trim() ?? "";
  const nodes = k?.lowered?.nodes ?? [];
  return `loop IR line ${loopLine}${text ? `: ${text.length > 60 ? `${text.slice(0, 60)}…` : text}` : ""}` +
    (nodes.length ? ` · ONNX ${nodes.length > 1 ? "nodes" : "node"} ${nodes.join(", ")}` : "");
}
