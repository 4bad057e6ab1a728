/**
 * Provenance line by line (issue 15 item 2), the pure part: which lines of a kernel's loop IR,
 * LLVM IR and assembly belong together. `kernel.compiled` carries, per line of each text, the
 * loop-IR line its debug location names (`asm_loop_lines`, `llvm_ir_loop_lines`,
 * `llvm_ir_optimized_loop_lines`: 1-based; 0 none; -N for assembly LLVM left at DWARF line 0,
 * attributed to the next located line N); `kernel.lowered.nodes` names the kernel's ONNX nodes and
 * `kernel.lowered.line_nodes` which of them each loop-IR line's statement computes.
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

/**
 * The ONNX nodes loop-IR line `loopLine` computes: its entry of `kernel.lowered.line_nodes` (a Conv's
 * accumulation: the Conv; its epilogue store: the Conv and the fused Add, Relu); for a kernel whose
 * event predates that map, every node of the kernel on each statement line and on the origin line.
 */
export function nodesOfLine(k: KernelState | undefined, loopLine: number): string[] {
  const low = k?.lowered;
  if (!low) return [];
  const nodes = low.nodes ?? [];
  if (low.line_nodes) return (low.line_nodes[loopLine - 1] ?? []).flatMap((i) => (nodes[i] !== undefined ? [nodes[i]] : []));
  const ofKernel = loopLine === originLine(low.loop_ir) || statementLines(low.loop_ir).includes(loopLine);
  return ofKernel ? [...nodes] : [];
}

/** The 1-based loop-IR lines whose statements compute ONNX node `node` (see {@link nodesOfLine}). */
export function linesOfNode(k: KernelState | undefined, node: string): number[] {
  const low = k?.lowered;
  if (!low || !(low.nodes ?? []).includes(node)) return [];
  if (!low.line_nodes) return statementLines(low.loop_ir);
  return low.line_nodes.flatMap((_, i) => (nodesOfLine(k, i + 1).includes(node) ? [i + 1] : []));
}

/** One line of text saying what a loop-IR line is and where it came from. */
export function describe(k: KernelState | undefined, loopLine: number): string {
  const text = k?.lowered?.loop_ir.split("\n")[loopLine - 1]?.trim() ?? "";
  const nodes = k?.lowered?.line_nodes ? nodesOfLine(k, loopLine) : k?.lowered?.nodes ?? [];
  return `loop IR line ${loopLine}${text ? `: ${text.length > 60 ? `${text.slice(0, 60)}…` : text}` : ""}` +
    (nodes.length ? ` · ONNX ${nodes.length > 1 ? "nodes" : "node"} ${nodes.join(", ")}` : "");
}

/**
 * What is selected (hovered or clicked) in a kernel's code: one loop-IR line, or one of the kernel's
 * ONNX nodes (the node strip, or `?node=` from the graph's "show code").
 */
export type ProvSelection = { loopLine: number } | { node: string };

const ORIGIN = "# origin: ";

/** The 1-based lines of a kernel's loop IR that are statements (the body after `def …:`, comments aside). */
export function statementLines(loopIr: string): number[] {
  const lines = loopIr.split("\n");
  const def = lines.findIndex((l) => l.startsWith("def "));
  if (def < 0) return [];
  return lines.flatMap((l, i) => (i > def && l.trim() !== "" && !l.trim().startsWith("#") ? [i + 1] : []));
}

/** The 1-based line of the loop IR's `# origin:` comment (the kernel's ONNX nodes), or null. */
export function originLine(loopIr: string): number | null {
  const i = loopIr.split("\n").findIndex((l) => l.trim().startsWith(ORIGIN));
  return i < 0 ? null : i + 1;
}

/** The lines of every text, and the ONNX nodes, that a selection relates to (1-based; asm as shown). */
export interface Related {
  loop: number[];
  llvm: number[];
  opt: number[];
  asm: number[];
  nodes: string[];
}

