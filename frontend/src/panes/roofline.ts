/**
 * The kernels on a roofline chart (Williams, Waterman and Patterson, "Roofline", CACM 2009): each
 * timed kernel at its arithmetic intensity (FLOP per byte moved, `kernel.timed` flops / bytes)
 * against its achieved GFLOP/s, both axes logarithmic; a click opens the kernel. The roof is the
 * worker's measured ceilings (`model.timed.ceilings`: peak FP32 FLOP/s of a Prism-generated FMA kernel
 * and the bandwidth of a streaming copy, at the kernels' thread count; compiler.runtime.ceilings),
 * each labelled with its value; for a log without them (from before workers measured them, or a
 * failed measurement) the best rates these kernels reached, labelled as such.
 */
import { h, svg } from "../dom";
import { fmtNum } from "../format";
import type { MachineCeilings } from "../events";
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

/**
 * The roof's two lines: measured `ceilings` when given (their values, `measured: true`), else the best
 * rates the `points` reached (GB/s: the highest GFLOP/s per FLOP/byte; GFLOP/s: the highest).
 */
export function roofOf(points: RoofPoint[], ceilings?: MachineCeilings | null): { gbps: number; gflops: number; measured: boolean } {
  if (ceilings && ceilings.peak_gflops > 0 && ceilings.peak_gbps > 0) return { gbps: ceilings.peak_gbps, gflops: ceilings.peak_gflops, measured: true };
  return { gbps: Math.max(...points.map((p) => p.gflops / p.intensity)), gflops: Math.max(...points.map((p) => p.gflops)), measured: false };
}

/** The cache levels' bandwidth ceilings the worker measured (`l2_gbps`, `l3_gbps`), highest level last. */
export function cacheRoofs(ceilings?: MachineCeilings | null): { level: string; gbps: number; bytes?: number }[] {
  if (!ceilings) return [];
  const out: { level: string; gbps: number; bytes?: number }[] = [];
  if ((ceilings.l2_gbps ?? 0) > 0) out.push({ level: "L2", gbps: ceilings.l2_gbps as number, bytes: ceilings.l2_bytes });
  if ((ceilings.l3_gbps ?? 0) > 0) out.push({ level: "L3", gbps: ceilings.l3_gbps as number, bytes: ceilings.l3_bytes });
  return out;
}

/** Whose machine measured the ceilings ("measured on vm, znver3 (AMD EPYC)"); a result served from the
 * cache carries the first worker's figures, so the chart says whose they are. "" for older logs. */
export function ceilingsSource(ceilings?: MachineCeilings | null): string {
  if (!ceilings?.host) return "";
  return `measured on ${ceilings.host}${ceilings.cpu ? `, ${ceilings.cpu}` : ""}: the worker that produced this result (a result served from the cache keeps its figures)`;
}

/**
 * The kernels that plot above a measured roof: more GFLOP/s than `min(peak, I x the highest measured
 * bandwidth)` (the L2 line where measured, a kernel may live in a cache). None for an unmeasured roof (it
 * is the best rates reached, so nothing is above it). A kernel above the roof means the ceilings
 * under-state this machine (measured under load, or by a kernel that does not reach the pipes' peak),
 * and the chart says so rather than drawing an impossible point silently.
 */
export function aboveRoof(points: RoofPoint[], ceilings?: MachineCeilings | null): RoofPoint[] {
  const roof = roofOf(points, ceilings);
  if (!roof.measured) return [];
  const bw = Math.max(roof.gbps, ...cacheRoofs(ceilings).map((c) => c.gbps));
  return points.filter((p) => p.gflops > Math.min(roof.gflops, bw * p.intensity));
}

const kib = (b?: number) => (b === undefined ? "" : b >= 1 << 20 ? ` (${Math.round(b / (1 << 20))} MiB)` : ` (${Math.round(b / 1024)} KiB)`);

