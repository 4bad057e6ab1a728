/**
 * Which texts stand beside a kernel's tab (issue 15 item 2: more than two texts side by side, as
 * Compiler Explorer opens any number of panes): the user ticks them in a strip above the code, and
 * the choice is the URL's `?panes=` (a deep link shows the same panes). The ONNX and graph-IR panes
 * come from the compilation's pass snapshots (state.ts), the others from the kernel's events.
 */
import { h } from "../dom";
import type { NodeText } from "../provenance";
import type { CompilationState } from "../state";
import { PANE_TEXTS, type KernelTab, type PaneText } from "../urlstate";

export const PANE_LABEL: Record<PaneText, string> = {
  onnx: "ONNX model", graph: "Graph IR", loop: "Loop IR", llvm: "LLVM IR", opt: "Optimized LLVM IR", asm: "Assembly",
};

/** The tab's own text among the panes (null: the LLVM IR diff, which is two texts of its own). */
export function tabPane(tab: KernelTab): PaneText | null {
  return tab === "optdiff" ? null : tab;
}

/**
 * The node texts of a compilation: `onnx`, the model as the first ONNX-level pass printed it (before
 * any graph pass: the uploaded model's nodes and names, weights left out); `graph`, the graph IR after
 * the last graph pass (the fused groups the kernels were lowered from). Absent when no such pass ran.
 */
export function nodeTexts(state: CompilationState): Partial<Record<NodeText, string>> {
  const onnx = state.passes.find((p) => p.level === "onnx")?.ir;
  const graph = [...state.passes].reverse().find((p) => p.level !== "onnx")?.ir;
  return { ...(onnx !== undefined ? { onnx } : {}), ...(graph !== undefined ? { graph } : {}) };
}

/**
 * The strip of pane toggles: one checkbox per text but the tab's own, ticked for those in `chosen`;
 * `onChange` gets the new choice (in PANE_TEXTS order). `has(text)` false greys out a text this
 * kernel has not got (a cross target's missing assembly, a log without ONNX-level passes).
 */
export function panePicker(tab: KernelTab, chosen: readonly PaneText[], has: (t: PaneText) => boolean,
  onChange: (panes: PaneText[]) => void): HTMLElement {
  const own = tabPane(tab);
  const boxes = PANE_TEXTS.filter((t) => t !== own).map((t) => {
    const box = h("input", { type: "checkbox", dataset: { pane: t } });
    box.checked = chosen.includes(t);
    box.disabled = !has(t) && !box.checked;
    box.addEventListener("change", () => {
      const on = new Set(boxes.filter((b) => b.checked).map((b) => b.dataset.pane as PaneText));
      onChange(PANE_TEXTS.filter((x) => on.has(x)));
    });
    return box;
  });
  return h("div", { class: "pane-picker", role: "group", "aria-label": "Texts beside the tab" },
    h("span", { class: "muted" }, "Beside: "),
    ...boxes.map((b) => h("label", { class: `pane-toggle${b.disabled ? " muted" : ""}`, title: b.disabled ? `No ${PANE_LABEL[b.dataset.pane as PaneText]} for this kernel` : "" },
      b, " ", PANE_LABEL[b.dataset.pane as PaneText])));
}
