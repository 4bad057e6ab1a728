/**
 * The compilation page `/c/<id>`: follows the event stream (WebSocket, replay then live),
 * folds it with the pure reducer and hands the state and the URL's view to every pane. The page
 * reopened later replays the same stored events, so it shows the same thing.
 */
import { api, followEvents, type Compilation, type EventFeed, type TuningInfo } from "../api";
import { applyReviewMessage, initialReview, loadedReview, threads, type Anchor, type ReviewState } from "../review";
import { currentUser, followComments, reviewApi, type CommentFeed, type Me } from "../reviewapi";
import { deepLinkAnchor } from "../commentlink";
import { commentsPane } from "../panes/comments";
import { openComposer, reviewBar } from "../panes/reviewbar";
import { userMenu } from "./auth";
import { notFoundBody } from "./notfound";
import { h, replace } from "../dom";
import { headerVerdict } from "../verdict";
import { linkTo, navigate } from "../router";
import { initialState, isDone, pageStatus, reduce, type CompilationState } from "../state";
import type { CompilationView } from "../urlstate";
import { failurePane } from "../panes/failure";
import { graphPane } from "../panes/graph";
import { irPane } from "../panes/ir";
import { kernelsPane } from "../panes/kernels";
import { progressPane } from "../panes/progress";
import { remarksPane } from "../panes/remarks";
import { summaryPane } from "../panes/summary";
import { timelinePane } from "../panes/timeline";
import { tuningPane } from "../panes/tuning";
import type { Pane } from "../panes/types";

type Tab = "summary" | "pass" | "graph" | "kernels" | "remarks" | "comments";

function tabOf(v: CompilationView): Tab {
  return v.view === "kernel" ? "kernels" : v.view;
}

export interface CompilationPage {
  el: HTMLElement;
  id: string;
  show(v: CompilationView): void;
  destroy(): void;
}

