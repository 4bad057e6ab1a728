/** Input shape fields: prefill from the model (or a sample) and read back as integers; input value fields. */
import type { Dim, TensorInfo } from "./events";

/** Field text for one dim: the model's number, or the sample's binding for a symbolic dim, or "". */
export function prefill(input: TensorInfo, sample?: Dim[]): string[] {
  return (input.shape ?? []).map((d, i) => {
    if (typeof d === "number" && d > 0) return String(d);
    const s = sample?.[i];
    return typeof s === "number" && s > 0 ? String(s) : "";
  });
}

/**
 * Reads the fields of every input into `{name: [ints]}`; throws an Error naming the input and
 * dim when a field is not a positive integer. With `ranged` (the dims given a range, see
 * `readRanges`), a field may hold one of their names instead: one compilation serves its range.
 */
export function readShapes(inputs: TensorInfo[], fields: Record<string, string[]>, ranged: string[] = []): Record<string, (number | string)[]> {
  const out: Record<string, (number | string)[]> = {};
  for (const inp of inputs) {
    const vals = fields[inp.name] ?? [];
    out[inp.name] = (inp.shape ?? []).map((d, i) => {
      const t = (vals[i] ?? "").trim();
      if (ranged.includes(t)) return t;
      const label = typeof d === "string" && d ? `dim ${i} (${d})` : `dim ${i}`;
      if (!/^\d+$/.test(t) || Number(t) < 1) throw new Error(`Input “${inp.name}” ${label} needs a positive integer${ranged.length ? ` or a ranged dim (${ranged.join(", ")})` : ""}${t ? `, not “${t}”` : ""}.`);
      return Number(t);
    });
  }
  return out;
}

/**
 * Reads the dim-range field (`N=1..8`, several separated by commas; blank: none) into `{N: [1, 8]}`;
 * throws an Error quoting the part that is not NAME=MIN..MAX with 1 <= MIN <= MAX. The compiler
 * checks the rest (the number of sizes, that an input shape names the dim).
 */
export function readRanges(text: string): Record<string, [number, number]> {
  const out: Record<string, [number, number]> = {};
  for (const part of text.split(",").map((p) => p.trim()).filter(Boolean)) {
    const m = /^([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(\d+)\s*\.\.\s*(\d+)$/.exec(part);
    if (!m || Number(m[2]) < 1 || Number(m[2]) > Number(m[3])) throw new Error(`Dim range “${part}” needs NAME=MIN..MAX with 1 ≤ MIN ≤ MAX (e.g. N=1..8).`);
    out[m[1]] = [Number(m[2]), Number(m[3])];
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

/** `[1, 4, 15, 15]` from the dims text of a printed type `f32[1, 4, 15, 15]`; null when a dim is not a number. */
function dimsOf(text: string): number[] | null {
  if (text.trim() === "") return [];
  const dims = text.split(",").map((d) => d.trim());
  return dims.every((d) => /^\d+$/.test(d)) ? dims.map(Number) : null;
}

/**
 * The bound (static) shapes of the graph's inputs and outputs as the compiler specialized them,
 * read from the printed graph IR after a pass (DESIGN.md "Graph IR": the header
 * `graph @g(%x: f32[1, 3, 64, 64])` and top-level lines `  %y = Op(...) : f32[1, 4, 15, 15]`).
 * `compile.started` describes the model as uploaded, where an output's dims may be formulas of
 * symbolic input dims (`floor((H - 3)/2) + 1`); these are the numbers they came to. Names not
 * found, or with a dim that is not a number, are left out.
 */
export function boundShapes(ir: string | undefined, names: string[]): Record<string, number[]> {
  const out: Record<string, number[]> = {};
  if (!ir) return out;
  const want = new Set(names);
  const lines = ir.split("\n");
  const header = /^graph @[^(]*\((.*)\) \{$/.exec(lines[0] ?? "");
  for (const m of (header?.[1] ?? "").matchAll(/%([^:,\s]+): [a-z]+\d*\[([^\]]*)\]/g)) {
    const dims = dimsOf(m[2]);
    if (want.has(m[1]) && dims) out[m[1]] = dims;
  }
  for (const line of lines) {
    const m = /^ {2}%([^\s=]+) = .* : [a-z]+\d*\[([^\]]*)\](?: \{)?(?:\s+\/\/.*)?$/.exec(line);
    if (!m || !want.has(m[1]) || out[m[1]]) continue;
    const dims = dimsOf(m[2]);
    if (dims) out[m[1]] = dims;
  }
  return out;
}
