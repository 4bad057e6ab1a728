/**
 * Comments and reviews of a compilation (issue 14): the JSON the server sends, the WebSocket
 * messages of the review log (their names are defined in explorer/compilations/messages.py), and a
 * pure reducer that folds them in. A message whose seq was already applied is dropped, so the page
 * shows each change once whatever the order and however often it arrives; comments are kept by id
 * (the latest copy wins), so the HTTP listing and the socket can overlap.
 */

export type AnchorKind = "pass" | "ir_line" | "node" | "kernel" | "remark" | "code_line";
export type CodeKind = "loop" | "llvm" | "llvm_optimized" | "asm";
export const ANCHOR_KINDS: readonly AnchorKind[] = ["pass", "ir_line", "node", "kernel", "remark", "code_line"];

export type Anchor =
  | { kind: "pass"; pass: number }
  | { kind: "ir_line"; pass: number; line: number; text?: string }
  | { kind: "node"; node: string }
  | { kind: "kernel"; kernel: string }
  | { kind: "remark"; pass: number; remark: number }
  | { kind: "code_line"; kernel: string; code: CodeKind; line: number; text?: string };

export interface UserRef {
  username: string;
}

export interface ReviewComment {
  id: number;
  compilation: string;
  parent: number | null;
  thread: number;
  kind: AnchorKind;
  anchor: Anchor;
  original_anchor: Anchor;
  context: { pass_name?: string; first?: number; lines?: string[]; message?: string; op_type?: string | null; [k: string]: unknown };
  outdated: boolean;
  carried_from: { compilation: string; url: string } | null;
  author: UserRef | null;
  body: string;
  /** The Markdown rendered and sanitized by the server (markdown-it-py, raw HTML off, then nh3). */
  body_html: string;
  deleted: boolean;
  created_at: string;
  edited_at: string | null;
  resolved: boolean;
  resolved_by: UserRef | null;
  resolved_at: string | null;
  url: string;
  can_edit: boolean;
  /** The requester may resolve / reopen the thread (set on its first comment). */
  can_resolve?: boolean;
}

export type Verdict = "approve" | "request_changes" | "comment";

export interface Review {
  id: number;
  compilation: string;
  author: UserRef | null;
  verdict: Verdict;
  summary: string;
  summary_html: string;
  created_at: string;
}

export interface ReviewSummary {
  approved_by: string[];
  changes_requested_by: string[];
}

/** WebSocket /ws/compilations/<id>/comments/ frames (explorer.review.selectors.log_after). */
export type ReviewMessage =
  | { seq: number; type: "comment.created" | "comment.updated" | "comment.deleted"; ts: number; compilation: string; comment: ReviewComment }
  | { seq: number; type: "review.created"; ts: number; compilation: string; review: Review; review_state: ReviewSummary };

export const REVIEW_MESSAGE_TYPES = ["comment.created", "comment.updated", "comment.deleted", "review.created"] as const;

export interface ReviewState {
  /** The last review-log seq applied (-1: none); resume the socket after it. */
  seq: number;
  comments: ReadonlyMap<number, ReviewComment>;
  reviews: readonly Review[];
  summary: ReviewSummary;
  loaded: boolean;
}

export function initialReview(): ReviewState {
  return { seq: -1, comments: new Map(), reviews: [], summary: { approved_by: [], changes_requested_by: [] }, loaded: false };
}

/** The HTTP listings (comments with their `review_seq`, and the reviews). */
export function loadedReview(state: ReviewState, comments: ReviewComment[], seq: number, reviews: Review[], summary: ReviewSummary): ReviewState {
  const merged = new Map(state.comments);
  for (const c of comments) merged.set(c.id, c);
  return { seq: Math.max(state.seq, seq), comments: merged, reviews: state.reviews.length > reviews.length ? state.reviews : reviews, summary: state.reviews.length > reviews.length ? state.summary : summary, loaded: true };
}

export function isReviewMessage(x: unknown): x is ReviewMessage {
  if (!x || typeof x !== "object") return false;
  const m = x as { seq?: unknown; type?: unknown };
  return typeof m.seq === "number" && (REVIEW_MESSAGE_TYPES as readonly unknown[]).includes(m.type);
}

