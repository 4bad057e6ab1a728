// @vitest-environment happy-dom
/** Pass docstrings (reStructuredText) rendered, not shown raw: blocks and inline markup per the docutils spec. */
import { describe, expect, it } from "vitest";
import { rstBlocks, rstNodes, rstSummary } from "../src/rst";

const DOC = [
  "``fuse-layer-norm``: recognise *LayerNormalization* written out as its parts (see :class:`Graph`).",
  "",
  "PyTorch's exporter writes it as::",
  "",
  "    mean = ReduceMean(x, axes)",
  "    d = Sub(x, mean)",
  "",
  "Rewrites:",
  "- ``Identity(x)`` -> ``x``;",
  "- ``Dropout(x)`` in inference -> ``x``;",
  "  a used mask output is left alone.",
  "",
  "Leaves **everything else** as it is.",
].join("\n");

describe("reStructuredText of pass docs", () => {
  it("splits paragraphs, a literal block and a bullet list with a continuation line", () => {
    expect(rstBlocks(DOC)).toEqual([
      { kind: "p", text: "``fuse-layer-norm``: recognise *LayerNormalization* written out as its parts (see :class:`Graph`)." },
      { kind: "p", text: "PyTorch's exporter writes it as:" },
      { kind: "pre", text: "mean = ReduceMean(x, axes)\nd = Sub(x, mean)" },
      { kind: "p", text: "Rewrites:" },
      { kind: "ul", items: ["``Identity(x)`` -> ``x``;", "``Dropout(x)`` in inference -> ``x``; a used mask output is left alone."] },
      { kind: "p", text: "Leaves **everything else** as it is." },
    ]);
  });
  it("renders inline markup as elements and leaves no markup characters in the text", () => {
    const host = document.createElement("div");
    host.append(...rstNodes(DOC));
    expect(host.querySelectorAll("pre").length).toBe(1);
    expect([...host.querySelectorAll("li code")].map((c) => c.textContent)).toEqual(["Identity(x)", "x", "Dropout(x)", "x"]);
    expect(host.querySelector("em")?.textContent).toBe("LayerNormalization");
    expect(host.querySelector("strong")?.textContent).toBe("everything else");
    expect(host.textContent).not.toMatch(/``|:class:|\*\*/);
  });
  it("summarizes the first paragraph in plain words without the pass's own name", () => {
    expect(rstSummary(DOC)).toBe("recognise LayerNormalization written out as its parts (see Graph).");
  });
  it("keeps HTML in a docstring as text", () => {
    const host = document.createElement("div");
    host.append(...rstNodes("a <b>bold</b> ``<i>x</i>``"));
    expect(host.querySelector("b, i")).toBeNull();
    expect(host.textContent).toBe("a <b>bold</b> <i>x</i>");
  });
});
