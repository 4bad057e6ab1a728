/**
 * Time on the graph: each kernel's share of the model's kernel time (the sum of the timed kernels'
 * medians, `kernel.timed` `median_us`) in bands of a sequential colour scale, as Model Explorer's
 * and TensorRT Engine Explorer's per-layer overlays. Pure: render.ts paints, the pane's legend
 * lists the bands.
 */

export interface HeatBand {
  /** The band holds shares >= `min` (0..1). */
  min: number;
  colour: string;
  label: string;
}

/** Hottest first: a kernel goes to the first band whose `min` its share reaches. */
export const HEAT_BANDS: HeatBand[] = [
  { min: 0.2, colour: "#b91c1c", label: "≥ 20%" },
  { min: 0.1, colour: "#ea580c", label: "10–20%" },
  { min: 0.05, colour: "#f59e0b", label: "5–10%" },
  { min: 0.01, colour: "#fde68a", label: "1–5%" },
  { min: 0, colour: "#fef9e7", label: "< 1%" },
];
export const UNTIMED_COLOUR = "#eceff3";

/** `{kernel: share}` of the timed kernels' total (0..1 each, summing to 1); empty when none is timed. */
export function timeShares(kernelUs: ReadonlyMap<string, number>): Map<string, number> {
  const total = [...kernelUs.values()].reduce((a, b) => a + Math.max(0, b), 0);
  return new Map(total > 0 ? [...kernelUs].map(([k, us]) => [k, Math.max(0, us) / total]) : []);
}

export function heatBand(share: number | undefined): HeatBand | null {
  if (share === undefined || !Number.isFinite(share)) return null;
  return HEAT_BANDS.find((b) => share >= b.min) ?? HEAT_BANDS[HEAT_BANDS.length - 1];
}

/** Text for a band swatch's ink: dark on the light bands, white on the dark ones. */
export function heatInk(b: HeatBand | null): string {
  return b && b.min >= 0.1 ? "#fff" : "#1d2330";
}
