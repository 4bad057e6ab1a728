/** The failure panel: stage, pass, node or kernel, and the message; the rest stays on the page. */
import { h, replace } from "../dom";
import { count } from "../format";
import { linkTo } from "../router";
import type { CompileFailed } from "../events";
import { SERVICE_STAGES } from "../stages";
import type { Pane, PaneContext } from "./types";

const REASONS: Record<string, string> = {
  worker_lost: "the worker running it was lost",
  time_limit: "it ran past the time limit",
  queue_lost: "its job was lost from the queue, and queueing it again did not help; submit it again",
  internal: "the service failed",
  compiler_lost: "the compiler's process died (the message says how)",
  memory_cap: "the worker had no room for it under its memory cap",
};

export function failurePane(): Pane {
  const el = h("section", { class: "failure", role: "alert", hidden: true });
  let last: CompileFailed | undefined;
  return {
    el,
    update({ id, state }: PaneContext) {
      if (state.failed === last) return;
      last = state.failed;
      el.hidden = !last;
      if (!last) return replace(el);
      const f = last;
      const passIndex = state.passes.length - 1;
      replace(
        el,
        h("h2", null, !state.started && SERVICE_STAGES.has(f.stage) ? `Compilation failed in the ${f.stage} before the compiler started` : `Compilation failed during ${f.stage}`),
        h("p", { class: "failure-message" }, f.message),
        h(
          "dl",
          null,
          f.reason ? [h("dt", null, "reason"), h("dd", null, REASONS[f.reason] ?? f.reason)] : null,
          f.pass ? [h("dt", null, "pass"), h("dd", null, f.pass)] : null,
          f.op ? [h("dt", null, "op"), h("dd", null, f.op)] : null,
          f.node ? [h("dt", null, "node"), h("dd", null, linkTo(h("a", null, f.node), { page: "compilation", id, view: "graph", node: f.node }))] : null,
          f.kernel ? [h("dt", null, "kernel"), h("dd", null, linkTo(h("a", null, f.kernel), { page: "compilation", id, view: "kernel", kernel: f.kernel, tab: "loop" }))] : null,
        ),
        f.reason
          ? null
          : h("p", { class: "failure-repro" },
              h("a", { class: "btn small repro-link", href: `/api/compilations/${encodeURIComponent(id)}/artifacts/reproducer.zip`, download: `${id}-reproducer.zip` }, "Download a reproducer"),
              " ", h("span", { class: "muted" }, `the model${f.node ? ` (or node ${f.node} alone, when that fails the same way)` : ""}, the pipeline${f.pass ? ` cut after ${f.pass}` : ""} and the one-line command (command.txt) that fails the same way`)),
        h(
          "p",
          { class: "failure-note" },
          `Everything produced before the failure is kept below: ${count(state.passes.length, "pass", "passes")}`,
          state.fusion ? ", the fusion graph" : "",
          state.kernels.size ? `, ${count(state.kernels.size, "kernel")}` : "",
          ".",
          passIndex >= 0 ? " " : "",
          passIndex >= 0 ? linkTo(h("a", null, "Open the IR of the last good pass"), { page: "compilation", id, view: "pass", pass: passIndex, diff: false }) : null,
        ),
      );
    },
  };
}
