import { describe, expect, it } from "vitest";
import { applyReviewMessage, counts, initialReview, isReviewMessage, loadedReview, matchesFilter, threads, type ReviewComment, type ReviewMessage } from "../src/review";
import { formatUrl, parseUrl } from "../src/urlstate";

function comment(id: number, over: Partial<ReviewComment> = {}): ReviewComment {
  return {
    id, compilation: "aaaa2222", parent: null, thread: id, kind: "ir_line",
    anchor: { kind: "ir_line", pass: 2, line: 7, text: "x" }, original_anchor: { kind: "ir_line", pass: 2, line: 7, text: "x" },
    context: {}, outdated: false, carried_from: null, author: { username: "ada" }, body: "b", body_html: "<p>b</p>",
    deleted: false, created_at: "2026-12-01T00:00:00Z", edited_at: null, resolved: false, resolved_by: null, resolved_at: null,
    url: `/c/aaaa2222/comments/${id}`, can_edit: true, ...over,
  };
}

const msg = (seq: number, c: ReviewComment, type: "comment.created" | "comment.updated" = "comment.created"): ReviewMessage => ({ seq, type, ts: 1, compilation: "aaaa2222", comment: c });

describe("review reducer", () => {
  it("applies each log entry once, in any overlap with the HTTP listing", () => {
    let s = loadedReview(initialReview(), [comment(1)], 0, [], { approved_by: [], changes_requested_by: [] });
    const again = applyReviewMessage(s, msg(0, comment(1)));
    expect(again).toBe(s); // seq 0 was in the listing
    s = applyReviewMessage(s, msg(1, comment(2, { parent: 1, thread: 1 })));
    s = applyReviewMessage(s, msg(2, comment(1, { resolved: true }), "comment.updated"));
    expect(applyReviewMessage(s, msg(2, comment(1)))).toBe(s);
    const t = threads(s);
    expect(t).toHaveLength(1);
    expect(t[0].replies.map((r) => r.id)).toEqual([2]);
    expect(t[0].replies[0].resolved).toBe(true); // the thread's state, on its replies too
    expect(s.seq).toBe(2);
  });

  it("counts open threads per pass, line, node and kernel, and filters", () => {
    let s = loadedReview(initialReview(), [
      comment(1),
      comment(2, { kind: "node", anchor: { kind: "node", node: "conv_1" } }),
      comment(3, { kind: "code_line", anchor: { kind: "code_line", kernel: "k0", code: "asm", line: 4 } }),
      comment(4, { resolved: true }),
      comment(5, { outdated: true }),
    ], 4, [], { approved_by: [], changes_requested_by: [] });
    const c = counts(s);
    expect(c.passes.get(2)).toBe(1);
    expect(c.irLines.get("2:7")).toBe(1);
    expect(c.nodes.get("conv_1")).toBe(1);
    expect(c.codeLines.get("k0:asm:4")).toBe(1);
    expect(c.kernels.get("k0")).toBe(1);
    const roots = threads(s).map((t) => t.root);
    expect(roots.filter((r) => matchesFilter(r, "open", "")).map((r) => r.id)).toEqual([1, 2, 3, 5]);
    expect(roots.filter((r) => matchesFilter(r, "resolved", "")).map((r) => r.id)).toEqual([4]);
    expect(roots.filter((r) => matchesFilter(r, "outdated", "")).map((r) => r.id)).toEqual([5]);
    expect(roots.filter((r) => matchesFilter(r, "all", "node")).map((r) => r.id)).toEqual([2]);
    s = applyReviewMessage(s, { seq: 5, type: "review.created", ts: 1, compilation: "aaaa2222", review: { id: 1, compilation: "aaaa2222", author: { username: "bob" }, verdict: "approve", summary: "", summary_html: "", created_at: "" }, review_state: { approved_by: ["bob"], changes_requested_by: [] } });
    expect(s.summary.approved_by).toEqual(["bob"]);
    expect(isReviewMessage({ seq: 1, type: "compile.finished" })).toBe(false);
  });

  it("deep links to comments round-trip", () => {
    for (const url of ["/c/aaaa2222/comments", "/c/aaaa2222/comments/17", "/c/aaaa2222/comments?status=resolved&kind=node", "/signin", "/signin?next=%2Fc%2Faaaa2222%2Fcomments"]) {
      expect(formatUrl(parseUrl(url.split("?")[0], url.includes("?") ? `?${url.split("?")[1]}` : ""))).toBe(url);
    }
    expect(parseUrl("/c/aaaa2222/comments/17")).toEqual({ page: "compilation", id: "aaaa2222", view: "comments", comment: 17 });
  });
});
