/** The side-by-side diff's changes: re-indented lines kept (and so aligned), words changed inside changed lines. */
import { describe, expect, it } from "vitest";
import { lineAlignedDiff, WORD_DIFF_MAX_CHARS } from "../src/linediff";

const apply = (a: string, b: string) => {
  // B rebuilt from A and the changes: the changes must say exactly how B differs from A.
  let out = "";
  let at = 0;
  for (const c of lineAlignedDiff(a, b)) {
    out += a.slice(at, c.fromA) + b.slice(c.fromB, c.toB);
    at = c.toA;
  }
  return out + a.slice(at);
};

describe("line-aligned diff", () => {
  it("keeps lines that were only re-indented, so only the group's own lines change", () => {
    const a = "  %c = constant f32[4]\n  %r = Relu(%x)  // relu\n  %y = Neg(%r)  // neg\n  return %y";
    const b = "  %c = constant f32[4]\n  %y = prism.fused_group @g(%x) {\n    %r = Relu(%x)  // relu\n    %y = Neg(%r)  // neg\n    yield %y\n  }\n  return %y";
    const changes = lineAlignedDiff(a, b);
    const changedB = changes.map((c) => b.slice(c.fromB, c.toB)).join("|");
    expect(changedB).toContain("prism.fused_group");
    expect(changedB).toContain("yield %y");
    expect(changedB).not.toContain("Relu"); // re-indented only: unchanged, drawn level on both sides
    expect(changes.every((c) => a.slice(c.fromA, c.toA) === "" || !a.slice(c.fromA, c.toA).includes("Relu"))).toBe(true);
  });
  it("marks the changed words inside a changed line and describes B exactly", () => {
    const a = "x = Conv(%a, %w)  // c1\ny = Relu(x)\n";
    const b = "x = Conv(%a, %w2)  // c1\ny = Relu(x)\n";
    const [c] = lineAlignedDiff(a, b);
    expect(b.slice(c.fromB, c.toB)).toBe("2");
    for (const [p, q] of [[a, b], ["", "new\n"], ["old", ""], ["a\nb", "a\nb\nc"], ["  a\n  b", "a\nb"]]) {
      const re = (() => {
        let out = "";
        let at = 0;
        for (const ch of lineAlignedDiff(p, q)) {
          out += p.slice(at, ch.fromA) + q.slice(ch.fromB, ch.toB);
          at = ch.toA;
        }
        return out + p.slice(at);
      })();
      // lines kept despite indentation are the one allowed difference from B
      expect(re.split("\n").map((l) => l.trimStart())).toEqual(q.split("\n").map((l) => l.trimStart()));
    }
    expect(apply(a, b)).toBe(b);
  });
  it("marks a long changed run as whole lines (no character diff over it) and still describes B exactly", () => {
    // LLVM IR against its optimized form: almost every line differs (a 160 kB kernel froze the page).
    const a = Array.from({ length: 3000 }, (_, i) => `  %t${i} = fadd float %a${i}, %b${i}`).join("\n");
    const b = Array.from({ length: 500 }, (_, i) => `  %v${i} = fmul <16 x float> %p${i}, %q${i}`).join("\n");
    expect(a.length + b.length).toBeGreaterThan(WORD_DIFF_MAX_CHARS);
    const changes = lineAlignedDiff(a, b);
    expect(changes.length).toBe(1);
    expect(apply(a, b)).toBe(b);
  });
});
