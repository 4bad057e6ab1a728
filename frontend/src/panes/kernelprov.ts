/**
 * Provenance across a kernel's texts at once (issue 15 item 2, the browser half), as Compiler Explorer
 * colours source and assembly together: beside the tab's text, the panes the user picks (`?panes=`: the
 * ONNX model's nodes, the final graph IR, the loop IR, LLVM IR, optimized LLVM IR, assembly; by default
 * the loop IR, or the assembly beside the loop IR tab), and the kernel's ONNX nodes as a strip above them.
 * Hovering a line or a node marks the related lines of every text shown and the related nodes in one
 * colour (`.prov-related`); a click pins the selection (hovering elsewhere shows the hovered one until
 * the pointer leaves) and scrolls the other texts to their first related line. The mapping is
 * provenance.ts's (the `.loc` / `!dbg` line maps of `kernel.compiled`).
 */
import type { Extension } from "@codemirror/state";
import { EditorView } from "@codemirror/view";
import { commentMarker, filterAsm } from "../asmfilter";
import { codeViewer, type CodeViewer } from "../editor";
import { h } from "../dom";
import { graphIr } from "../lang/graphir";
import { asm, llvmIr } from "../lang/llvmir";
import { loopIr } from "../lang/loopir";
import { describe, lineMap, linesOfNode, loopLineOf, nodeOfTextLine, nodeTextLines, related, statementLines, type NodeText, type ProvSelection, type ProvText } from "../provenance";
import { provenanceLines, showRelated } from "../provlines";
import type { KernelState } from "../state";
import type { KernelTab, PaneText } from "../urlstate";
import { loadFilters } from "./asmview";

interface Shown {
  view: EditorView;
  text: ProvText | NodeText;
  /** The assembly filter's shown line -> original line (assembly only). */
  origin?: () => readonly number[] | undefined;
  /** The document of a node text (ONNX model / graph IR). */
  doc?: string;
}

export interface KernelProvenance {
  /** The kernel's ONNX nodes, one chip each (hover or click selects a node). */
  readonly strip: HTMLElement;
  /** One line naming the selection. */
  readonly status: HTMLElement;
  /** The extension a text's viewer carries (hover and click report its lines). */
  extension(text: ProvText, origin?: () => readonly number[] | undefined): Extension;
  /** Registers a viewer showing `text` (its extension must come from `extension`). */
  attach(view: EditorView, text: ProvText, origin?: () => readonly number[] | undefined): void;
  /** A viewer of `text` in `host`, beside the tab's own (null: this kernel or compilation has no such text). */
  pane(host: HTMLElement, text: PaneText): CodeViewer | null;
  /** Marks the current selection in every text; `scroll` scrolls each to its first related line. */
  apply(scroll: boolean): void;
}

/** The texts a kernel's tab shows beside it when the URL names none (Compiler Explorer's source + asm pair). */
export function defaultPanes(tab: KernelTab): PaneText[] {
  if (tab === "optdiff") return [];
  return tab === "loop" ? ["asm"] : ["loop"];
}

/**
 * `pinned` is the selection to start from; `onPin` is told of each click (the pane keeps it across
 * re-renders); `target` and `symbols` filter the assembly as its own tab does.
 */
