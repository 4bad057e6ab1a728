/**
 * Value types and node operands from printed graph IR (DESIGN.md "Graph IR": `%x: f32[1, 3, 64, 64]`
 * in a graph header or a group's `^args`, `%w = constant f32[4, 3, 3, 3] <digest …>`, and
 * `%y = Op(%x, %w) {attrs} : f32[1, 4, 31, 31]  // node`). Pure; the graph pane's node panel uses it
 * to list every input of a node with its type, weights and biases included.
 */

export interface ValueType {
  type: string;
  constant: boolean;
}

const TYPE = "[a-z]+\\d*\\[[^\\]]*\\]";

/** `{value name: {type, constant}}` for every value the IR declares. */
export function valueTypes(ir: string): Map<string, ValueType> {
  const out = new Map<string, ValueType>();
  for (const line of ir.split("\n")) {
    const c = new RegExp(`^\\s*%([^\\s=]+) = constant (${TYPE})`).exec(line);
    if (c) {
      out.set(c[1], { type: c[2], constant: true });
      continue;
    }
    for (const m of line.matchAll(new RegExp(`%([^\\s:,()=]+): (${TYPE})`, "g"))) if (!out.has(m[1])) out.set(m[1], { type: m[2], constant: false });
    const d = new RegExp(`^\\s*%([^\\s=,]+) = .* : (${TYPE})(?: \\{)?(?:\\s+//.*)?$`).exec(line);
    if (d && !out.has(d[1])) out.set(d[1], { type: d[2], constant: false });
  }
  return out;
}

/** The operand names of a node's IR line (`%y = Conv(%x, %w, %b) …` -> ["x", "w", "b"]), [] if none. */
export function nodeOperands(line: string): string[] {
  const m = /= [\w.:]+\(([^)]*)\)/.exec(line);
  if (!m) return [];
  return m[1].split(",").map((a) => a.trim()).filter((a) => a.startsWith("%")).map((a) => a.slice(1));
}
