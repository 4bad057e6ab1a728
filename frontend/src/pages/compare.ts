/**
 * `/compare/<a>...<b>`: two compilations side by side (say the same model for two targets or
 * two pipelines): headline numbers (compareRows.ts), pass by pass, kernel by kernel, and the
 * final IR diff.
 * Each side is the same pure reducer over its own event feed, so it also fills in live.
 */
import { api, followEvents, type EventFeed } from "../api";
import { diffViewer, type DiffViewer } from "../editor";
import { emptyState, h, replace } from "../dom";
import { fmtMs, fmtUs } from "../format";
import { graphIr } from "../lang/graphir";
import { linkTo } from "../router";
import { initialState, isDone, reduce } from "../state";
import { layerAlign, overview, passAlign, ratio, type CompareSide } from "./compareRows";
import { anchorLabel, type ReviewComment } from "../review";
import { reviewApi } from "../reviewapi";
import { trustedCommentHtml } from "../panes/comments";
import { userMenu } from "./auth";
import { notFoundBody } from "./notfound";

/** One side's threads on the compare page: anchor, author, body, a link to each. */
function sideComments(id: string, label: string, out: HTMLElement): void {
  reviewApi.comments(id).then(({ comments }) => {
    const roots = comments.filter((c: ReviewComment) => c.parent === null);
    replace(out, h("h4", null, `${label} ${id}: ${roots.length} thread(s)`), ...roots.map((c) =>
      h("div", { class: `compare-comment${c.resolved ? " resolved" : ""}`, dataset: { comment: String(c.id) } },
        h("a", { href: c.url, class: "anchor-link" }, anchorLabel(c.anchor, c.context.pass_name)),
        c.outdated ? h("span", { class: "badge outdated-badge" }, " outdated") : null,
        c.resolved ? h("span", { class: "badge resolved-badge" }, " resolved") : null,
        h("span", { class: "muted" }, ` ${c.author?.username ?? ""}: `),
        trustedCommentHtml(c.body_html))));
  }, () => replace(out, h("p", { class: "muted" }, `${label}: comments unavailable.`)));
}

interface Side extends CompareSide {
  id: string;
  feed: EventFeed | null;
}

function table(head: string[], rows: string[][], numericFrom = 1): HTMLElement {
  return h("table", { class: "grid compare-table" },
    h("thead", null, h("tr", null, ...head.map((x, i) => h("th", { class: i >= numericFrom ? "num" : "" }, x)))),
    h("tbody", null, ...rows.map((r) => h("tr", null, ...r.map((x, i) => h("td", { class: i >= numericFrom ? "num" : "" }, x))))));
}

export interface ComparePage {
  el: HTMLElement;
  key: string;
  destroy(): void;
}

