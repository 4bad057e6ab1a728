import { describe, expect, it } from "vitest";
import { canonicalUrl, formatUrl, parseUrl, type View } from "../src/urlstate";

function roundTrip(v: View): View {
  const url = new URL(formatUrl(v), "http://x");
  return parseUrl(url.pathname, url.search);
}

describe("url state", () => {
  it("parses every route", () => {
    expect(parseUrl("/")).toEqual({ page: "start" });
    expect(parseUrl("/c/k3x9q2ab")).toEqual({ page: "compilation", id: "k3x9q2ab", view: "summary" });
    expect(parseUrl("/c/k3x9q2ab/", "?view=remarks")).toEqual({ page: "compilation", id: "k3x9q2ab", view: "remarks" });
    expect(parseUrl("/c/k3x9q2ab", "?view=remarks&pass=fuse-ops&kind=missed")).toEqual({ page: "compilation", id: "k3x9q2ab", view: "remarks", pass: "fuse-ops", kind: "missed" });
    expect(parseUrl("/c/k3x9q2ab", "?view=remarks&kind=bogus")).toEqual({ page: "compilation", id: "k3x9q2ab", view: "remarks" });
    expect(roundTrip({ page: "compilation", id: "a", view: "remarks", pass: "fuse-ops{x=1}", kind: "applied" })).toEqual({ page: "compilation", id: "a", view: "remarks", pass: "fuse-ops{x=1}", kind: "applied" });
    expect(parseUrl("/c/k3x9q2ab", "?view=kernels")).toEqual({ page: "compilation", id: "k3x9q2ab", view: "kernels" });
    expect(parseUrl("/c/k3x9q2ab/summary")).toEqual({ page: "compilation", id: "k3x9q2ab", view: "summary" });
    expect(parseUrl("/c/k3x9q2ab/kernels")).toEqual({ page: "compilation", id: "k3x9q2ab", view: "kernels" });
    expect(parseUrl("/c/k3x9q2ab/remarks")).toEqual({ page: "compilation", id: "k3x9q2ab", view: "remarks" });
    expect(parseUrl("/c/k3x9q2ab/remarks/", "?pass=fuse-ops&kind=applied")).toEqual({ page: "compilation", id: "k3x9q2ab", view: "remarks", pass: "fuse-ops", kind: "applied" });
    expect(parseUrl("/c/k3x9q2ab/pass/7")).toEqual({ page: "compilation", id: "k3x9q2ab", view: "pass", pass: 7, diff: false });
    expect(parseUrl("/c/k3x9q2ab/pass/7", "?diff=1")).toMatchObject({ view: "pass", pass: 7, diff: true });
    expect(parseUrl("/c/k3x9q2ab/pass/7", "?line=12")).toEqual({ page: "compilation", id: "k3x9q2ab", view: "pass", pass: 7, diff: false, line: 12 });
    expect(parseUrl("/c/k3x9q2ab/pass/7", "?line=0")).not.toHaveProperty("line");
    expect(parseUrl("/c/k3x9q2ab/kernel/fused_conv_relu_0", "?tab=asm")).toEqual({ page: "compilation", id: "k3x9q2ab", view: "kernel", kernel: "fused_conv_relu_0", tab: "asm" });
    expect(parseUrl("/c/k3x9q2ab/kernel/k", "?tab=evil")).toMatchObject({ tab: "loop" });
    expect(parseUrl("/c/k3x9q2ab/graph", "?node=Conv_12")).toEqual({ page: "compilation", id: "k3x9q2ab", view: "graph", node: "Conv_12" });
    expect(parseUrl("/c/k3x9q2ab/graph")).toMatchObject({ view: "graph", node: null });
  });

  it("parses and formats compare links", () => {
    expect(parseUrl("/compare/k3x9q2ab...ab12cd34")).toEqual({ page: "compare", ids: ["k3x9q2ab", "ab12cd34"] });
    expect(formatUrl({ page: "compare", ids: ["a1", "b2"] })).toBe("/compare/a1...b2");
    expect(parseUrl("/compare/a..b").page).toBe("notfound");
    expect(parseUrl("/compare/a...b...c").page).toBe("notfound");
  });

  it("reports unknown paths", () => {
    for (const p of ["/x", "/c", "/c/a/pass/x", "/c/a/pass", "/c/a/kernel", "/c/a/graph/x", "/c/%E0%A4%A/pass/1"]) {
      expect(parseUrl(p).page).toBe("notfound");
    }
  });

  it("round-trips names with any characters", () => {
    const names = ["<script>alert(1)</script>", "a/b c?d&e=f#g", "100%", "Conv_1:0", "ünï"];
    for (const n of names) {
      const k: View = { page: "compilation", id: "abc", view: "kernel", kernel: n, tab: "opt" };
      expect(roundTrip(k)).toEqual(k);
      const g: View = { page: "compilation", id: "abc", view: "graph", node: n };
      expect(roundTrip(g)).toEqual(g);
    }
  });

  it("formats canonical urls", () => {
    expect(formatUrl({ page: "compilation", id: "abc", view: "pass", pass: 3, diff: true })).toBe("/c/abc/pass/3?diff=1");
    expect(formatUrl({ page: "compilation", id: "abc", view: "pass", pass: 3, diff: false, line: 9 })).toBe("/c/abc/pass/3?line=9");
    expect(formatUrl({ page: "compilation", id: "abc", view: "kernel", kernel: "k", tab: "loop" })).toBe("/c/abc/kernel/k");
    expect(formatUrl({ page: "compilation", id: "abc", view: "graph", node: "a b" })).toBe("/c/abc/graph?node=a+b");
    expect(formatUrl({ page: "start" })).toBe("/");
    expect(formatUrl({ page: "compilation", id: "abc", view: "summary" })).toBe("/c/abc");
    expect(formatUrl({ page: "compilation", id: "abc", view: "kernels" })).toBe("/c/abc/kernels");
    expect(formatUrl({ page: "compilation", id: "abc", view: "remarks" })).toBe("/c/abc/remarks");
    expect(formatUrl({ page: "compilation", id: "abc", view: "remarks", pass: "fuse-ops", kind: "missed" })).toBe("/c/abc/remarks?pass=fuse-ops&kind=missed");
  });

  it("every view of a compilation is a path: no ?view= in any formatted url", () => {
    const views: View[] = [
      { page: "compilation", id: "abc", view: "summary" },
      { page: "compilation", id: "abc", view: "kernels" },
      { page: "compilation", id: "abc", view: "remarks", kind: "applied" },
      { page: "compilation", id: "abc", view: "pass", pass: 2, diff: true },
      { page: "compilation", id: "abc", view: "kernel", kernel: "k", tab: "asm" },
      { page: "compilation", id: "abc", view: "kernel", kernel: "k", tab: "loop", node: "conv/1 &x" },
      { page: "compilation", id: "abc", view: "graph", node: "n" },
    ];
    for (const v of views) {
      expect(formatUrl(v)).not.toContain("view=");
      expect(roundTrip(v)).toEqual(v);
    }
  });

  it("gives old ?view= links and aliases their canonical path", () => {
    expect(canonicalUrl("/c/abc", "?view=kernels")).toBe("/c/abc/kernels");
    expect(canonicalUrl("/c/abc", "?view=remarks&pass=fuse-ops&kind=missed")).toBe("/c/abc/remarks?pass=fuse-ops&kind=missed");
    expect(canonicalUrl("/c/abc", "?view=remarks", "#top")).toBe("/c/abc/remarks#top");
    expect(canonicalUrl("/c/abc/summary")).toBe("/c/abc");
    expect(canonicalUrl("/c/abc/")).toBe("/c/abc");
    // Already canonical, or not a page: left alone.
    expect(canonicalUrl("/c/abc")).toBeNull();
    expect(canonicalUrl("/c/abc/kernels")).toBeNull();
    expect(canonicalUrl("/c/abc/pass/3", "?diff=1")).toBeNull();
    expect(canonicalUrl("/c/abc/nope")).toBeNull();
  });
});
