/** Texts side by side (issue 15 item 2): `?panes=` names the texts beside a kernel's tab, the node texts
 * (the ONNX model as onnx.printer writes it, the graph IR as compiler/ir/printer.py does) map their lines
 * to ONNX node names, and a selected node marks its lines there. The texts below are those printers' output. */
import { describe, expect, it } from "vitest";
import { defaultPanes } from "../src/panes/kernelprov";
import { nodeTexts, tabPane } from "../src/panes/kernelpanes";
import { nodeOfTextLine, nodeTextLines } from "../src/provenance";
import type { CompilationState } from "../src/state";
import { formatUrl, parsePanes, parseUrl } from "../src/urlstate";

// onnx.printer.to_text of a Conv + Relu model (the first ONNX-level pass's `ir`)
const ONNX = ["<", "   ir_version: 8,", '   opset_import: ["" : 17]', ">", "g (float[1,3,32,32] x) => (float[1,8,32,32] y)",
  "   <float[8,3,3,3] w = {...}>", "{", "   [stem_conv] c = Conv <kernel_shape: ints = [3, 3], pads: ints = [1, 1, 1, 1]> (x, w)",
  "   [stem_relu] y = Relu (c)", "}"].join("\n");
// the graph IR after plan-memory (compiler/ir/printer.py); `%s = Add` is a node named as its output
const GRAPH = ["graph @g(%x: f32[1, 3, 32, 32]) {", "  %w = constant f32[8, 3, 3, 3] <digest 14a32bf0>",
  "  %y = prism.fused_group @fused_conv2d_relu_0 [out-elementwise-fusable](%x, %w) : f32[1, 8, 32, 32] {",
  "    ^args(%x: f32[1, 3, 32, 32], %w: f32[8, 3, 3, 3])",
  "    %c = Conv(%x, %w) {kernel_shape = [3, 3], pads = [1, 1, 1, 1]} : f32[1, 8, 32, 32]  // stem_conv",
  "    %y = Relu(%c) : f32[1, 8, 32, 32]  // stem_relu", "    yield %y", "  }",
  "  %s = Add(%y, %y) : f32[1, 8, 32, 32]", "  return %s", "}"].join("\n");

describe("panes beside a kernel", () => {
  it("parses and formats ?panes= (known texts, each once, in source-to-machine order)", () => {
    expect(parsePanes(null)).toBeNull();
    expect(parsePanes("")).toEqual([]);
    expect(parsePanes("asm,onnx,evil,asm,graph")).toEqual(["onnx", "graph", "asm"]);
    const v = parseUrl("/c/abc/kernel/k", "?tab=llvm&panes=onnx,loop,asm");
    expect(v).toEqual({ page: "compilation", id: "abc", view: "kernel", kernel: "k", tab: "llvm", panes: ["onnx", "loop", "asm"] });
    expect(formatUrl(v)).toBe("/c/abc/kernel/k?tab=llvm&panes=onnx%2Cloop%2Casm");
    expect(parseUrl("/c/abc/kernel/k", "?panes=")).toMatchObject({ panes: [] });
    expect(parseUrl("/c/abc/kernel/k", "")).not.toHaveProperty("panes");
  });

  it("defaults to the loop IR beside a text and the assembly beside the loop IR", () => {
    expect(defaultPanes("loop")).toEqual(["asm"]);
    expect(defaultPanes("asm")).toEqual(["loop"]);
    expect(defaultPanes("optdiff")).toEqual([]);
    expect(tabPane("optdiff")).toBeNull();
    expect(tabPane("opt")).toBe("opt");
  });

  it("maps the lines of the ONNX model and the graph IR to ONNX node names", () => {
    expect(nodeOfTextLine("onnx", ONNX, 8)).toBe("stem_conv");
    expect(nodeOfTextLine("onnx", ONNX, 6)).toBeNull();
    expect(nodeTextLines("onnx", ONNX, ["stem_relu"])).toEqual([9]);
    expect(nodeOfTextLine("graph", GRAPH, 5)).toBe("stem_conv");
    expect(nodeOfTextLine("graph", GRAPH, 3)).toBeNull(); // the fused group itself
    expect(nodeOfTextLine("graph", GRAPH, 2)).toBeNull(); // a constant
    expect(nodeOfTextLine("graph", GRAPH, 9)).toBe("s"); // named as its output: the printer writes no comment
    expect(nodeTextLines("graph", GRAPH, ["stem_conv", "stem_relu"])).toEqual([5, 6]);
    expect(nodeTextLines("graph", GRAPH, [])).toEqual([]);
  });

  it("takes the ONNX text from the first ONNX-level pass and the graph IR from the last graph pass", () => {
    const pass = (name: string, level: "onnx" | "graph" | undefined, ir: string) =>
      ({ type: "pass.finished", seq: 0, ts: 0, index: 0, name, options: {}, duration_ms: 1, changed: false, ir, stats: {}, remarks: [], ...(level ? { level } : {}) });
    const state = { passes: [pass("resolve-sequences", "onnx", ONNX), pass("expand-functions", "onnx", "later"),
      pass("fuse-ops", "graph", "mid"), pass("plan-memory", "graph", GRAPH)] } as unknown as CompilationState;
    expect(nodeTexts(state)).toEqual({ onnx: ONNX, graph: GRAPH });
    const old = { passes: [pass("fold-constants", undefined, "g1"), pass("fuse-ops", undefined, "g2")] } as unknown as CompilationState;
    expect(nodeTexts(old)).toEqual({ graph: "g2" });
  });
});