export function comparePage(ids: [string, string]): ComparePage {
  const sides: Side[] = ids.map((id) => ({ id, state: initialState(), meta: null, feed: null, missing: false }));
  const links = sides.map((s, i) => linkTo(h("a", null, `${i === 0 ? "A" : "B"}: ${s.id}`), { page: "compilation", id: s.id, view: "summary" }));
  const header = h("header", { class: "page-header" }, linkTo(h("a", { class: "brand" }, "Prism"), { page: "start" }), h("span", { class: "muted" }, "Compare"), links[0], h("span", null, "vs"), links[1], h("span", { class: "spacer" }), userMenu());
  const over = h("section", { class: "card" });
  const passes = h("section", { class: "card" });
  const kernels = h("section", { class: "card" });
  const irHead = h("div");
  const irHost = h("div", { class: "cm-host diff" });
  const commentsA = h("div", { class: "compare-side-comments" });
  const commentsB = h("div", { class: "compare-side-comments" });
  sideComments(ids[0], "A", commentsA);
  sideComments(ids[1], "B", commentsB);
  const comments = h("section", { class: "card compare-comments" }, h("h3", null, "Comments"), h("div", { class: "compare-comment-cols" }, commentsA, commentsB));
  const layers = h("section", { class: "card compare-layers" });
  /** "Not found: compilation “x”" for a side the server has no visible compilation for (HTTP 404 / WebSocket 4404). */
  const missingNote = h("div", { class: "compare-missing" });
  const el = h("div", { class: "compare" }, header, missingNote, h("div", { class: "compare-body" }, over, passes, kernels, layers, h("section", { class: "card" }, irHead, irHost), comments));
  let diff: DiffViewer | null = null;
  let diffKey: [string | undefined, string | undefined] = [undefined, undefined];
  let frame = 0;

  const render = () => {
    frame = 0;
    const [a, b] = sides;
    document.title = `Compare ${a.id} … ${b.id} — Prism`;
    const gone = sides.filter((s) => s.missing);
    replace(missingNote, gone.length ? notFoundBody(gone.map((s) => `compilation “${s.id}”`).join(" and "), `The compare page needs two compilations this server has and you may see${gone.length === 1 ? "; the other side is shown below" : ""}.`, { signIn: true }) : null);
    const rows = overview(a, b);
    const overTable = table(["", `A ${a.id}`, `B ${b.id}`, "B / A"], rows.map((r) => [r[0], r[1], r[2], r[3] ?? ""]), 1);
    overTable.classList.add("compare-overview"); // its label column keeps its width beside a long note
    replace(over, h("h3", null, "Overview"), overTable);

    // paired by pass name and occurrence, never by position (an INT8 pipeline's quantize shifts the rest)
    const pairs = passAlign(a.state.passes.map((p) => p.name), b.state.passes.map((p) => p.name));
    const passRows = pairs.map(([i, j]) => {
      const pa = i === null ? undefined : a.state.passes[i];
      const pb = j === null ? undefined : b.state.passes[j];
      return [i === null ? "" : String(i), pa?.name ?? "", pa ? fmtMs(pa.duration_ms) : "", pa ? String(pa.stats?.nodes ?? "–") : "",
        j === null ? "" : String(j), pb?.name ?? "", pb ? fmtMs(pb.duration_ms) : "", pb ? String(pb.stats?.nodes ?? "–") : ""];
    });
    replace(passes, h("h3", null, "Pass by pass"), pairs.length ? table(["A #", "A pass", "A time", "A nodes", "B #", "B pass", "B time", "B nodes"], passRows, 8) : emptyState("No pass has finished on either side yet."));

    const names = [...a.state.kernels.keys()].filter((k) => b.state.kernels.has(k));
    const onlyA = a.state.kernels.size - names.length;
    const onlyB = b.state.kernels.size - names.length;
    const us = (s: Side, k: string) => s.state.kernels.get(k)?.timed?.median_us;
    names.sort((x, y) => (us(a, y) ?? us(b, y) ?? -1) - (us(a, x) ?? us(b, x) ?? -1));
    const kernelRows = names.slice(0, 300).map((k) => [k, fmtUs(us(a, k)), fmtUs(us(b, k)), ratio(us(a, k), us(b, k))]);
    replace(kernels, h("h3", null, "Kernel by kernel (the kernels both sides have)"),
      names.length ? table(["kernel", "A", "B", "B / A"], kernelRows) : emptyState(a.state.kernels.size && b.state.kernels.size ? "The two sides have no kernel in common (they fused differently)." : "No kernels on both sides yet."),
      h("p", { class: "muted" }, `${names.length} in common${names.length > 300 ? " (the 300 slowest shown)" : ""}; ${onlyA} only in A, ${onlyB} only in B.`));

    const aligned = layerAlign(a, b);
    replace(layers, ...(aligned ? [h("h3", null, "Layer by layer (precision): A against B"),
      table(["layer", "A precision", "B precision", "SQNR", "A kernel", "B kernel", "saved (A − B)"], aligned, 3),
      h("p", { class: "muted" }, "SQNR against FP32 from the quantized side's report; kernel times where a layer's kernel was timed (a fused kernel counts for each layer in it)")] : []));

    const irA = a.state.passes[a.state.passes.length - 1]?.ir;
    const irB = b.state.passes[b.state.passes.length - 1]?.ir;
    if (irA !== diffKey[0] || irB !== diffKey[1]) {
      diffKey = [irA, irB];
      diff?.destroy();
      diff = null;
      replace(irHost);
      replace(irHead, h("h3", null, "IR after the last pass: A (left) against B (right)"));
      const passesDone = (s: Side) => isDone(s.state) || (s.state.plannedPasses.length > 0 && s.state.passes.length >= s.state.plannedPasses.length);
      if (irA !== undefined && irB !== undefined && passesDone(a) && passesDone(b)) diff = diffViewer(irHost, irA, irB, graphIr);
      else irHost.appendChild(emptyState("The diff appears when both sides have finished their passes."));
    }
  };
  const schedule = () => {
    if (!frame) frame = requestAnimationFrame(render);
  };

  for (const s of sides) {
    api.compilation(s.id).then((c) => ((s.meta = c), schedule()), () => undefined);
    s.feed = followEvents(s.id, {
      onEvent(e) {
        const next = reduce(s.state, e);
        if (next !== s.state) {
          s.state = next;
          schedule();
        }
      },
      onStatus: () => undefined,
      lastSeq: () => s.state.nextSeq - 1,
      done: () => isDone(s.state),
      onMissing() {
        s.missing = true;
        schedule();
      },
    });
  }
  render();
  return {
    el,
    key: ids.join("..."),
    destroy() {
      sides.forEach((s) => s.feed?.close());
      diff?.destroy();
      if (frame) cancelAnimationFrame(frame);
    },
  };
}
