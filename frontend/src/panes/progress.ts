/**
 * Stage strip: import, passes, lowering, codegen, run, verify, each done / running / failed /
 * skipped / not reached with its counts, as the events say (stages.ts).
 */
import { STAGES } from "../events";
import { h, replace } from "../dom";
import { fmtMs } from "../format";
import { PASS_OVERHEAD_WORDS, passTimes, STATUS_WORDS, stageProgress } from "../stages";
import type { CompilationState } from "../state";
import type { Pane, PaneContext } from "./types";

export function progressPane(): Pane {
  const el = h("div", { class: "progress", role: "list", "aria-label": "Compilation stages" });
  let last: CompilationState | null = null;
  return {
    el,
    update({ state }: PaneContext) {
      if (state === last) return;
      last = state;
      const st = stageProgress(state);
      const planned = state.plannedPasses.length;
      const pt = passTimes(state);
      replace(
        el,
        STAGES.map((stage) => {
          const { status, detail } = st[stage];
          const ms = state.finished?.stage_ms?.[stage];
          const fill = stage === "passes" && status === "running" && planned > 0 ? (100 * state.passes.length) / planned : null;
          // The passes stage's wall time is more than the passes' own times (stages.ts passTimes): say both.
          const split = stage === "passes" && ms !== undefined && status === "done";
          const title = `${stage}: ${STATUS_WORDS[status]}${detail ? ` (${detail})` : ""}` +
            (split ? `; ${fmtMs(ms)} wall: ${fmtMs(pt.inPasses)} in the passes themselves (the sidebar's total), ${fmtMs(pt.other ?? 0)} in ${PASS_OVERHEAD_WORDS}` : "");
          return h(
            "div",
            { class: `stage stage-${status}`, role: "listitem", dataset: { stage, status }, title },
            fill !== null ? h("div", { class: "stage-fill", style: { width: `${fill}%` } }) : null,
            h("span", { class: "stage-name" }, stage),
            detail ? h("span", { class: "stage-detail" }, detail) : null,
            status === "unreached" ? h("span", { class: "stage-detail" }, "not reached") : null,
            ms !== undefined && status === "done" ? h("span", { class: "stage-ms" }, split ? `${fmtMs(ms)} wall` : fmtMs(ms)) : null,
            split ? h("span", { class: "stage-ms stage-ms-split" }, `${fmtMs(pt.inPasses)} in passes`) : null,
          );
        }),
      );
    },
  };
}