export function compilationPage(first: CompilationView): CompilationPage {
  const id = first.id;
  let view = first;
  let state: CompilationState = initialState();
  let meta: Compilation | null = null;
  /** GET /api/compilations/<id>/tuning: the tuning job and where tuned schedules came from. */
  let tuning: TuningInfo | null = null;
  let tuningTimer = 0;
  const refreshTuning = () =>
    api.tuning(id).then((t) => ((tuning = t), schedule()), () => undefined);
  /** The pass the IR tab opens: the one last viewed, else the latest. */
  let lastPass: number | null = null;

  const title = h("div", { class: "title" }, h("span", { class: "muted" }, "Compilation "), h("code", null, id));
  const status = h("span", { class: "status-badge" }, "loading");
  const verifyBadge = h("span", { class: "verify-badge", hidden: true });
  const conn = h("span", { class: "conn muted" });
  const copy = h("button", { class: "btn copy-link", title: "Copy a link to this view" }, "Copy link");
  const copied = h("span", { class: "copied muted", role: "status" });
  copy.addEventListener("click", () => void copyLink(location.href, copied));
  const other = h("input", { class: "compare-with", placeholder: "compare with id…", size: 14, "aria-label": "Compare with another compilation id" });
  other.addEventListener("keydown", (e) => {
    const o = other.value.trim().replace(/^.*\/c\//, "").split(/[/?#]/)[0];
    if (e.key === "Enter" && /^[\w-]+$/.test(o)) navigate({ page: "compare", ids: [id, o] });
  });
  let review: ReviewState = initialReview();
  let me: Me | null = null;
  let commentFeed: CommentFeed | null = null;
  const refreshReview = () =>
    Promise.all([reviewApi.comments(id), reviewApi.reviews(id)]).then(([c, r]) => {
      review = loadedReview(review, c.comments, c.review_seq, r.reviews, r.state);
      schedule();
    }, () => undefined);
  const bar = reviewBar(id, () => void refreshReview().then(() => api.compilation(id)).then((c) => c && ((meta = c), schedule())));
  const onComment = (anchor: Anchor) => {
    if (!me?.user) {
      location.assign(`/signin?next=${encodeURIComponent(location.pathname + location.search)}`);
      return;
    }
    const passName = "pass" in anchor ? state.passes[anchor.pass]?.name : undefined;
    openComposer(id, anchor, passName, () => void refreshReview());
  };
  const header = h("header", { class: "page-header" }, linkTo(h("a", { class: "brand" }, "Prism"), { page: "start" }), title, status, verifyBadge, conn, bar.el, h("span", { class: "spacer" }), other, copy, copied, userMenu());

  const progress = progressPane();
  const tuningView = tuningPane();
  const failure = failurePane();
  const timeline = timelinePane();
  const panes: Record<Tab, Pane> = { summary: summaryPane(), pass: irPane(), graph: graphPane(), kernels: kernelsPane(), remarks: remarksPane(), comments: commentsPane(() => void refreshReview()) };
  const tabBar = h("nav", { class: "tabs main-tabs", role: "tablist" });
  const content = h("div", { class: "tab-content" }, ...Object.entries(panes).map(([k, p]) => h("div", { class: "tab-panel", dataset: { tab: k } }, p.el)));
  const el = h("div", { class: "compilation" }, header, progress.el, tuningView.el, failure.el, h("div", { class: "layout" }, timeline.el, h("div", { class: "main-col" }, tabBar, content)));

  /** A deep link to a comment shows its anchor's view with the thread beside it (commentlink.ts). */
  const anchorOf = () => deepLinkAnchor(view, review, state.passes.map((p) => p.name));
  const renderTabs = (anchor: CompilationView | null) => {
    const active = tabOf(anchor ?? view);
    const items: [Tab, string, CompilationView][] = [
      ["summary", "Summary", { page: "compilation", id, view: "summary" }],
      ["pass", "IR", { page: "compilation", id, view: "pass", pass: view.view === "pass" ? view.pass : (lastPass ?? Math.max(0, state.passes.length - 1)), diff: view.view === "pass" && view.diff }],
      ["graph", "Fusion graph", { page: "compilation", id, view: "graph", node: view.view === "graph" ? view.node : null }],
      ["kernels", `Kernels${state.kernels.size ? ` (${state.kernels.size})` : ""}`, view.view === "kernel" ? view : { page: "compilation", id, view: "kernels" }],
      ["remarks", `Remarks (${state.passes.reduce((s, p) => s + (p.remarks?.length ?? 0), 0)})`, { page: "compilation", id, view: "remarks" }],
      ["comments", `Comments (${threads(review).filter((t) => !t.root.resolved).length})`, view.view === "comments" ? view : { page: "compilation", id, view: "comments" }],
    ];
    replace(tabBar, ...items.map(([t, label, v]) => linkTo(h("a", { class: `tab${t === active ? " active" : ""}`, role: "tab", "aria-selected": t === active ? "true" : "false", dataset: { tab: t } }, label), v)));
    content.classList.toggle("beside-thread", anchor !== null);
    for (const panel of content.children) {
      const t = (panel as HTMLElement).dataset.tab;
      (panel as HTMLElement).hidden = t !== active && !(anchor && t === "comments");
    }
  };

  /** Set once the server says there is no such compilation (HTTP 404 or WebSocket 4404). */
  let notFound = false;
  const showStatus = () => {
    const st = pageStatus(state, meta?.status, notFound);
    status.className = `status-badge ${st.replace(" ", "-")}`;
    replace(status, st);
    const v = headerVerdict(state.verification);
    verifyBadge.hidden = v === null;
    if (v) {
      verifyBadge.className = `verify-badge ${v.kind}`;
      verifyBadge.title = v.title;
      replace(verifyBadge, v.text);
    }
  };

  let frame = 0;
  const render = () => {
    frame = 0;
    if (notFound) return showStatus(); // the not-found page: no header controls come back
    if (view.view === "pass") lastPass = view.pass;
    const ctx = { id, state, view, meta, review, onComment, tuning };
    showStatus();
    if (state.started) {
      // The uploaded file's (or the sample's) name, as the user knows the model; the graph's own
      // name (often "main_graph" or "torch_jit") only in the tooltip.
      const modelName = meta?.model.name || state.started.model.name;
      replace(title, h("strong", { class: "model-name", title: `graph ${state.started.model.name}` }, modelName), " → ", h("code", null, state.started.target), h("span", { class: "muted" }, ` · ${meta?.requested_pipeline ?? meta?.pipeline ?? ""} · `), h("code", { class: "muted" }, id));
      document.title = `${modelName} · ${state.started.target} — Prism`;
    }
    progress.update(ctx);
    tuningView.update(ctx);
    failure.update(ctx);
    timeline.update(ctx);
    bar.update(review, meta, me);
    const anchor = anchorOf();
    renderTabs(anchor);
    if (anchor) panes[tabOf(anchor)].update({ ...ctx, view: anchor });
    panes[tabOf(view)].update(ctx);
  };
  const schedule = () => {
    if (!frame) frame = requestAnimationFrame(render);
  };

  let feed: EventFeed | null = null;
  const missing = () => {
    feed?.close();
    notFound = true;
    showStatus();
    document.title = "Not found — Prism";
    // nothing to review, link to or compare: only the brand, the status and the user menu stay
    for (const c of [bar.el, other, copy, copied, verifyBadge, conn]) c.remove();
    replace(el, header, notFoundBody(`compilation “${id}”`, "There is no compilation with this id on this server that you may see: the link may be mistyped, the compilation deleted, or private to its owner.", { signIn: true }));
  };
  api.compilation(id).then(
    (c) => {
      meta = c;
      schedule();
      void refreshTuning();
      void currentUser().then((m) => ((me = m), schedule()));
      void refreshReview().then(() => {
        commentFeed = followComments(id, () => review.seq, (m) => {
          const next = applyReviewMessage(review, m);
          if (next !== review) {
            review = next;
            schedule();
          }
        });
      });
    },
    (e: unknown) => {
      if ((e as { status?: number }).status === 404) missing();
    },
  );
  feed = followEvents(id, {
    onEvent(e) {
      const next = reduce(state, e);
      if (next !== state) {
        state = next;
        schedule();
        // Tuning: who measured and where tuned schedules came from, read again as the job moves on.
        if (e.type === "tune.finished" || e.type === "tune.applied" || e.type === "compile.finished") void refreshTuning();
        const searching = state.tuning !== undefined && state.tuning.finished === undefined;
        if (searching && !tuningTimer) tuningTimer = window.setInterval(() => void refreshTuning(), 5000);
        if (!searching && tuningTimer) tuningTimer = (window.clearInterval(tuningTimer), 0);
      }
    },
    onStatus(s, detail) {
      if (s === "waiting") replace(conn, h("span", { class: "error" }, `Live updates paused: ${detail ?? "the server refused the connection"}; the page reconnects then.`));
      else replace(conn, s === "live" ? "● live" : s === "reconnecting" ? "reconnecting…" : "");
    },
    onError(message) {
      replace(conn, h("span", { class: "error" }, `The server could not send the stored events (${message}); retrying.`));
    },
    lastSeq: () => state.nextSeq - 1,
    done: () => isDone(state),
    onMissing: missing,
  });
  // ↑/↓ (or k/j) step through the passes while the IR tab is open.
  const onKey = (e: KeyboardEvent) => {
    if (view.view !== "pass" || e.altKey || e.ctrlKey || e.metaKey) return;
    const t = e.target as HTMLElement | null;
    if (t && (t.closest("input, textarea, select") || t.closest(".cm-editor"))) return;
    const step = e.key === "ArrowDown" || e.key === "j" ? 1 : e.key === "ArrowUp" || e.key === "k" ? -1 : 0;
    const to = view.pass + step;
    if (!step || to < 0 || to >= state.passes.length) return;
    e.preventDefault();
    navigate({ page: "compilation", id, view: "pass", pass: to, diff: view.diff });
  };
  document.addEventListener("keydown", onKey);
  render();

  return {
    el,
    id,
    show(v) {
      view = v;
      render();
    },
    destroy() {
      document.removeEventListener("keydown", onKey);
      feed?.close();
      commentFeed?.close();
      if (tuningTimer) window.clearInterval(tuningTimer);
      if (frame) cancelAnimationFrame(frame);
      Object.values(panes).forEach((p) => p.destroy?.());
    },
  };
}

async function copyLink(url: string, out: HTMLElement): Promise<void> {
  try {
    await navigator.clipboard.writeText(url);
  } catch {
    const t = h("textarea", { value: url, style: { position: "fixed", opacity: "0" } });
    document.body.appendChild(t);
    t.select();
    document.execCommand("copy");
    t.remove();
  }
  replace(out, "Link copied");
  setTimeout(() => replace(out), 2000);
}
