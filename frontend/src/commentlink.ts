/**
 * Where a comment's anchor is shown (issue 14 item 7): the app's own view of each anchor kind, so
 * a deep link to a comment (`/c/<id>/comments/<cid>`) and each thread's "show in context" open the
 * anchor itself, with the thread beside it.
 *
 *   pass       /c/<id>/pass/<n>
 *   ir_line    /c/<id>/pass/<n>?line=<k>                   the IR after pass n, line k marked
 *   node       /c/<id>/graph?node=<name>                   the fusion graph, the node selected
 *   kernel     /c/<id>/kernel/<name>                       the kernel's loop IR
 *   code_line  /c/<id>/kernel/<name>?tab=<tab>&line=<k>    loop | llvm | opt | asm, line k marked
 *   remark     /c/<id>/remarks?pass=<name>&remark=<n>:<r>  that pass's remarks, remark r marked
 *
 * Pure (no DOM), so the mapping is unit-tested.
 */
import { threads, type Anchor, type ReviewComment, type ReviewState } from "./review";
import type { CompilationView, KernelTab } from "./urlstate";

const CODE_TAB: Record<string, KernelTab> = { loop: "loop", llvm: "llvm", llvm_optimized: "opt", asm: "asm" };

/**
 * The view that shows an anchor. `passName` (the anchor's pass's name, from the comment's context
 * or the page's state) narrows a remark's list to its pass; without it all remarks are listed.
 */
export function anchorView(id: string, a: Anchor, passName?: string): CompilationView {
  switch (a.kind) {
    case "pass": return { page: "compilation", id, view: "pass", pass: a.pass, diff: false };
    case "ir_line": return { page: "compilation", id, view: "pass", pass: a.pass, diff: false, line: a.line };
    case "node": return { page: "compilation", id, view: "graph", node: a.node };
    case "kernel": return { page: "compilation", id, view: "kernel", kernel: a.kernel, tab: "loop" };
    case "remark": return { page: "compilation", id, view: "remarks", ...(passName ? { pass: passName } : {}), remark: `${a.pass}:${a.remark}` };
    case "code_line": return { page: "compilation", id, view: "kernel", kernel: a.kernel, tab: CODE_TAB[a.code] ?? "loop", line: a.line };
  }
}

/** The thread (its first comment) a comment id belongs to, whether the id is the root or a reply. */
export function threadOf(review: ReviewState, cid: number): ReviewComment | null {
  for (const { root, replies } of threads(review)) if (root.id === cid || replies.some((r) => r.id === cid)) return root;
  return null;
}

/**
 * For `/c/<id>/comments/<cid>`: the view of the comment's anchor, to show beside its thread, or
 * null where the conversation alone is shown (comments not loaded yet, no such comment, an
 * outdated anchor, which no longer exists in this compilation, or a deleted thread).
 */
export function deepLinkAnchor(view: CompilationView, review: ReviewState | undefined, passNames: readonly string[] = []): CompilationView | null {
  if (view.view !== "comments" || view.comment === undefined || !review?.loaded) return null;
  const root = threadOf(review, view.comment);
  if (!root || root.outdated || root.deleted) return null;
  const passName = "pass" in root.anchor ? (root.context.pass_name ?? passNames[root.anchor.pass]) : undefined;
  return anchorView(view.id, root.anchor, passName);
}
