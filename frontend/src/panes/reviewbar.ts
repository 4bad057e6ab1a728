/**
 * The review side of a compilation's header: who approved and who requested changes, the reviews,
 * a form for one's own verdict, the owner's visibility control, and the comment composer that
 * every anchor's affordance opens.
 */
import type { Compilation } from "../api";
import { h, replace } from "../dom";
import { anchorLabel, type Anchor, type ReviewState, type Verdict } from "../review";
import { reviewApi, type Me } from "../reviewapi";
import { trustedCommentHtml } from "./comments";

const VERDICTS: [Verdict, string][] = [["comment", "Comment"], ["approve", "Approve"], ["request_changes", "Request changes"]];

export interface ReviewBar {
  el: HTMLElement;
  update(review: ReviewState, meta: Compilation | null, me: Me | null): void;
}

function errorOf(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

export function reviewBar(id: string, onChange: () => void): ReviewBar {
  const state = h("span", { class: "review-state" });
  const visibility = h("span", { class: "visibility" });
  const verdict = h("select", { class: "review-verdict", "aria-label": "Verdict" }, ...VERDICTS.map(([v, label]) => h("option", { value: v }, label)));
  const summary = h("textarea", { class: "review-summary", rows: 3, placeholder: "Summary (Markdown)", "aria-label": "Review summary" });
  const submit = h("button", { class: "btn primary review-submit" }, "Submit review");
  const err = h("div", { class: "error review-error", role: "alert" });
  const list = h("div", { class: "review-list" });
  const form = h("details", { class: "review-form" }, h("summary", { class: "btn" }, "Review"), h("div", { class: "review-popup" }, verdict, summary, submit, err, list));
  submit.addEventListener("click", async () => {
    try {
      await reviewApi.review(id, verdict.value as Verdict, summary.value);
      summary.value = "";
      replace(err);
      form.open = false;
      onChange();
    } catch (e) {
      replace(err, errorOf(e));
    }
  });
  const el = h("span", { class: "review-bar" }, state, visibility, form);
  let shownVis = "";
  return {
    el,
    update(review, meta, me) {
      const s = review.summary;
      replace(state,
        s.approved_by.length ? h("span", { class: "badge approved", title: "approved" }, `✓ approved by ${s.approved_by.join(", ")}`) : null,
        s.changes_requested_by.length ? h("span", { class: "badge changes-requested" }, `✗ changes requested by ${s.changes_requested_by.join(", ")}`) : null,
        !s.approved_by.length && !s.changes_requested_by.length ? h("span", { class: "muted" }, review.reviews.length ? `${review.reviews.length} review comment(s)` : "not reviewed") : null);
      replace(list, ...review.reviews.slice().reverse().map((r) => h("div", { class: "review-item" }, h("strong", null, r.author?.username ?? "someone"), ` ${r.verdict.replace("_", " ")} · ${new Date(r.created_at).toLocaleString()}`, r.summary_html ? trustedCommentHtml(r.summary_html) : null)));
      form.hidden = !me?.user;
      const vis = String(meta?.visibility ?? "");
      if (vis && vis !== shownVis) {
        shownVis = vis;
        if (meta?.can_edit) {
          const pick = h("select", { class: "visibility-select", "aria-label": "Visibility" }, ...["private", "unlisted", "public"].map((v) => h("option", { value: v, selected: v === vis }, v)));
          pick.addEventListener("change", () => void reviewApi.setVisibility(id, pick.value).then(onChange, (e: unknown) => replace(err, errorOf(e))));
          replace(visibility, pick);
        } else replace(visibility, h("span", { class: "badge muted", title: "visibility" }, vis));
      }
    },
  };
}

/** A dialog to write a comment on `anchor`; resolves when posted or cancelled. */
export function openComposer(id: string, anchor: Anchor, passName: string | undefined, onPosted: () => void): void {
  const text = h("textarea", { class: "comment-text", rows: 5, placeholder: "Comment (Markdown)", "aria-label": "Comment" });
  const post = h("button", { class: "btn primary comment-post" }, "Comment");
  const cancel = h("button", { class: "btn comment-cancel" }, "Cancel");
  const err = h("div", { class: "error", role: "alert" });
  const dialog = h("dialog", { class: "composer" }, h("h3", null, "Comment on ", anchorLabel(anchor, passName)),
    "text" in anchor && anchor.text ? h("pre", { class: "composer-line" }, anchor.text) : null, text, h("div", { class: "composer-actions" }, post, cancel), err);
  const close = () => {
    dialog.close();
    dialog.remove();
  };
  cancel.addEventListener("click", close);
  post.addEventListener("click", async () => {
    if (!text.value.trim()) return replace(err, "Write something first.");
    post.disabled = true;
    try {
      await reviewApi.comment(id, anchor, text.value);
      close();
      onPosted();
    } catch (e) {
      replace(err, errorOf(e));
      post.disabled = false;
    }
  });
  document.body.appendChild(dialog);
  dialog.showModal();
  text.focus();
}
