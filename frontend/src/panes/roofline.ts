/**
 * The kernels on a roofline chart (Williams, Waterman and Patterson, "Roofline", CACM 2009): each
 * timed kernel at its arithmetic intensity (FLOP per byte moved, `kernel.timed` flops / bytes)
 * against its achieved GFLOP/s, both axes logarithmic; a click opens the kernel. The machine's
 * ceilings (peak FLOP/s, memory bandwidth) are not measured by the workers yet, so the chart says
 * so and draws the best rates these kernels reached instead, labelled as such.
 */
import { h, svg } from "../dom";
import { fmtNum } from "../format";
import type { CompilationState } from "../state";

export interface RoofPoint {
  kernel: string;
  /** FLOP per byte. */
  intensity: number;
  gflops: number;
  share: number;
}

/** The timed kernels with both FLOPs and bytes, with their share of the kernel time. */
export function rooflinePoints(state: CompilationState): RoofPoint[] {
  const timed = [...state.kernels.values()].filter((k) => k.timed);
  const total = timed.reduce((s, k) => s + (k.timed?.median_us ?? 0), 0);
  return timed.filter((k) => (k.timed?.flops ?? 0) > 0 && (k.timed?.bytes ?? 0) > 0 && (k.timed?.median_us ?? 0) > 0).map((k) => {
    const t = k.timed as NonNullable<typeof k.timed>;
    return { kernel: k.name, intensity: t.flops / t.bytes, gflops: t.flops / (t.median_us * 1e3), share: total > 0 ? t.median_us / total : 0 };
  });
}

const W = 560;
const H = 300;
const PAD = { l: 56, r: 12, t: 12, b: 36 };

/** Decades [10^lo, 10^hi] around the values. */
function decades(values: number[]): [number, number] {
  const lo = Math.floor(Math.log10(Math.min(...values)));
  const hi = Math.ceil(Math.log10(Math.max(...values)));
  return [lo, hi === lo ? lo + 1 : hi];
}

export function rooflineChart(points: RoofPoint[], open: (kernel: string) => void): HTMLElement {
  if (!points.length) return h("p", { class: "muted" }, "No kernel was timed with its FLOP and byte counts, so there is no roofline to draw.");
  const [xl, xh] = decades(points.map((p) => p.intensity));
  const [yl, yh] = decades(points.map((p) => p.gflops));
  const x = (v: number) => PAD.l + ((Math.log10(v) - xl) / (xh - xl)) * (W - PAD.l - PAD.r);
  const y = (v: number) => H - PAD.b - ((Math.log10(v) - yl) / (yh - yl)) * (H - PAD.t - PAD.b);
  const chart = svg("svg", { class: "roofline-svg", viewBox: `0 0 ${W} ${H}`, width: W, height: H, role: "img", "aria-label": "Roofline" });
  for (let d = xl; d <= xh; d++) chart.append(svg("line", { class: "grid", x1: x(10 ** d), x2: x(10 ** d), y1: PAD.t, y2: H - PAD.b }), svg("text", { class: "tick", x: x(10 ** d), y: H - PAD.b + 14, "text-anchor": "middle" }, `${10 ** d >= 1 ? 10 ** d : (10 ** d).toPrecision(1)}`));
  for (let d = yl; d <= yh; d++) chart.append(svg("line", { class: "grid", x1: PAD.l, x2: W - PAD.r, y1: y(10 ** d), y2: y(10 ** d) }), svg("text", { class: "tick", x: PAD.l - 6, y: y(10 ** d) + 4, "text-anchor": "end" }, `${10 ** d >= 1 ? 10 ** d : (10 ** d).toPrecision(1)}`));
  chart.append(svg("text", { class: "axis", x: (W + PAD.l) / 2, y: H - 4, "text-anchor": "middle" }, "arithmetic intensity (FLOP/byte)"),
    svg("text", { class: "axis", x: 14, y: (H - PAD.b) / 2, transform: `rotate(-90 14 ${(H - PAD.b) / 2})`, "text-anchor": "middle" }, "GFLOP/s"));
  // The best rates reached here (not the machine's ceilings): bandwidth slope and compute flat.
  const bw = Math.max(...points.map((p) => p.gflops / p.intensity)); // GB/s
  const peak = Math.max(...points.map((p) => p.gflops));
  const knee = peak / bw;
  const from = 10 ** xl;
  const to = 10 ** xh;
  chart.append(svg("polyline", { class: "roof", points: `${x(from)},${y(Math.max(10 ** yl, bw * from))} ${x(Math.min(to, knee))},${y(peak)} ${x(to)},${y(peak)}` }),
    svg("title", {}, `best rates reached: ${fmtNum(bw)} GB/s, ${fmtNum(peak)} GFLOP/s`));
  for (const p of points) {
    const dot = svg("circle", { class: "roof-point", cx: x(p.intensity), cy: y(p.gflops), r: 4 + 8 * Math.sqrt(p.share), tabindex: "0", "data-kernel": p.kernel },
      svg("title", {}, `${p.kernel}: ${fmtNum(p.intensity)} FLOP/byte, ${fmtNum(p.gflops)} GFLOP/s, ${(100 * p.share).toFixed(1)}% of the kernel time`));
    dot.addEventListener("click", () => open(p.kernel));
    chart.append(dot);
  }
  return h("div", { class: "roofline" }, chart,
    h("p", { class: "muted" }, `Each kernel at its FLOP per byte and GFLOP/s (dot area: share of the kernel time); click one to open it. The line is the best rates these kernels reached (${fmtNum(bw)} GB/s, ${fmtNum(peak)} GFLOP/s), not the machine's ceilings, which the workers do not measure yet.`));
}
