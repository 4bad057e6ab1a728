/**
 * Helpers over printed graph IR (one node a line: `%name = Op(%a, %b) {attrs} : f32[1, 64]`).
 * Pure functions: the IR viewer, the graph pane and the tests use them.
 */

export type LineOp = { op: "same" | "add" | "del"; text: string };

/**
 * Line diff of two texts with Myers' O(ND) algorithm (E. Myers, "An O(ND) Difference Algorithm
 * and Its Variations", 1986). Returns the edit script in order: kept, added and deleted lines.
 */
export function diffLines(before: string, after: string): LineOp[] {
  const la = splitLines(before);
  const lb = splitLines(after);
  // Common head and tail are kept as they are; Myers runs on the middle only.
  let head = 0;
  while (head < la.length && head < lb.length && la[head] === lb[head]) head++;
  let tail = 0;
  while (tail < la.length - head && tail < lb.length - head && la[la.length - 1 - tail] === lb[lb.length - 1 - tail]) tail++;
  const same = (t: string): LineOp => ({ op: "same", text: t });
  const middle = myers(la.slice(head, la.length - tail), lb.slice(head, lb.length - tail));
  return [...la.slice(0, head).map(same), ...middle, ...la.slice(la.length - tail).map(same)];
}

function myers(a: string[], b: string[]): LineOp[] {
  const n = a.length;
  const m = b.length;
  const max = n + m;
  const offset = max + 1;
  const v = new Int32Array(2 * max + 3);
  const trace: Int32Array[] = [];
  let found = false;
  for (let d = 0; d <= max && !found; d++) {
    trace.push(v.slice());
    for (let k = -d; k <= d; k += 2) {
      let x = k === -d || (k !== d && v[offset + k - 1] < v[offset + k + 1]) ? v[offset + k + 1] : v[offset + k - 1] + 1;
      let y = x - k;
      while (x < n && y < m && a[x] === b[y]) {
        x++;
        y++;
      }
      v[offset + k] = x;
      if (x >= n && y >= m) {
        found = true;
        break;
      }
    }
  }
  // Backtrack through the saved frontiers.
  const ops: LineOp[] = [];
  let x = n;
  let y = m;
  for (let d = trace.length - 1; d >= 0; d--) {
    const vd = trace[d];
    const k = x - y;
    const prevK = k === -d || (k !== d && vd[offset + k - 1] < vd[offset + k + 1]) ? k + 1 : k - 1;
    const prevX = d === 0 ? 0 : vd[offset + prevK];
    const prevY = prevX - prevK;
    while (x > prevX && y > prevY) {
      ops.push({ op: "same", text: a[--x] });
      y--;
    }
    if (d === 0) break;
    if (x === prevX) ops.push({ op: "add", text: b[--y] });
    else ops.push({ op: "del", text: a[--x] });
  }
  while (x > 0 && y > 0) {
    ops.push({ op: "same", text: a[--x] });
    y--;
  }
  return ops.reverse();
}

export function splitLines(text: string): string[] {
  if (text === "") return [];
  const lines = text.split("\n");
  if (lines[lines.length - 1] === "") lines.pop();
  return lines;
}

export interface DiffStats {
  added: number;
  removed: number;
}

export function diffStats(before: string, after: string): DiffStats {
  let added = 0;
  let removed = 0;
  for (const o of diffLines(before, after)) {
    if (o.op === "add") added++;
    else if (o.op === "del") removed++;
  }
  return { added, removed };
}

/** The value names a line defines: `%a, %b = Split(...)` gives ["a", "b"]; quoted names unquoted. */
export function definedNames(line: string): string[] {
  const eq = findDefiningEquals(line);
  if (eq < 0) return [];
  return [...line.slice(0, eq).matchAll(VALUE_RE)].map((m) => unquote(m[1]));
}

const VALUE_RE = /%("(?:[^"\\]|\\.)*"|[^\s,=()]+)/g;

function unquote(s: string): string {
  if (s.startsWith('"') && s.endsWith('"')) {
    try {
      return JSON.parse(s) as string;
    } catch {
      return s.slice(1, -1);
    }
  }
  return s;
}