/** One socket message; returns the same object when it changes nothing (already applied). */
export function applyReviewMessage(state: ReviewState, m: ReviewMessage): ReviewState {
  if (m.seq <= state.seq) return state;
  if (m.type === "review.created") {
    const reviews = state.reviews.some((r) => r.id === m.review.id) ? state.reviews : [...state.reviews, m.review];
    return { ...state, seq: m.seq, reviews, summary: m.review_state };
  }
  const comments = new Map(state.comments);
  comments.set(m.comment.id, m.comment);
  // A thread's resolved flag lives on its first comment: keep its replies in step.
  if (m.comment.parent === null) {
    for (const [id, c] of comments) if (c.thread === m.comment.id && c.id !== m.comment.id) comments.set(id, { ...c, resolved: m.comment.resolved });
  }
  return { ...state, seq: m.seq, comments };
}

/** Threads: each first comment with its replies, in order of creation. */
export function threads(state: ReviewState): { root: ReviewComment; replies: ReviewComment[] }[] {
  const all = [...state.comments.values()].sort((a, b) => a.id - b.id);
  const byRoot = new Map<number, { root: ReviewComment; replies: ReviewComment[] }>();
  for (const c of all) if (c.parent === null) byRoot.set(c.id, { root: c, replies: [] });
  for (const c of all) if (c.parent !== null) byRoot.get(c.parent)?.replies.push(c);
  return [...byRoot.values()];
}

export type ThreadFilter = "open" | "resolved" | "outdated" | "all";

export function matchesFilter(root: ReviewComment, status: ThreadFilter, kind: AnchorKind | ""): boolean {
  if (kind && root.kind !== kind) return false;
  if (status === "open") return !root.resolved;
  if (status === "resolved") return root.resolved;
  if (status === "outdated") return root.outdated;
  return true;
}

/** Open (unresolved, not outdated) threads per anchor target, for the counts on passes, lines and nodes. */
export function counts(state: ReviewState): { passes: Map<number, number>; irLines: Map<string, number>; nodes: Map<string, number>; kernels: Map<string, number>; codeLines: Map<string, number>; remarks: Map<string, number> } {
  const out = { passes: new Map<number, number>(), irLines: new Map<string, number>(), nodes: new Map<string, number>(), kernels: new Map<string, number>(), codeLines: new Map<string, number>(), remarks: new Map<string, number>() };
  const bump = <K>(m: Map<K, number>, k: K) => m.set(k, (m.get(k) ?? 0) + 1);
  for (const { root } of threads(state)) {
    if (root.resolved || root.outdated || root.deleted) continue;
    const a = root.anchor;
    if (a.kind === "pass" || a.kind === "ir_line" || a.kind === "remark") bump(out.passes, a.pass);
    if (a.kind === "ir_line") bump(out.irLines, `${a.pass}:${a.line}`);
    if (a.kind === "remark") bump(out.remarks, `${a.pass}:${a.remark}`);
    if (a.kind === "node") bump(out.nodes, a.node);
    if (a.kind === "kernel" || a.kind === "code_line") bump(out.kernels, a.kernel);
    if (a.kind === "code_line") bump(out.codeLines, `${a.kernel}:${a.code}:${a.line}`);
  }
  return out;
}

/** Where an anchor is, in words ("IR after pass 5, line 12"). */
export function anchorLabel(a: Anchor, passName?: string): string {
  const p = (n: number) => `pass ${n}${passName ? ` (${passName})` : ""}`;
  switch (a.kind) {
    case "pass": return p(a.pass);
    case "ir_line": return `IR after ${p(a.pass)}, line ${a.line}`;
    case "node": return `node ${a.node}`;
    case "kernel": return `kernel ${a.kernel}`;
    case "remark": return `remark ${a.remark} of ${p(a.pass)}`;
    case "code_line": return `${a.code} of kernel ${a.kernel}, line ${a.line}`;
  }
}
