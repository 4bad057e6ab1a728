/**
 * The tuning pane of a tuning compilation (issue 16): live while the search runs (`tune.progress`
 * per measured batch), then what it kept. A chart of each task's best time so far (never above its
 * default) over the search's trials, a step line (as a share of its default schedule's time, so
 * that kernels of any size share one axis), the share of
 * the tunable kernels' time reached, the kernel-time speedup so far, the end-to-end latency after
 * (and before, estimated), who measured, and a Stop button for who may stop it.
 */
import { api, ApiError } from "../api";
import { h, replace, svg } from "../dom";
import { fmtMs, fmtNum, fmtUs } from "../format";
import { chartKernels, defaultKept, initialTuning, latency, stepPoints, tunedShare, tuningSummary, type KernelCurve, type TuningState } from "../tuning";
import type { Pane, PaneContext } from "./types";

const W = 560;
const H = 240;
const PAD = { l: 48, r: 12, t: 10, b: 34 };

/** The best-so-far curves, y = best / default (%), x = the search's trials (every kernel's, so the
 * kernels share one axis); one step line per task: 100% from trial 0, a step at each of its batches. */
export function tuningChart(curves: KernelCurve[], totalTrials = 0): SVGSVGElement {
  const chart = svg("svg", { class: "tuning-svg", viewBox: `0 0 ${W} ${H}`, width: W, height: H, role: "img", "aria-label": "Best time so far per kernel over the search's trials" });
  const maxX = Math.max(1, totalTrials, ...curves.flatMap((c) => c.points.map((p) => p.total)));
  const steps = curves.map((c) => stepPoints(c, maxX));
  const ratios = steps.flatMap((pts) => pts.map((p) => p.y));
  const lo = Math.max(0, Math.floor(Math.min(1, ...ratios) * 10) / 10 - 0.1);
  const hi = Math.max(1.05, Math.ceil(Math.max(...ratios, 1) * 20) / 20);
  const x = (v: number) => PAD.l + (v / maxX) * (W - PAD.l - PAD.r);
  const y = (v: number) => H - PAD.b - ((v - lo) / (hi - lo)) * (H - PAD.t - PAD.b);
  for (let v = Math.ceil(lo * 10) / 10; v <= hi + 1e-9; v += 0.1) {
    chart.append(svg("line", { class: Math.abs(v - 1) < 1e-9 ? "grid default-line" : "grid", x1: PAD.l, x2: W - PAD.r, y1: y(v), y2: y(v) }),
      svg("text", { class: "tick", x: PAD.l - 6, y: y(v) + 4, "text-anchor": "end" }, `${Math.round(v * 100)}%`));
  }
  chart.append(svg("text", { class: "tick", x: x(0), y: H - PAD.b + 14, "text-anchor": "start" }, "0"),
    svg("text", { class: "tick", x: x(maxX), y: H - PAD.b + 14, "text-anchor": "end" }, String(maxX)),
    svg("text", { class: "axis", x: (W + PAD.l) / 2, y: H - 4, "text-anchor": "middle" }, "trials of the search"),
    svg("text", { class: "axis", x: 12, y: (H - PAD.b) / 2, transform: `rotate(-90 12 ${(H - PAD.b) / 2})`, "text-anchor": "middle" }, "best so far / default"));
  curves.forEach((c, i) => {
    const line = svg("polyline", { class: `curve tc${i % 8}`, points: steps[i].map((p) => `${x(p.x)},${y(p.y)}`).join(" "), "data-kernel": c.kernel },
      svg("title", {}, `${c.kernel}: ${legendTimes(c)} after ${c.trials} trials`));
    chart.append(line);
    for (const p of c.points) { // a dot at each of its batches
      chart.append(svg("circle", { class: `batch tc${i % 8}`, cx: x(p.total), cy: y(c.defaultUs ? p.bestUs / c.defaultUs : 1), r: 2.5 }));
    }
  });
  return chart;
}

/** A kernel's times for the legend: default → best so far, or "default kept" when no candidate beat it. */
export function legendTimes(c: KernelCurve): string {
  const def = fmtUs(c.defaultUs ?? undefined);
  if (c.bestUs === null || c.defaultUs === null) return `default ${def}`;
  if (defaultKept(c)) {
    const cand = c.candidateUs === null ? "" : c.candidateUs >= c.defaultUs ? `; best candidate ${fmtUs(c.candidateUs)}, slower`
      : `; best candidate ${fmtUs(c.candidateUs)}, within the noise margin`;
    return `${def}, default kept${cand}`;
  }
  return `${def} → ${fmtUs(c.bestUs)} (${fmtNum(c.defaultUs / c.bestUs)}x)`;
}

/** Seconds for the state line: whole ones from 10 s, else one decimal. */
const secs = (v: number): string => (v >= 10 ? v.toFixed(0) : v.toFixed(1));

