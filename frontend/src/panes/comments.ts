/**
 * The conversation: every thread of the compilation (its own and those carried from earlier
 * compilations of the same model), filterable by status and anchor kind, with replies, edit and
 * delete of one's own, resolve / reopen, a link to each anchor and a "show in context" link to
 * the thread's deep link `/c/<id>/comments/<cid>`, which the page shows beside its anchor (the IR
 * line marked, the node selected...; commentlink.ts): then this pane lists that thread alone. An
 * outdated thread's deep link shows the conversation, the thread highlighted. Bodies are the server's sanitized HTML
 * (`trustedCommentHtml`); every other string is text.
 */
import { h, replace } from "../dom";
import { linkTo, navigate } from "../router";
import { anchorView, deepLinkAnchor } from "../commentlink";
import { anchorLabel, ANCHOR_KINDS, matchesFilter, threads, type Anchor, type ReviewComment, type ReviewState, type ThreadFilter } from "../review";
import { reviewApi } from "../reviewapi";
import type { CompilationView } from "../urlstate";
export { anchorView } from "../commentlink";
import type { Pane, PaneContext } from "./types";

const STATUSES: ThreadFilter[] = ["open", "resolved", "outdated", "all"];

/** The server's rendering of a comment's Markdown: markdown-it-py with raw HTML off, then nh3. */
export function trustedCommentHtml(html: string): HTMLElement {
  const el = h("div", { class: "comment-body" });
  el.innerHTML = html; // sanitized on the server (explorer/review/markdown.py); never user HTML
  return el;
}

function when(iso: string): string {
  return new Date(iso).toLocaleString();
}

