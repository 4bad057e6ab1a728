/** Input shape fields: prefill from the model (or a sample) and read back as integers; input value fields. */
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

/** An input the server offers a value field for: `value_uses` says what its value decides (an If condition, a trip count, a shape slot). */
export type ValueInput = TensorInfo & { value_uses?: string[] };

/** The inputs worth binding to a value (compiler.inspect_model's `value_inputs`, kept on the upload's inputs). */
export function valueInputs(inputs: TensorInfo[]): ValueInput[] {
  return (inputs as ValueInput[]).filter((i) => Array.isArray(i.value_uses) && i.value_uses.length > 0);
}

/**
 * Reads the value fields into `{name: [numbers]}` (a blank field binds nothing); throws an Error
 * naming the input when a value is not an integer (`true`/`false` for a bool input). The count is
 * checked by the compiler, which knows the input's shape.
 */
export function readValues(inputs: TensorInfo[], fields: Record<string, string>): Record<string, number[]> {
  const out: Record<string, number[]> = {};
  for (const inp of inputs) {
    const t = (fields[inp.name] ?? "").trim();
    if (!t) continue;
    out[inp.name] = t.split(",").map((part) => {
      const p = part.trim().toLowerCase();
      if (inp.dtype === "bool" && (p === "true" || p === "false")) return p === "true" ? 1 : 0;
      if (!/^[+-]?\d+$/.test(p)) throw new Error(`Input “${inp.name}” value needs integers separated by commas${p ? `, not “${part.trim()}”` : ""}.`);
      return Number(p);
    });
  }
  return out;
}