function stateWords(t: TuningState, stopAsked: boolean, compiling: boolean): string {
  const budget = t.budgetS !== null ? ` of ${secs(t.budgetS)} s` : "";
  const f = t.finished;
  if (f?.error && !f.trials) return `The search did not run: ${f.error.replace(/^the search could not run: /, "")}`;
  if (f) {
    // tune.finished.reason (logs from before it was recorded have none: no words for it)
    const head = f.stopped || f.reason === "stopped" ? "Stopped" : f.reason === "error" ? "Ended by an error" : "Finished";
    const why = f.reason === "budget" ? " (budget spent)" : f.reason === "exhausted" ? " (every candidate schedule measured)" : "";
    return `${head}${why}: ${f.trials} trials in ${secs(f.duration_s)} s${budget}${f.error ? `; ${f.error}` : ""}`;
  }
  // The compile began without a search in the log: the search failed to start (the worker's log says why).
  if (!t.started && compiling) return "The search did not run; the model was compiled with the tuning database as it was.";
  if (!t.started) return "Waiting for a worker to start the search…";
  return `Searching${stopAsked ? " (stop requested: ends after the batch being measured)" : ""}: ${t.trialsTotal} trials, ${secs(t.elapsedS)} s${budget}`;
}

export { stateWords };

export function tuningPane(): Pane {
  const el = h("section", { class: "tuning", "aria-label": "Tuning", hidden: true });
  let last: unknown[] = [];
  let stopping = false;
  let stopError = "";
  let ctx: PaneContext | null = null;

  const stop = async (id: string) => {
    stopping = true;
    stopError = "";
    render(true);
    try {
      await api.stopTuning(id);
    } catch (e) {
      stopError = e instanceof ApiError ? e.message : String(e);
      stopping = false;
    }
    render(true);
  };

  const render = (force = false) => {
    if (!ctx) return;
    const { id, state, meta, tuning } = ctx;
    const t = state.tuning;
    const budget = (meta?.options as Record<string, unknown> | undefined)?.tune_budget_s ?? tuning?.budget_s;
    el.hidden = !t && !budget;
    if (el.hidden) return;
    const key = [t, state.timing, state.kernels, tuning, stopping, stopError, budget];
    if (!force && key.every((x, i) => x === last[i])) return;
    last = key;
    const ts: TuningState = t ?? { ...initialTuning(), budgetS: typeof budget === "number" ? budget : null };
    const sum = tuningSummary(ts);
    const lat = latency(ts, state.timing?.prism_ms);
    const stopAsked = stopping || Boolean(tuning?.stop_requested_at);
    const canStop = Boolean(tuning?.can_stop) && !ts.finished && !state.finished && !state.failed;
    const stopBtn = canStop ? h("button", { class: "btn small stop-tuning", disabled: stopAsked, on: { click: () => void stop(id) } }, stopAsked ? "Stopping…" : "Stop tuning") : null;
    const workers = Object.entries(tuning?.workers ?? {});
    const curves = chartKernels(ts);
    const ran = tunedShare(state.kernels.values());
    const facts = [
      sum.total ? `${sum.tuned} of ${sum.total} kernel workloads measured` : "",
      sum.shareTuned !== null ? `${(100 * sum.shareTuned).toFixed(0)}% of the tunable kernels' estimated time reached` : "",
      sum.kernelSpeedup !== null ? `measured kernel time ${fmtMs(sum.defaultUs / 1000)} default → ${fmtMs(sum.bestUs / 1000)} best (${fmtNum(sum.kernelSpeedup)}x)` : "",
    ].filter(Boolean);
    replace(el,
      h("div", { class: "tuning-head" }, h("h2", null, "Tuning"), h("span", { class: "tuning-state", role: "status" }, stateWords(ts, stopAsked, state.nextSeq > 0 && !state.tuning)), stopBtn,
        stopError ? h("span", { class: "error" }, stopError) : null),
      facts.length ? h("p", { class: "muted tuning-facts" }, facts.join(" · ")) : null,
      lat.afterMs !== null && ts.finished ? h("p", { class: "tuning-latency" }, `End to end: ${lat.beforeMs !== null ? `${fmtMs(lat.beforeMs)} before (estimated: after + the tuned kernels' measured gain) → ` : ""}${fmtMs(lat.afterMs)} after`,
        state.timing?.onnxruntime_ms ? ` · ONNX Runtime ${fmtMs(state.timing.onnxruntime_ms)}` : "") : null,
      ran.tuned && ran.share !== null ? h("p", { class: "tuning-share" }, `Tuned schedules run ${ran.tuned} of ${ran.total} kernels: ${(100 * ran.share).toFixed(0)}% of the model's measured kernel time.`) : null,
      curves.length ? tuningChart(curves, ts.trialsTotal) : h("p", { class: "muted" }, ts.finished ? "No candidate was measured." : "The chart fills in as the workers report their batches."),
      curves.length ? h("ul", { class: "tuning-legend" }, ...curves.map((c, i) => h("li", { class: `tc${i % 8}` }, h("code", null, c.kernel), ` ${c.summary ? `${c.summary} · ` : ""}${c.trials} trials · ${legendTimes(c)}`))) : null,
      workers.length ? h("p", { class: "muted tuning-workers" }, `Measured on ${workers.length} worker${workers.length > 1 ? "s" : ""} (${tuning?.queue ?? ""}): `,
        workers.map(([name, w]) => `${name} ${w.batches} batches, ${w.candidates} candidates`).join("; ")) : null,
    );
  };

  return {
    el,
    update(c) {
      ctx = c;
      render();
    },
  };
}
