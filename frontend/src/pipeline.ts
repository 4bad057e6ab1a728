/**
 * Pipeline text as the compiler writes it: `fold-constants,fuse-ops{max-group-size=16}`
 * (MLIR's pass-pipeline syntax without nesting). Commas inside `{...}` belong to the options.
 */

export interface PipelineEntry {
  name: string;
  /** The option text between the braces, without them; "" when there is none. */
  options: string;
}

/** Splits pipeline text into its passes; whitespace around entries is ignored. */
export function splitPipeline(text: string): PipelineEntry[] {
  const out: PipelineEntry[] = [];
  let depth = 0;
  let start = 0;
  const push = (end: number) => {
    const part = text.slice(start, end).trim();
    if (!part) return;
    const brace = part.indexOf("{");
    if (brace < 0) out.push({ name: part, options: "" });
    else out.push({ name: part.slice(0, brace).trim(), options: part.slice(brace + 1, part.lastIndexOf("}")).trim() });
  };
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c === "{") depth++;
    else if (c === "}") depth = Math.max(0, depth - 1);
    else if (c === "," && depth === 0) {
      push(i);
      start = i + 1;
    }
  }
  push(text.length);
  return out;
}