export function kernelProvenance(k: KernelState | undefined, opts: {
  pinned: ProvSelection | null; onPin: (sel: ProvSelection) => void; target: string; symbols: Record<string, string>;
  nodeTexts: Partial<Record<NodeText, string>>;
}): KernelProvenance {
  let pinned = opts.pinned;
  let hover: ProvSelection | null = null;
  const shown: Shown[] = [];
  const nodes = k?.lowered?.nodes ?? [];
  const status = h("p", { class: "muted prov-status" });
  const chips = nodes.map((n) => {
    const chip = h("button", { class: "btn tiny prov-node", dataset: { node: n }, title: `ONNX node ${n}: hover or click to mark the code computing it` }, n);
    chip.addEventListener("mouseenter", () => setHover({ node: n }));
    chip.addEventListener("mouseleave", () => setHover(null));
    chip.addEventListener("click", () => pin({ node: n }, null));
    return chip;
  });
  const strip = h("div", { class: "prov-nodes" }, h("span", { class: "muted" }, nodes.length > 1 ? `ONNX nodes (${nodes.length}): ` : "ONNX node: "), ...chips);

  const asmOrigin = () => shown.find((s) => s.text === "asm")?.origin?.();
  const selOf = (text: ProvText, line: number, origin?: () => readonly number[] | undefined): ProvSelection | null => {
    const o = origin?.();
    const loopLine = loopLineOf(lineMap(k, text), o ? (o[line - 1] ?? 0) : line);
    return loopLine === null ? null : { loopLine };
  };
  const say = (sel: ProvSelection | null) => {
    if (sel === null) status.textContent = "Hover or click a line or an ONNX node: the related lines of the loop IR, LLVM IR and assembly are marked in blue.";
    else if ("node" in sel) status.textContent = nodeSays(k, sel.node);
    else status.textContent = describe(k, sel.loopLine);
  };
  // `scroll`: scroll every text but `except` (the one pointed at) to its first related line; "reveal":
  // only those showing none of their related lines.
  const apply = (scroll: boolean | "reveal", except?: EditorView) => {
    const sel = hover ?? pinned;
    const r = related(k, sel, asmOrigin());
    say(sel);
    for (const s of shown) {
      const lines = s.text === "onnx" || s.text === "graph" ? nodeTextLines(s.text, s.doc ?? "", r.nodes) : r[s.text];
      showRelated(s.view, lines, s.view === except ? false : scroll);
    }
    for (const c of chips) c.classList.toggle("prov-related", r.nodes.includes(c.dataset.node ?? ""));
  };
  function setHover(sel: ProvSelection | null, from?: EditorView) {
    hover = sel;
    apply(sel === null ? false : "reveal", from);
  }
  function pin(sel: ProvSelection, from: EditorView | null) {
    pinned = sel;
    hover = null;
    opts.onPin(sel);
    apply(true, from ?? undefined);
  }

  const extension = (text: ProvText, origin?: () => readonly number[] | undefined): Extension => {
    return provenanceLines(
      (line) => {
        const sel = selOf(text, line, origin);
        if (sel) pin(sel, shown.find((s) => s.text === text)?.view ?? null);
      },
      (line) => setHover(line === null ? null : selOf(text, line, origin), shown.find((s) => s.text === text)?.view),
    );
  };
  const attach = (view: EditorView, text: ProvText, origin?: () => readonly number[] | undefined) => {
    shown.push({ view, text, origin });
  };
  const nodeExtension = (kind: NodeText, doc: string): Extension => provenanceLines(
    (line) => {
      const n = nodeOfTextLine(kind, doc, line);
      if (n !== null && nodes.includes(n)) pin({ node: n }, shown.find((s) => s.text === kind)?.view ?? null);
    },
    (line) => {
      const n = line === null ? null : nodeOfTextLine(kind, doc, line);
      setHover(n !== null && nodes.includes(n) ? { node: n } : null, shown.find((s) => s.text === kind)?.view);
    },
  );
  const pane = (host: HTMLElement, text: PaneText): CodeViewer | null => {
    if (text === "onnx" || text === "graph") {
      const doc = opts.nodeTexts[text];
      if (doc === undefined) return null;
      const v = codeViewer(host, doc, graphIr, undefined, [nodeExtension(text, doc)]);
      shown.push({ view: v.view, text, doc });
      // open at the kernel's nodes (a selection later scrolls to its own)
      const first = nodeTextLines(text, doc, nodes)[0];
      if (first !== undefined) v.view.dispatch({ effects: EditorView.scrollIntoView(v.view.state.doc.line(first).from, { y: "start" }) });
      return v;
    }
    if (text === "asm") {
      const body = k?.compiled?.asm;
      if (body === undefined) return null;
      const f = filterAsm(body, loadFilters(), commentMarker(opts.target), opts.symbols);
      const origin = () => f.origin;
      const v = codeViewer(host, f.text, asm, undefined, [extension("asm", origin)]);
      attach(v.view, "asm", origin);
      return v;
    }
    const body = text === "loop" ? k?.lowered?.loop_ir : text === "llvm" ? k?.compiled?.llvm_ir : k?.compiled?.llvm_ir_optimized;
    if (body === undefined) return null;
    const v = codeViewer(host, body, text === "loop" ? loopIr : llvmIr, undefined, [extension(text)]);
    attach(v.view, text);
    return v;
  };
  return { strip, status, extension, attach, pane, apply: (scroll) => apply(scroll) };
}

/** The status line for a selected ONNX node: how many of the kernel's statements compute it. */
function nodeSays(k: KernelState | undefined, node: string): string {
  const nodes = k?.lowered?.nodes ?? [];
  const low = k?.lowered;
  const all = low ? statementLines(low.loop_ir).length : 0;
  const mine = linesOfNode(k, node).length;
  const fused = nodes.length > 1 ? `: one of ${nodes.length} fused in this kernel` : "";
  if (!low?.line_nodes) return `ONNX node ${node}${fused}; every statement computes part of each (this result names a kernel's nodes, not each statement's)`;
  return `ONNX node ${node}${fused}; ${mine === all ? "every" : `${mine} of ${all}`} loop-IR statement${mine === 1 ? "" : "s"} compute${mine === 1 ? "s" : ""} it`;
}
