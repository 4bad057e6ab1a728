/** IR viewer: graph IR after the selected pass, or a side-by-side diff against the pass before. */
import { commentGutter, setCommentCounts } from "../commentgutter";
import { codeViewer, diffViewer, type CodeViewer, type DiffViewer } from "../editor";
import { counts } from "../review";
import { emptyState, h, replace } from "../dom";
import { count, fmtBytes, fmtMs } from "../format";
import { diffStats, trailingComment } from "../irdiff";
import { graphIr } from "../lang/graphir";
import { linkTo, navigate } from "../router";
import type { PassFinished } from "../events";
import { optionsText } from "./timeline";
import type { Pane, PaneContext } from "./types";
import { commentIcon } from "../icons";

export function irPane(): Pane {
  const head = h("div", { class: "ir-head" });
  const body = h("div", { class: "ir-body" });
  const el = h("section", { class: "ir-pane", "aria-label": "IR viewer" }, head, body);
  let shown: { pass: PassFinished | undefined; prev: PassFinished | undefined; diff: boolean; line?: number } | null = null;
  let editor: CodeViewer | DiffViewer | null = null;

  const drop = () => {
    editor?.destroy();
    editor = null;
  };

  return {
    el,
    update({ id, state, view, review, onComment }: PaneContext) {
      if (view.view !== "pass") return;
      const lineCounts = () => {
        const all = review ? counts(review).irLines : new Map<string, number>();
        return new Map([...all].filter(([k]) => k.startsWith(`${view.pass}:`)).map(([k, n]) => [Number(k.split(":")[1]), n]));
      };
      const n = view.pass;
      const pass = state.passes[n];
      const before = n > 0 ? state.passes[n - 1] : undefined;
      // The first graph pass follows the last ONNX-level pass: two different IRs, no line diff between them.
      const boundary = !!pass && !!before && (before.level === "onnx") !== (pass.level === "onnx");
      const prev = boundary ? undefined : before;
      const diff = view.diff && n > 0 && !boundary;
      if (shown && shown.pass === pass && shown.prev === prev && shown.diff === diff) {
        if (shown.line !== view.line && editor && "markLine" in editor) editor.markLine(view.line ?? null);
        shown.line = view.line;
        if (editor && "view" in editor) setCommentCounts(editor.view, lineCounts());
        return;
      }
      drop();
      if (!pass) {
        // Not remembered as shown: the same missing pass reads differently once the compilation ends
        // (a reload replays the events of a finished one, so it starts out "running").
        shown = null;
        replace(head);
        const ended = !!state.finished || !!state.failed;
        const running = state.running?.index === n || !ended;
        const total = state.passes.length;
        const ran = total ? ` (${state.failed ? "it failed after" : "it has"} ${count(total, "pass", "passes")}, 0–${total - 1})` : " (no pass finished)";
        replace(body, emptyState(running ? `Pass ${n} has not finished yet.` : `This compilation has no pass ${n}${ran}.`, running ? "Its IR appears here when it finishes." : undefined));
        return;
      }
      shown = { pass, prev, diff, line: view.line };
      const to = (pass: number, d: boolean) => ({ page: "compilation" as const, id, view: "pass" as const, pass, diff: d });
      const stats = pass.stats ?? {};
      const ds = prev ? diffStats(prev.ir, pass.ir) : null;
      const diffToggle = h("input", { type: "checkbox", checked: diff, disabled: n === 0 || boundary, class: "ir-diff-toggle" });
      diffToggle.addEventListener("change", () => navigate(to(n, diffToggle.checked)));
      replace(
        head,
        h("div", { class: "ir-title" },
          n > 0 ? linkTo(h("a", { class: "btn", title: "previous pass" }, "◀"), to(n - 1, view.diff)) : h("span", { class: "btn disabled" }, "◀"),
          h("h2", null, pass.level === "onnx" ? `ONNX model after pass ${n}: ` : `IR after pass ${n}: `, h("code", null, pass.name), h("code", { class: "muted" }, optionsText(pass.options)), pass.iteration ? h("span", { class: "muted ir-round" }, ` round ${pass.iteration}`) : null),
          onComment ? h("button", { class: "btn small comment-pass", title: "Comment on this pass", on: { click: () => onComment({ kind: "pass", pass: n }) } }, commentIcon(), " Comment on pass") : null,
          n + 1 < state.passes.length ? linkTo(h("a", { class: "btn", title: "next pass" }, "▶"), to(n + 1, view.diff)) : h("span", { class: "btn disabled" }, "▶"),
        ),
        h("div", { class: "ir-meta" },
          h("span", null, fmtMs(pass.duration_ms)),
          h("span", { class: pass.changed ? "is-changed" : "is-unchanged" }, pass.changed ? "changed" : "unchanged"),
          stats.nodes !== undefined ? h("span", null, `${stats.nodes} ${pass.level === "onnx" ? "ONNX nodes" : "nodes"}`) : null,
          typeof stats.initializers === "number" ? h("span", null, `${stats.initializers} initializers`) : null,
          stats.groups !== undefined ? h("span", null, `${stats.groups} groups`) : null,
          stats.constant_bytes !== undefined ? h("span", null, `constants ${fmtBytes(stats.constant_bytes)}`) : null,
          pass.remarks?.length ? linkTo(h("a", { class: "ir-remarks" }, `${pass.remarks.length} remarks`), { page: "compilation", id, view: "remarks", pass: pass.name }) : null,
          ds ? h("span", { class: "ir-diffstat" }, h("span", { class: "added" }, `+${ds.added}`), " ", h("span", { class: "removed" }, `−${ds.removed}`), ` vs pass ${n - 1}`) : null,
          state.finished || state.failed ? h("a", { class: "ir-download", href: `/api/compilations/${encodeURIComponent(id)}/artifacts/pass-${n}-${pass.name}.onnx`, download: `pass-${n}-${pass.name}.onnx`, title: "this graph as an ONNX model (fused groups as functions): opens in Netron" }, "download as ONNX") : null,
          state.fusion && !diff ? h("span", { class: "muted" }, "double-click a node line to see it in the graph") : null,
          h("label", { class: "ir-diff-label" }, diffToggle, n === 0 ? " diff (no earlier pass)" : boundary ? ` diff (pass ${n - 1} printed the ONNX model; the graph IR starts here)` : ` diff against pass ${n - 1} (${prev?.name ?? ""})`),
        ),
      );
      replace(body);
      if (diff && prev) {
        if (ds && ds.added + ds.removed === 0) body.appendChild(h("p", { class: "muted ir-same" }, `The IR is the same as after pass ${n - 1} (${prev.name}).`));
        body.appendChild(h("div", { class: "diff-labels" }, h("span", null, `before: pass ${n - 1} ${prev.name}`), h("span", null, `after: pass ${n} ${pass.name}`)));
        const host = h("div", { class: "cm-host diff" });
        body.appendChild(host);
        const dv = diffViewer(host, prev.ir, pass.ir, graphIr);
        editor = dv;
        const mark = view.line;
        if (mark !== undefined) requestAnimationFrame(() => editor === dv && dv.markLine(mark));
      } else {
        if (view.diff && boundary) body.appendChild(h("p", { class: "muted ir-same ir-boundary" }, `Passes up to ${n - 1} (${before?.name ?? ""}) rewrote the ONNX model and showed it as ONNX text; the graph IR starts at this pass (after import), so there is no line diff against pass ${n - 1}.`));
        const host = h("div", { class: "cm-host" });
        body.appendChild(host);
        // Double-click a node's line to see that node in the fusion graph.
        const toGraph = state.fusion
          ? (line: string) => {
              const name = trailingComment(line);
              if (name) navigate({ page: "compilation", id, view: "graph", node: name });
            }
          : undefined;
        const gutter = onComment ? [commentGutter(lineCounts(), (line, text) => onComment({ kind: "ir_line", pass: n, line, text }))] : [];
        const viewer = codeViewer(host, pass.ir, graphIr, toGraph, gutter);
        editor = viewer;
        const mark = view.line;
        if (mark !== undefined) requestAnimationFrame(() => editor === viewer && viewer.markLine(mark));
      }
    },
    destroy: drop,
  };
}