export function commentsPane(onChange: () => void): Pane {
  const status = h("select", { class: "comments-status", "aria-label": "Status" }, ...STATUSES.map((s) => h("option", { value: s }, s)));
  const kind = h("select", { class: "comments-kind", "aria-label": "Anchor kind" }, h("option", { value: "" }, "all anchors"), ...ANCHOR_KINDS.map((k) => h("option", { value: k }, k)));
  const count = h("span", { class: "muted" });
  const list = h("div", { class: "threads" });
  const el = h("section", { class: "comments", "aria-label": "Comments" }, h("div", { class: "comments-controls" }, status, kind, count), list);
  let ctx: PaneContext | null = null;
  let last: [ReviewState | undefined, CompilationView | null] = [undefined, null];
  let scrolled: number | undefined;

  const push = () => {
    if (!ctx) return;
    navigate({ page: "compilation", id: ctx.id, view: "comments", status: status.value, ...(kind.value ? { kind: kind.value } : {}) }, { replace: true });
  };
  status.addEventListener("change", push);
  kind.addEventListener("change", push);

  const act = async (fn: () => Promise<unknown>, out: HTMLElement) => {
    try {
      await fn();
      onChange();
    } catch (e) {
      replace(out, h("span", { class: "error" }, e instanceof Error ? e.message : String(e)));
    }
  };

  const commentEl = (c: ReviewComment, id: string): HTMLElement => {
    const err = h("div", { class: "comment-error", role: "alert" });
    const tools: HTMLElement[] = [];
    if (c.can_edit && !c.deleted) {
      const edit = h("button", { class: "btn small comment-edit" }, "Edit");
      const del = h("button", { class: "btn small comment-delete" }, "Delete");
      edit.addEventListener("click", () => {
        const box = h("textarea", { class: "comment-text", rows: 3, value: c.body });
        const save = h("button", { class: "btn small" }, "Save");
        save.addEventListener("click", () => void act(() => reviewApi.update(id, c.id, { body: box.value }), err));
        replace(body, box, save);
      });
      del.addEventListener("click", () => void act(() => reviewApi.remove(id, c.id), err));
      tools.push(edit, del);
    }
    const body = c.deleted ? h("div", { class: "comment-body muted" }, "(deleted)") : trustedCommentHtml(c.body_html);
    return h("div", { class: "comment", dataset: { comment: String(c.id) } },
      h("div", { class: "comment-head" }, h("strong", { class: "comment-author" }, c.author?.username ?? "someone"), h("span", { class: "muted" }, ` ${when(c.created_at)}${c.edited_at ? " (edited)" : ""}`), ...tools),
      body, err);
  };

  const threadEl = (root: ReviewComment, replies: ReviewComment[], id: string, selected: boolean): HTMLElement => {
    const err = h("div", { class: "comment-error", role: "alert" });
    const label = anchorLabel(root.anchor, root.context.pass_name);
    const where = root.outdated ? h("span", { class: "anchor-label" }, label) : linkTo(h("a", { class: "anchor-link" }, label), anchorView(id, root.anchor, root.context.pass_name));
    const inContext = root.outdated || root.deleted ? null : linkTo(h("a", { class: "show-in-context", title: "open the anchor with this thread beside it" }, "show in context"), { page: "compilation", id, view: "comments", comment: root.id });
    const reply = h("textarea", { class: "reply-text", rows: 2, placeholder: "Reply (Markdown)", "aria-label": "Reply" });
    const send = h("button", { class: "btn small reply-send" }, "Reply");
    send.addEventListener("click", () => reply.value.trim() && void act(() => reviewApi.reply(id, root.id, reply.value), err));
    const resolve = h("button", { class: "btn small thread-resolve" }, root.resolved ? "Reopen" : "Resolve");
    resolve.addEventListener("click", () => void act(() => reviewApi.update(id, root.id, { resolved: !root.resolved }), err));
    const context = root.outdated && root.context.lines
      ? h("pre", { class: "outdated-context", title: "the lines as they were" }, root.context.lines.map((l, i) => `${(root.context.first ?? 1) + i}  ${l}`).join("\n"))
      : root.outdated && root.context.message ? h("p", { class: "outdated-context" }, String(root.context.message)) : null;
    return h("article", { class: `thread${selected ? " selected" : ""}${root.resolved ? " resolved" : ""}${root.outdated ? " outdated" : ""}`, dataset: { thread: String(root.id), kind: root.kind } },
      h("div", { class: "thread-head" }, h("span", { class: `badge ${root.kind}` }, root.kind), where,
        root.outdated ? h("span", { class: "badge outdated-badge" }, "outdated") : null,
        root.resolved ? h("span", { class: "badge resolved-badge" }, `resolved${root.resolved_by ? ` by ${root.resolved_by.username}` : ""}`) : null,
        inContext,
        root.carried_from ? h("span", { class: "carried" }, "from compilation ", h("a", { href: root.carried_from.url, class: "carried-link" }, root.carried_from.compilation)) : null,
        linkTo(h("a", { class: "permalink muted", title: "link to this comment" }, "#"), { page: "compilation", id, view: "comments", comment: root.id })),
      context, commentEl(root, id), ...replies.map((r) => commentEl(r, id)),
      h("div", { class: "thread-actions" }, reply, send, root.can_resolve ? resolve : null), err);
  };

  const render = () => {
    if (!ctx || ctx.view.view !== "comments") return;
    const { id, review, view } = ctx;
    if (last[0] === review && last[1] === view) return;
    last = [review, view];
    status.value = view.status && (STATUSES as string[]).includes(view.status) ? view.status : view.comment !== undefined ? "all" : "open";
    kind.value = view.kind ?? "";
    if (!review?.loaded) return replace(list, h("p", { class: "muted" }, "Loading comments…"));
    const all = threads(review);
    const beside = deepLinkAnchor(view, review) !== null;
    el.classList.toggle("beside-anchor", beside);
    const shown = beside ? all.filter(({ root, replies }) => root.id === view.comment || replies.some((r) => r.id === view.comment)) : all.filter(({ root }) => root.thread === view.comment || root.id === view.comment || matchesFilter(root, status.value as ThreadFilter, kind.value as Anchor["kind"] | ""));
    replace(count, beside ? linkTo(h("a", { class: "all-threads" }, `all ${all.length} threads`), { page: "compilation", id, view: "comments" }) : `${shown.length} of ${all.length} threads`);
    replace(list, ...(shown.length ? shown.map(({ root, replies }) => threadEl(root, replies, id, root.id === view.comment || replies.some((r) => r.id === view.comment))) : [h("p", { class: "muted" }, all.length ? "No thread matches the filter." : "No comments yet: use the + in the IR and code gutters, or the comment buttons on passes, nodes, kernels and remarks.")]));
    if (view.comment !== undefined && scrolled !== view.comment) {
      const sel = list.querySelector(".thread.selected");
      if (sel) {
        scrolled = view.comment;
        sel.scrollIntoView({ block: "center" });
      }
    }
  };

  return {
    el,
    update(c) {
      ctx = c;
      render();
    },
  };
}
