/**
 * Pipeline text as the compiler writes it: `fixed-point(inline-control-flow,unroll-rnn),fold-constants,fuse-ops{max-group-size=16}`
 * (MLIR's pass-pipeline syntax; compiler/passes/pipeline.py). Commas inside `{...}` belong to the
 * options; a `fixed-point{...}(a,b)` group's passes are entries of their own, marked with the group.
 */

export interface PipelineEntry {
  name: string;
  /** The option text between the braces, without them; "" when there is none. */
  options: string;
  /** The group the pass is in (`fixed-point`, which repeats its passes until nothing changes). */
  group?: { name: string; options: string };
}

/** One pass entry `name{options}` (no group) as its name and option text. */
export function entryOf(part: string): PipelineEntry {
  const brace = part.indexOf("{");
  if (brace < 0) return { name: part, options: "" };
  return { name: part.slice(0, brace).trim(), options: part.slice(brace + 1, part.lastIndexOf("}")).trim() };
}

/** Splits text at the commas outside braces and parentheses (each part trimmed, empty parts dropped). */
export function topLevelParts(text: string): string[] {
  const out: string[] = [];
  let depth = 0;
  let start = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c === "{" || c === "(") depth++;
    else if (c === "}" || c === ")") depth = Math.max(0, depth - 1);
    else if (c === "," && depth === 0) {
      out.push(text.slice(start, i));
      start = i + 1;
    }
  }
  out.push(text.slice(start));
  return out.map((p) => p.trim()).filter(Boolean);
}

/** Splits pipeline text into its passes (a group's in order, once each); whitespace around entries is ignored. */
export function splitPipeline(text: string): PipelineEntry[] {
  const out: PipelineEntry[] = [];
  for (const part of topLevelParts(text)) {
    const paren = part.indexOf("(");
    if (paren < 0) {
      out.push(entryOf(part));
      continue;
    }
    const group = entryOf(part.slice(0, paren).trim());
    const body = part.slice(paren + 1, part.lastIndexOf(")") < 0 ? part.length : part.lastIndexOf(")"));
    for (const p of topLevelParts(body)) out.push({ ...entryOf(p), group: { name: group.name, options: group.options } });
  }
  return out;
}
