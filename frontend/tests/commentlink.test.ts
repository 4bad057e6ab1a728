import { describe, expect, it } from "vitest";
import { anchorView, deepLinkAnchor, threadOf } from "../src/commentlink";
import { initialReview, loadedReview, type Anchor, type ReviewComment } from "../src/review";
import { formatUrl, parseUrl, type CompilationView } from "../src/urlstate";

const ID = "aaaa2222";

function comment(id: number, anchor: Anchor, over: Partial<ReviewComment> = {}): ReviewComment {
  return {
    id, compilation: ID, parent: null, thread: id, kind: anchor.kind, anchor, original_anchor: anchor,
    context: {}, outdated: false, carried_from: null, author: { username: "ada" }, body: "b", body_html: "<p>b</p>",
    deleted: false, created_at: "2026-12-01T00:00:00Z", edited_at: null, resolved: false, resolved_by: null, resolved_at: null,
    url: `/c/${ID}/comments/${id}`, can_edit: true, ...over,
  };
}

const review = (...cs: ReviewComment[]) => loadedReview(initialReview(), cs, cs.length, [], { approved_by: [], changes_requested_by: [] });
const deep = (comment: number): CompilationView => ({ page: "compilation", id: ID, view: "comments", comment });

describe("a comment's anchor -> the app's route", () => {
  // The expected URLs are the routes of frontend/README.md's table, written out by hand.
  const cases: [Anchor, string | undefined, string][] = [
    [{ kind: "pass", pass: 5 }, undefined, `/c/${ID}/pass/5`],
    [{ kind: "ir_line", pass: 5, line: 12, text: "%3 = Relu(%2)" }, undefined, `/c/${ID}/pass/5?line=12`],
    [{ kind: "node", node: "conv 1/a&b" }, undefined, `/c/${ID}/graph?node=conv+1%2Fa%26b`],
    [{ kind: "kernel", kernel: "fused_conv2d_relu_3" }, undefined, `/c/${ID}/kernel/fused_conv2d_relu_3`],
    [{ kind: "code_line", kernel: "k0", code: "loop", line: 4 }, undefined, `/c/${ID}/kernel/k0?line=4`],
    [{ kind: "code_line", kernel: "k0", code: "llvm", line: 40 }, undefined, `/c/${ID}/kernel/k0?tab=llvm&line=40`],
    [{ kind: "code_line", kernel: "k0", code: "llvm_optimized", line: 41 }, undefined, `/c/${ID}/kernel/k0?tab=opt&line=41`],
    [{ kind: "code_line", kernel: "k0", code: "asm", line: 7 }, undefined, `/c/${ID}/kernel/k0?tab=asm&line=7`],
    [{ kind: "remark", pass: 3, remark: 17 }, "fuse-ops", `/c/${ID}/remarks?pass=fuse-ops&remark=3%3A17`],
    [{ kind: "remark", pass: 3, remark: 17 }, undefined, `/c/${ID}/remarks?remark=3%3A17`],
  ];
  for (const [anchor, passName, url] of cases) {
    it(`${JSON.stringify(anchor)} -> ${url}`, () => {
      const v = anchorView(ID, anchor, passName);
      expect(formatUrl(v)).toBe(url);
      // The route parses back to the same view: a reload or a shared link marks the same place.
      const [path, search] = url.split("?");
      expect(parseUrl(path, search ? `?${search}` : "")).toEqual(v);
    });
  }

  it("drops malformed line and remark parameters", () => {
    expect(parseUrl(`/c/${ID}/kernel/k0`, "?tab=asm&line=0")).toEqual({ page: "compilation", id: ID, view: "kernel", kernel: "k0", tab: "asm" });
    expect(parseUrl(`/c/${ID}/remarks`, "?remark=3")).toEqual({ page: "compilation", id: ID, view: "remarks" });
  });
});

describe("a deep link to a comment opens its anchor", () => {
  const ir = comment(1, { kind: "ir_line", pass: 2, line: 7, text: "x" });
  const reply = comment(2, ir.anchor, { parent: 1, thread: 1 });
  const node = comment(3, { kind: "node", node: "conv_1" });
  const gone = comment(4, { kind: "node", node: "old" }, { outdated: true });
  const rem = comment(5, { kind: "remark", pass: 1, remark: 0 }, { context: { pass_name: "fold-constants" } });
  const rem2 = comment(6, { kind: "remark", pass: 2, remark: 3 });
  const r = review(ir, reply, node, gone, rem, rem2);

  it("maps the thread's root, a reply's too, to the anchor's view", () => {
    expect(deepLinkAnchor(deep(1), r)).toEqual({ page: "compilation", id: ID, view: "pass", pass: 2, diff: false, line: 7 });
    expect(threadOf(r, 2)?.id).toBe(1);
    expect(deepLinkAnchor(deep(2), r)).toEqual(deepLinkAnchor(deep(1), r));
    expect(deepLinkAnchor(deep(3), r)).toEqual({ page: "compilation", id: ID, view: "graph", node: "conv_1" });
  });

  it("names a remark's pass from the comment's context, else the page's passes", () => {
    expect(deepLinkAnchor(deep(5), r, ["import", "other", "x"])).toMatchObject({ view: "remarks", pass: "fold-constants", remark: "1:0" });
    expect(deepLinkAnchor(deep(6), r, ["import", "other", "fuse-ops"])).toMatchObject({ view: "remarks", pass: "fuse-ops", remark: "2:3" });
  });

  it("shows the conversation alone for an outdated anchor, an unknown comment, before loading, and off a deep link", () => {
    expect(deepLinkAnchor(deep(4), r)).toBeNull();
    expect(deepLinkAnchor(deep(99), r)).toBeNull();
    expect(deepLinkAnchor(deep(1), initialReview())).toBeNull();
    expect(deepLinkAnchor({ page: "compilation", id: ID, view: "comments" }, r)).toBeNull();
    expect(deepLinkAnchor({ page: "compilation", id: ID, view: "pass", pass: 2, diff: false }, r)).toBeNull();
  });
});
