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

/**
 * Where the compilation stands, as far as the downloads go: `ended` once its events or its record
 * (GET /api/compilations/<id>: `succeeded` / `failed`) say so, `running` while the record says it is
 * queued or running, `unknown` before either has arrived (a reload replays the events for a while).
 */
export type DownloadPhase = "unknown" | "running" | "ended";

export function downloadPhase(ended: boolean, recordStatus: string | undefined): DownloadPhase {
  if (ended || recordStatus === "succeeded" || recordStatus === "failed") return "ended";
  return recordStatus === "queued" || recordStatus === "running" ? "running" : "unknown";
}

/**
 * A card that fills itself once the phase is `ended` (call `update` on every render). Before the
 * phase is known it says nothing, so a reload of a finished compilation never flashes "offered once
 * the compilation has ended"; while it runs it says that.
 */
export function downloadsCard(id: string): { el: HTMLElement; update(phase: DownloadPhase): void } {
  const body = h("div", { class: "downloads-pending", "aria-busy": "true" });
  const el = h("div", { class: "card card-wide downloads" }, h("h3", null, "Downloads"), body);
  let shown: DownloadPhase = "unknown";
  return {
    el,
    update(phase) {
      if (phase === shown || shown === "ended") return;
      shown = phase;
      if (phase === "running") {
        replace(body, h("p", { class: "muted downloads-later" }, "Downloads are offered once the compilation has ended."));
        return;
      }
      replace(body, h("p", { class: "muted" }, "Listing the downloads…"));
      api.artifacts(id).then((list) => (body.removeAttribute("aria-busy"), replace(body, downloadsBody(list))),
        (e: unknown) => (body.removeAttribute("aria-busy"), replace(body, h("p", { class: "error" }, `The downloads could not be listed: ${e instanceof Error ? e.message : String(e)}`))));
    },
  };
}