export function rooflineChart(points: RoofPoint[], open: (kernel: string) => void, ceilings?: MachineCeilings | null): HTMLElement {
  if (!points.length) return h("p", { class: "muted" }, "No kernel was timed with its FLOP and byte counts, so there is no roofline to draw.");
  const roof = roofOf(points, ceilings);
  const levels = roof.measured ? cacheRoofs(ceilings) : [];
  const [xl, xh] = decades([...points.map((p) => p.intensity), ...(roof.measured ? [roof.gflops / roof.gbps] : []), ...levels.map((c) => roof.gflops / c.gbps)]);
  const [yl, yh] = decades([...points.map((p) => p.gflops), roof.gflops]);
  const x = (v: number) => PAD.l + ((Math.log10(v) - xl) / (xh - xl)) * (W - PAD.l - PAD.r);
  const y = (v: number) => H - PAD.b - ((Math.log10(v) - yl) / (yh - yl)) * (H - PAD.t - PAD.b);
  const chart = svg("svg", { class: "roofline-svg", viewBox: `0 0 ${W} ${H}`, width: W, height: H, role: "img", "aria-label": "Roofline" });
  for (let d = xl; d <= xh; d++) chart.append(svg("line", { class: "grid", x1: x(10 ** d), x2: x(10 ** d), y1: PAD.t, y2: H - PAD.b }), svg("text", { class: "tick", x: x(10 ** d), y: H - PAD.b + 14, "text-anchor": "middle" }, `${10 ** d >= 1 ? 10 ** d : (10 ** d).toPrecision(1)}`));
  for (let d = yl; d <= yh; d++) chart.append(svg("line", { class: "grid", x1: PAD.l, x2: W - PAD.r, y1: y(10 ** d), y2: y(10 ** d) }), svg("text", { class: "tick", x: PAD.l - 6, y: y(10 ** d) + 4, "text-anchor": "end" }, `${10 ** d >= 1 ? 10 ** d : (10 ** d).toPrecision(1)}`));
  chart.append(svg("text", { class: "axis", x: (W + PAD.l) / 2, y: H - 4, "text-anchor": "middle" }, "arithmetic intensity (FLOP/byte)"),
    svg("text", { class: "axis", x: 14, y: (H - PAD.b) / 2, transform: `rotate(-90 14 ${(H - PAD.b) / 2})`, "text-anchor": "middle" }, "GFLOP/s"));
  // The roof: bandwidth slope up to the knee, then flat at the compute peak (measured, or the best rates reached).
  const { gbps: bw, gflops: peak, measured } = roof;
  const knee = peak / bw;
  const from = 10 ** xl;
  const to = 10 ** xh;
  const what = measured ? "measured" : "best rates reached";
  chart.append(svg("polyline", { class: `roof${measured ? " measured" : ""}`, points: `${x(from)},${y(Math.max(10 ** yl, bw * from))} ${x(Math.min(to, knee))},${y(peak)} ${x(to)},${y(peak)}` },
    svg("title", {}, `${what}: ${fmtNum(bw)} GB/s, ${fmtNum(peak)} GFLOP/s`)));
  chart.append(svg("text", { class: "roof-label compute", x: W - PAD.r - 4, y: y(peak) - 5, "text-anchor": "end" }, `${measured ? "peak FP32" : "best reached"} ${fmtNum(peak)} GFLOP/s`));
  const lx = Math.max(from, Math.min(knee / 10, to / 100));
  if (bw * lx >= 10 ** yl) chart.append(svg("text", { class: "roof-label memory", x: x(lx) + 4, y: y(bw * lx) - 6 }, `${measured ? "memory" : "best reached"} ${fmtNum(bw)} GB/s`));
  // the cache levels' slopes (the same copy kept inside the L2 / the L3), up to the compute peak
  levels.forEach((c, i) => {
    const k = peak / c.gbps;
    chart.append(svg("polyline", { class: "roof cache", "data-level": c.level, points: `${x(from)},${y(Math.max(10 ** yl, c.gbps * from))} ${x(Math.min(to, k))},${y(peak)}` },
      svg("title", {}, `${c.level}${kib(c.bytes)}: ${fmtNum(c.gbps)} GB/s`)));
    const cx = Math.max(from * 1.5, Math.min(k / (4 + 6 * i), to / 100));
    if (c.gbps * cx >= 10 ** yl) chart.append(svg("text", { class: "roof-label cache", x: x(cx) + 4, y: y(c.gbps * cx) - 6 }, `${c.level} ${fmtNum(c.gbps)} GB/s`));
  });
  const above = new Set(aboveRoof(points, ceilings).map((p) => p.kernel));
  for (const p of points) {
    const dot = svg("circle", { class: `roof-point${above.has(p.kernel) ? " above-roof" : ""}`, cx: x(p.intensity), cy: y(p.gflops), r: 4 + 8 * Math.sqrt(p.share), tabindex: "0", "data-kernel": p.kernel },
      svg("title", {}, `${p.kernel}: ${fmtNum(p.intensity)} FLOP/byte, ${fmtNum(p.gflops)} GFLOP/s, ${(100 * p.share).toFixed(1)}% of the kernel time`));
    dot.addEventListener("click", () => open(p.kernel));
    chart.append(dot);
  }
  return h("div", { class: "roofline" }, chart,
    h("p", { class: "muted roofline-note" }, `Each kernel at its FLOP per byte and GFLOP/s (dot area: share of the kernel time); click one to open it. `,
      measured && ceilings
        ? `The roof is this worker's ceilings: peak FP32 ${fmtNum(peak)} GFLOP/s and memory bandwidth ${fmtNum(bw)} GB/s at ${ceilings.threads} thread${ceilings.threads > 1 ? "s" : ""}` +
          (levels.length ? `, and the bandwidth within each cache (${levels.map((c) => `${c.level}${kib(c.bytes)} ${fmtNum(c.gbps)} GB/s`).join(", ")}): a kernel whose data stays in a cache is bounded by that level's line` : ": the memory line is main memory's, so a kernel whose data stays in cache can sit above it") +
          ` (${ceilings.method}${ceilingsSource(ceilings) ? `; ${ceilingsSource(ceilings)}` : ""}).`
        : `The line is the best rates these kernels reached (${fmtNum(bw)} GB/s, ${fmtNum(peak)} GFLOP/s): this compilation's log has no measured ceilings.`,
      above.size
        ? ` ${above.size} kernel${above.size > 1 ? "s plot" : " plots"} above the measured roof (${[...above].slice(0, 5).join(", ")}${above.size > 5 ? ", ..." : ""}; ringed): ` +
          "no kernel can exceed the machine's ceilings, so these figures under-state it (measured while the machine was busy, or in an older version of Prism's ceiling kernels)."
        : ""));
}