function findDefiningEquals(line: string): number {
  const t = line.trimStart();
  if (!t.startsWith("%")) return -1;
  let inQuote = false;
  for (let i = 0; i < line.length; i++) {
    const c = line[i];
    if (c === "\\" && inQuote) i++;
    else if (c === '"') inQuote = !inQuote;
    else if (!inQuote && c === "=" && line[i + 1] === " ") return i;
  }
  return -1;
}

/**
 * The 1-based line of `ir` that defines value or node `name`, or null. A node line defines its
 * outputs; ONNX node names often equal an output name, so the graph pane asks for outputs too.
 */
export function findDefiningLine(ir: string, names: string | string[]): number | null {
  const wanted = new Set(Array.isArray(names) ? names : [names]);
  const lines = splitLines(ir);
  // The printer writes the node's name as a trailing comment: `%r0 = Conv(...) : f32[...]  // conv1`.
  for (let i = 0; i < lines.length; i++) {
    const c = trailingComment(lines[i]);
    if (c !== null && wanted.has(c)) return i + 1;
  }
  for (let i = 0; i < lines.length; i++) {
    if (definedNames(lines[i]).some((n) => wanted.has(n))) return i + 1;
  }
  for (let i = 0; i < lines.length; i++) {
    for (const n of wanted) if (mentionsName(lines[i], n)) return i + 1;
  }
  return null;
}

/** The text after the last `  // ` of a node line (the node's name), or null. */
export function trailingComment(line: string): string | null {
  const i = line.lastIndexOf("  // ");
  return i < 0 ? null : line.slice(i + 5).trim();
}

function mentionsName(line: string, name: string): boolean {
  return line.includes(`"${name}"`) || line.includes(`%${name} `) || line.includes(`%${name},`) || line.includes(`%${name})`);
}

/** Names whose defining line is new or different in `after` compared with `before`. */
export function changedDefinitions(before: string, after: string): Set<string> {
  const old = new Map<string, string>();
  for (const l of splitLines(before)) for (const n of definedNames(l)) old.set(n, l);
  const out = new Set<string>();
  for (const l of splitLines(after)) for (const n of definedNames(l)) if (old.get(n) !== l) out.add(n);
  return out;
}

/**
 * The attributes of a printed node line, `{kernel_shape = [3, 3], pads = [1, 1, 1, 1]}`, as
 * `[name, value text]` pairs in order; [] when the line has none.
 */
export function parseAttributes(line: string): [string, string][] {
  const body = line.replace(/\s+\/\/ .*$/, "");
  const open = findAttrBrace(body);
  if (open < 0) return [];
  const out: [string, string][] = [];
  let depth = 0;
  let inQuote = false;
  let start = open + 1;
  for (let i = open + 1; i < body.length; i++) {
    const c = body[i];
    if (inQuote) {
      if (c === "\\") i++;
      else if (c === '"') inQuote = false;
      continue;
    }
    if (c === '"') inQuote = true;
    else if (c === "[" || c === "(" || c === "{") depth++;
    else if ((c === "]" || c === ")" || c === "}") && depth > 0) depth--;
    else if ((c === "," || c === "}") && depth === 0) {
      const part = body.slice(start, i);
      const eq = part.indexOf("=");
      if (eq > 0) out.push([part.slice(0, eq).trim(), part.slice(eq + 1).trim()]);
      start = i + 1;
      if (c === "}") break;
    }
  }
  return out;
}

/** Index of the `{` that opens a node's attributes: after the operand list's `)`, outside quotes. */
function findAttrBrace(line: string): number {
  let inQuote = false;
  let depth = 0;
  let sawCall = false;
  for (let i = 0; i < line.length; i++) {
    const c = line[i];
    if (inQuote) {
      if (c === "\\") i++;
      else if (c === '"') inQuote = false;
    } else if (c === '"') inQuote = true;
    else if (c === "(") depth++;
    else if (c === ")") {
      depth--;
      if (depth === 0) sawCall = true;
    } else if (c === "{" && depth === 0 && sawCall) return line.slice(i + 1).includes("=") ? i : -1;
    else if (c === ":" && depth === 0 && sawCall) return -1;
  }
  return -1;
}
