/** Input shape fields: prefill from the model (or a sample) and read back as integers. */
import type { Dim, TensorInfo } from "./events";

/** Field text for one dim: the model's number, or the sample's binding for a symbolic dim, or "". */
export function prefill(input: TensorInfo, sample?: Dim[]): string[] {
  return input.shape.map((d, i) => {
    if (typeof d === "number" && d > 0) return String(d);
    const s = sample?.[i];
    return typeof s === "number" && s > 0 ? String(s) : "";
  });
}

/**
 * Reads the fields of every input into `{name: [ints]}`; throws an Error naming the input and
 * dim when a field is not a positive integer.
 */
export function readShapes(inputs: TensorInfo[], fields: Record<string, string[]>): Record<string, number[]> {
  const out: Record<string, number[]> = {};
  for (const inp of inputs) {
    const vals = fields[inp.name] ?? [];
    out[inp.name] = inp.shape.map((d, i) => {
      const t = (vals[i] ?? "").trim();
      const label = typeof d === "string" && d ? `dim ${i} (${d})` : `dim ${i}`;
      if (!/^\d+$/.test(t) || Number(t) < 1) throw new Error(`Input “${inp.name}” ${label} needs a positive integer${t ? `, not “${t}”` : ""}.`);
      return Number(t);
    });
  }
  return out;
}