function mapped(map: readonly number[], keep: (loopLine: number) => boolean, shown?: readonly number[]): number[] {
  const hit = (orig: number) => {
    const m = Math.abs(map[orig - 1] ?? 0);
    return m > 0 && keep(m);
  };
  if (shown) return shown.flatMap((orig, i) => (hit(orig) ? [i + 1] : []));
  return map.flatMap((_, i) => (hit(i + 1) ? [i + 1] : []));
}

/**
 * The related lines of each of the kernel's texts for `sel`; `asmShown` is the assembly filter's
 * `origin` (shown line -> original line), so assembly lines come back as shown lines.
 *
 * A statement relates to the ONNX nodes it computes ({@link nodesOfLine}); a node to the kernel's
 * `# origin:` line, the statements that compute it ({@link linesOfNode}) and the code generated from
 * them. A node the kernel does not compute relates to nothing.
 */
export function related(k: KernelState | undefined, sel: ProvSelection | null, asmShown?: readonly number[]): Related {
  const none: Related = { loop: [], llvm: [], opt: [], asm: [], nodes: [] };
  const loopIr = k?.lowered?.loop_ir ?? "";
  const nodes = k?.lowered?.nodes ?? [];
  if (sel === null) return none;
  if ("node" in sel) {
    if (!nodes.includes(sel.node)) return none;
    const stmts = linesOfNode(k, sel.node);
    const set = new Set(stmts);
    const origin = originLine(loopIr);
    const keep = (m: number) => set.has(m);
    return {
      loop: origin === null ? stmts : [origin, ...stmts],
      llvm: mapped(lineMap(k, "llvm") ?? [], keep), opt: mapped(lineMap(k, "opt") ?? [], keep),
      asm: mapped(lineMap(k, "asm") ?? [], keep, asmShown), nodes: [sel.node],
    };
  }
  const n = sel.loopLine;
  const lineNodes = n === originLine(loopIr) ? [...nodes] : nodesOfLine(k, n);
  return {
    loop: [n],
    llvm: relatedLines(lineMap(k, "llvm"), n), opt: relatedLines(lineMap(k, "opt"), n),
    asm: relatedLines(lineMap(k, "asm"), n, asmShown), nodes: lineNodes,
  };
}

/**
 * Texts whose lines are ONNX nodes rather than code: `onnx`, the model as `onnx.printer` writes it (the
 * first ONNX-level pass's IR: a node line starts `[name] out = Op ...`), and `graph`, the graph IR after
 * the last pass (a node line ends `// name`, compiler/ir/printer.py).
 */
export type NodeText = "onnx" | "graph";

const ONNX_NODE = /^\s*\[([^\]]+)\]\s/;
const GRAPH_NODE = /\s\/\/ (\S.*?)\s*$/;
const GRAPH_OUT = /^\s*%([^\s,=]+)[^=]* = (?!constant\b)/;

/** The node a line names: onnx `[name]`; graph `// name`, else (a node named as its first output, which
 * the printer leaves unsaid) that output; a fused group's own line names none. */
function nodeOf(kind: NodeText, l: string): string | null {
  if (kind === "onnx") return ONNX_NODE.exec(l)?.[1] ?? null;
  const m = GRAPH_NODE.exec(l);
  if (m) return m[1];
  if (l.includes("prism.fused_group")) return null;
  return GRAPH_OUT.exec(l)?.[1] ?? null;
}

/** The ONNX node named on 1-based `line` of a node text, or null (a value, a header, a bracket). */
export function nodeOfTextLine(kind: NodeText, text: string, line: number): string | null {
  return nodeOf(kind, text.split("\n")[line - 1] ?? "");
}

/** The 1-based lines of a node text that name one of `nodes`. */
export function nodeTextLines(kind: NodeText, text: string, nodes: readonly string[]): number[] {
  if (!nodes.length) return [];
  const want = new Set(nodes);
  return text.split("\n").flatMap((l, i) => {
    const n = nodeOf(kind, l);
    return n !== null && want.has(n) ? [i + 1] : [];
  });
}
