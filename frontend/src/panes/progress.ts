/** Stage progress bar: import, passes, lowering, codegen, run, verify. */
import { STAGES } from "../events";
import { h, replace } from "../dom";
import { fmtMs } from "../format";
import { stageStatus, type CompilationState } from "../state";
import type { Pane, PaneContext } from "./types";

export function progressPane(): Pane {
  const el = h("div", { class: "progress", role: "list", "aria-label": "Compilation stages" });
  let last: CompilationState | null = null;
  return {
    el,
    update({ state }: PaneContext) {
      if (state === last) return;
      last = state;
      const st = stageStatus(state);
      const planned = state.plannedPasses.length;
      replace(
        el,
        STAGES.map((stage) => {
          let detail = "";
          if (stage === "passes" && planned > 0) detail = `${state.passes.length}/${planned}`;
          else if (stage === "lowering" && state.fusion && state.fusion.groups.length > 0) {
            const lowered = [...state.kernels.values()].filter((k) => k.lowered).length;
            detail = `${lowered}/${state.fusion.groups.length}`;
          } else if (stage === "run" && state.kernels.size > 0 && st.run !== "skipped") {
            const timed = [...state.kernels.values()].filter((k) => k.timed).length;
            if (timed) detail = `${timed} timed`;
          } else if (stage === "codegen" && state.kernels.size > 0) {
            const compiled = [...state.kernels.values()].filter((k) => k.compiled).length;
            detail = `${compiled}/${state.kernels.size}`;
          }
          const ms = state.finished?.stage_ms?.[stage];
          const fill = stage === "passes" && st[stage] === "running" && planned > 0 ? (100 * state.passes.length) / planned : null;
          return h(
            "div",
            { class: `stage stage-${st[stage]}`, role: "listitem", dataset: { stage, status: st[stage] }, title: `${stage}: ${st[stage]}` },
            fill !== null ? h("div", { class: "stage-fill", style: { width: `${fill}%` } }) : null,
            h("span", { class: "stage-name" }, stage),
            detail ? h("span", { class: "stage-detail" }, detail) : null,
            ms !== undefined ? h("span", { class: "stage-ms" }, fmtMs(ms)) : null,
          );
        }),
      );
    },
  };
}
