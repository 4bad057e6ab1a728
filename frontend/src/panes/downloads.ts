/**
 * Downloads: the compilation's artifacts (GET /api/compilations/<id>/artifacts) as links, each
 * saved under its own name: the JSON report, traces, the kernels' sources, the module's object file,
 * the shared object, the ONNX model after each pass, a failure's reproducer; and, for the standard
 * ones it lacks, why (a failed stage, a cross target). Asked once the compilation has ended.
 */
import { api, type Artifact, type ArtifactList } from "../api";
import { h, replace } from "../dom";

const ORDER = ["reproducer", "report", "trace", "kernels", "object", "shared-object"];

function link(a: Artifact): HTMLElement {
  return h("li", { dataset: { artifact: a.name } }, h("a", { href: a.url, download: a.name, class: "artifact-link" }, a.name), h("span", { class: "muted" }, ` — ${a.description}`));
}

/** The card's body for a listing: main artifacts, then the per-pass models folded, then what is missing. */
export function downloadsBody(list: ArtifactList): HTMLElement {
  const main = list.artifacts.filter((a) => a.kind !== "model").sort((a, b) => ORDER.indexOf(a.kind) - ORDER.indexOf(b.kind));
  const models = list.artifacts.filter((a) => a.kind === "model");
  const missing = Object.entries(list.missing);
  return h("div", { class: "downloads-body" },
    h("ul", { class: "artifact-list" }, ...main.map(link)),
    models.length ? h("details", { class: "pass-models" }, h("summary", null, `ONNX model after each pass (${models.length}; opens in Netron, runs in ONNX Runtime)`), h("ul", { class: "artifact-list" }, ...models.map(link))) : null,
    missing.length ? h("ul", { class: "artifact-missing muted" }, ...missing.map(([name, why]) => h("li", { dataset: { missing: name } }, name === "*" ? why : `No ${name}: ${why}.`))) : null);
}

/** A card that fills itself once `ended` is true (call `update` on every render). */
export function downloadsCard(id: string): { el: HTMLElement; update(ended: boolean): void } {
  const body = h("div", null, h("p", { class: "muted" }, "Downloads are offered once the compilation has ended."));
  const el = h("div", { class: "card card-wide downloads" }, h("h3", null, "Downloads"), body);
  let asked = false;
  return {
    el,
    update(ended) {
      if (!ended || asked) return;
      asked = true;
      api.artifacts(id).then((list) => replace(body, downloadsBody(list)), (e: unknown) => replace(body, h("p", { class: "error" }, `The downloads could not be listed: ${e instanceof Error ? e.message : String(e)}`)));
    },
  };
}
