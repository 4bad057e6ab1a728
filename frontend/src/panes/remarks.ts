/** Remarks: applied, missed and analysis decisions with their reasons; filterable; node links. */
import { emptyState, h, replace } from "../dom";
import { linkTo, navigate } from "../router";
import type { CompilationState } from "../state";
import type { Pane, PaneContext } from "./types";
import { commentIcon } from "../icons";

const KINDS = ["applied", "missed", "analysis"] as const;

/**
 * `{node name: op type}` from a printed graph IR: each node line ends in `// <node name>` (the
 * ONNX node's name, or `Op:output` for a nameless one) after `= Op(`.
 */
export function nodeOps(ir: string | undefined): Map<string, string> {
  const out = new Map<string, string>();
  for (const m of (ir ?? "").matchAll(/= ([\w.]+)\(.*\/\/ (.+)$/gm)) out.set(m[2].trim(), m[1]);
  return out;
}

/**
 * How a remark names a node: the ONNX node's name (a fusion-graph id mapped to its name) and its
 * op type, looked up in the IR before the remark's pass and after it (a removed node is only in
 * the first).
 */
function nodeLabeler(state: CompilationState): (name: string, pass: number) => { name: string; op: string | undefined } {
  const byId = new Map((state.fusion?.nodes ?? []).filter((n) => n.id !== n.name).map((n) => [n.id, n]));
  const opOf = new Map((state.fusion?.nodes ?? []).map((n) => [n.name, n.op_type]));
  const perPass = new Map<number, Map<string, string>>();
  const ops = (i: number) => {
    if (!perPass.has(i)) perPass.set(i, nodeOps(state.passes[i]?.ir));
    return perPass.get(i) as Map<string, string>;
  };
  return (raw, pass) => {
    const name = byId.get(raw)?.name ?? raw;
    return { name, op: opOf.get(name) ?? ops(pass - 1).get(name) ?? ops(pass).get(name) };
  };
}
const PAGE = 300;

export function remarksPane(): Pane {
  const kind = h("select", { "aria-label": "Kind", class: "remarks-kind" }, h("option", { value: "" }, "all kinds"), ...KINDS.map((k) => h("option", { value: k }, k)));
  const pass = h("select", { "aria-label": "Pass", class: "remarks-pass" }, h("option", { value: "" }, "all passes"));
  const text = h("input", { type: "search", placeholder: "Filter by text or node", "aria-label": "Filter remarks", class: "remarks-text" });
  const count = h("span", { class: "muted" });
  const list = h("ul", { class: "remarks-list" });
  const el = h("section", { class: "remarks", "aria-label": "Remarks" }, h("div", { class: "remarks-controls" }, kind, pass, text, count), list);
  let ctx: PaneContext | null = null;
  let lastState: CompilationState | null = null;
  let limit = PAGE;
  /** The ?remark= last scrolled to, so later events do not scroll the list again. */
  let scrolled: string | undefined;

  // The filters live in the URL (/c/<id>/remarks?pass=&kind=), so a filtered list can be shared.
  const pushFilters = () => {
    if (!ctx) return;
    const kindValue = KINDS.find((k) => k === kind.value);
    navigate({ page: "compilation", id: ctx.id, view: "remarks", ...(pass.value ? { pass: pass.value } : {}), ...(kindValue ? { kind: kindValue } : {}) }, { replace: true });
  };

  const render = () => {
    if (!ctx) return;
    const { id, state } = ctx;
    const marked = ctx.view.view === "remarks" ? ctx.view.remark : undefined;
    if (state !== lastState) {
      lastState = state;
      const names = [...new Set(state.passes.map((p) => p.name))];
      const keep = pass.value;
      replace(pass, h("option", { value: "" }, "all passes"), ...names.map((n) => h("option", { value: n }, n)));
      pass.value = names.includes(keep) ? keep : "";
    }
    if (ctx.view.view === "remarks") {
      const v = ctx.view;
      kind.value = v.kind ?? "";
      if (v.pass && ![...pass.options].some((o) => o.value === v.pass)) pass.appendChild(h("option", { value: v.pass }, v.pass));
      pass.value = v.pass ?? "";
    }
    const q = text.value.trim().toLowerCase();
    const rows: HTMLElement[] = [];
    let matched = 0;
    let total = 0;
    const onComment = ctx.onComment;
    const label = nodeLabeler(state);
    state.passes.forEach((p, index) => {
      for (const [ri, raw] of (p.remarks ?? []).entries()) {
        const r = { ...raw, nodes: raw.nodes ?? [], message: raw.message ?? "" };
        total++;
        if (kind.value && r.kind !== kind.value) continue;
        if (pass.value && p.name !== pass.value) continue;
        if (q && !r.message.toLowerCase().includes(q) && !r.nodes.some((n) => n.toLowerCase().includes(q))) continue;
        matched++;
        if (rows.length >= limit) continue;
        rows.push(
          h("li", { class: `remark remark-${r.kind}${marked === `${index}:${ri}` ? " selected" : ""}`, dataset: { remark: `${index}:${ri}` } },
            h("span", { class: `badge ${r.kind}` }, r.kind),
            linkTo(h("a", { class: "remark-pass" }, `#${index} ${r.pass || p.name}`), { page: "compilation", id, view: "pass", pass: index, diff: true }),
            h("span", { class: "remark-message", title: r.data && Object.keys(r.data).length ? JSON.stringify(r.data) : undefined }, r.message),
            r.nodes.length ? h("span", { class: "remark-nodes" }, ...r.nodes.slice(0, 12).map((raw) => {
              const n = label(raw, index);
              return linkTo(h("a", { class: "node-link", dataset: { node: n.name }, title: `ONNX node ${n.name}${n.op ? ` (${n.op})` : ""}: show it in the fusion graph` }, n.name, n.op ? h("span", { class: "node-op" }, ` ${n.op}`) : null), { page: "compilation", id, view: "graph", node: n.name });
            }), r.nodes.length > 12 ? ` +${r.nodes.length - 12} more` : "") : null,
            onComment ? h("button", { class: "btn small comment-remark", title: "Comment on this remark", "aria-label": "Comment on this remark", on: { click: () => onComment({ kind: "remark", pass: index, remark: ri }) } }, commentIcon()) : null,
          ),
        );
      }
    });
    replace(count, `${matched} of ${total}`);
    if (total === 0) {
      replace(list, emptyState(state.passes.length ? "The passes made no remarks." : "No remarks yet.", "Remarks appear as passes finish."));
      return;
    }
    if (matched > rows.length) {
      const more = h("button", { class: "btn" }, `Show ${Math.min(PAGE, matched - rows.length)} more`);
      more.addEventListener("click", () => {
        limit += PAGE;
        render();
      });
      rows.push(h("li", null, more));
    }
    replace(list, rows.length ? rows : [h("li", { class: "muted" }, "No remark matches the filter.")]);
    const sel = marked !== scrolled ? list.querySelector(".remark.selected") : null;
    if (sel) {
      scrolled = marked;
      sel.scrollIntoView({ block: "center" }); // ?remark=<n>:<r>
    }
  };
  for (const c of [kind, pass]) c.addEventListener("change", () => ((limit = PAGE), pushFilters()));
  text.addEventListener("input", () => ((limit = PAGE), render()));
  return {
    el,
    update(c) {
      const changed = !ctx || c.state !== ctx.state || c.view !== ctx.view || c.onComment !== ctx.onComment;
      ctx = c;
      if (changed) render();
    },
  };
}
