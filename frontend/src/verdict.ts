/**
 * The accuracy verdict and the storage types, as text for the summary pane and the compare page.
 *
 * A `model.verified` event is in one of three states (events.ts `ModelVerified`): the outputs
 * match ONNX Runtime, they differ, or the comparison did not run (`verified: false`, `passed:
 * null`: ONNX Runtime could not run the model, say no CPU kernel for an op in bfloat16). A run that
 * did not verify is never called "differ". `model.storage` (events.ts `StorageSummary`) says which
 * inputs and outputs are stored narrow and computed wider. Everything here returns plain strings;
 * the panes turn them into text nodes (dom.ts), never HTML.
 */
import type { ModelVerified, OutputVerification, StorageSummary } from "./events";
import { fmtSci, plural } from "./format";

export type VerdictKind = "passed" | "differ" | "not-verified";

/** The state of a verification; `passed: null` without `verified` also counts as not verified. */
export function verdictKind(v: ModelVerified): VerdictKind {
  if (v.verified === false || v.passed === null || v.passed === undefined) return "not-verified";
  return v.passed ? "passed" : "differ";
}

export interface VerdictText {
  kind: VerdictKind;
  /** One line, e.g. "✔ outputs match ONNX Runtime". */
  headline: string;
  /** Why the comparison did not run (not-verified only), without the "not verified: " prefix. */
  reason: string | null;
  /** The errors and tolerances (verified only). */
  detail: string | null;
  /** Remarks on how the reference ran, as sent. */
  notes: string[];
}

const HEADLINE: Record<VerdictKind, string> = {
  passed: "✔ outputs match ONNX Runtime",
  differ: "✘ outputs differ from ONNX Runtime",
  "not-verified": "○ not verified against ONNX Runtime",
};

/** The reason a run did not verify: its `message` less a leading "not verified:". */
export function notVerifiedReason(v: ModelVerified): string {
  const m = (v.message ?? "").replace(/^\s*not verified\s*:?\s*/i, "").trim();
  return m || "no reason given";
}

export function describeVerification(v: ModelVerified): VerdictText {
  const kind = verdictKind(v);
  const notes = Array.isArray(v.notes) ? v.notes.map(String) : [];
  if (kind === "not-verified") return { kind, headline: HEADLINE[kind], reason: notVerifiedReason(v), detail: null, notes };
  const detail = `max abs error ${fmtSci(v.max_abs_error)} · max rel error ${fmtSci(v.max_rel_error)} · rtol ${fmtSci(v.rtol)} · ${headlineAtol(v)}`;
  return { kind, headline: HEADLINE[kind], reason: null, detail, notes };
}

/**
 * The absolute tolerance a comparison applied. The compiler scales each output's nominal `atol` by
 * the output's largest magnitude and keeps it above a floor (child.py `_compare`:
 * `atol_effective = max(atol * max|y|, floor)`, `scale` = max|y|), so the applied value is
 * `atol_effective`. `nominal` is the short rule ("2.50e-3 × max|y|"), `explained` adds the numbers
 * ("2.50e-3 × max|y| with max|y| 1.63e+1", ", raised to the floor 1.00e-6" when the floor won).
 * Logs from before `atol_effective` existed give the nominal atol as applied and "" for the rest.
 */
export function appliedAtol(o: Pick<OutputVerification, "atol" | "scale" | "atol_effective">): { applied: string; nominal: string; explained: string } {
  if (typeof o.atol_effective !== "number" || typeof o.atol !== "number") return { applied: fmtSci(o.atol), nominal: "", explained: "" };
  const nominal = `${fmtSci(o.atol)} × max|y|`;
  let explained = nominal;
  if (typeof o.scale === "number") {
    explained += ` with max|y| ${fmtSci(o.scale)}`;
    if (o.atol * o.scale < o.atol_effective) explained += `, raised to the floor ${fmtSci(o.atol_effective)}`;
  }
  return { applied: fmtSci(o.atol_effective), nominal, explained };
}

/** "atol 4.07e-2 applied (2.50e-3 × max|y| with max|y| 1.63e+1)" with one output, the loosest applied with several. */
function headlineAtol(v: ModelVerified): string {
  const outs = Object.values(v.outputs ?? {}).filter((o) => typeof o.atol_effective === "number");
  if (outs.length === 0) return `atol ${fmtSci(v.atol)}`;
  if (outs.length === 1 && Object.keys(v.outputs ?? {}).length === 1) {
    const a = appliedAtol(outs[0]);
    return `atol ${a.applied} applied (${a.explained})`;
  }
  const loosest = Math.max(...outs.map((o) => o.atol_effective as number));
  return `atol up to ${fmtSci(loosest)} applied (each output's atol × its max|y|)`;
}

/**
 * One output's row: name, verdict, max abs, max rel, rtol, the atol applied, storage type ("" when
 * not narrow), and how the applied atol came from the nominal one, short and with its numbers
 * (`appliedAtol`; "" for old logs).
 */
export type OutputRow = [name: string, verdict: string, maxAbs: string, maxRel: string, rtol: string, atol: string, storage: string, atolNominal: string, atolExplained: string];

function outputVerdict(o: OutputVerification): string {
  const v = o.passed ? "match" : "differ";
  return o.message ? `${v}: ${o.message}` : v;
}

/** The per-output comparisons, in the order the compiler sent them (none when not verified). */
export function outputRows(v: ModelVerified): OutputRow[] {
  if (verdictKind(v) === "not-verified" || !v.outputs) return [];
  return Object.entries(v.outputs).map(([name, o]) => {
    const a = appliedAtol(o);
    return [name, outputVerdict(o), fmtSci(o.max_abs_error), fmtSci(o.max_rel_error), fmtSci(o.rtol), a.applied, o.storage ?? "", a.nominal, a.explained];
  });
}

/** The compare page's one-cell verdict: "✔ match (max abs 1.00e-6)", "✘ differ (...)", "not verified (<reason>)" or "–". */
export function shortVerdict(v: ModelVerified | undefined): string {
  if (!v) return "–";
  const kind = verdictKind(v);
  if (kind === "not-verified") return `not verified (${notVerifiedReason(v)})`;
  return `${kind === "passed" ? "✔ match" : "✘ differ"} (max abs ${fmtSci(v.max_abs_error)})`;
}

/**
 * The page header's verification badge beside the status (a compilation whose outputs differ still
 * "succeeded": the badge is where that shows): `null` before a `model.verified` event.
 */
export function headerVerdict(v: ModelVerified | undefined): { kind: VerdictKind; text: string; title: string } | null {
  if (!v) return null;
  const kind = verdictKind(v);
  const text = kind === "passed" ? "verified" : kind === "differ" ? "verification failed" : "not verified";
  const title = kind === "not-verified" ? `not verified: ${notVerifiedReason(v)}` : `${HEADLINE[kind]} (max abs error ${fmtSci(v.max_abs_error)})`;
  return { kind, text, title };
}

/**
 * One line per (storage, compute) pair, in order of first appearance, e.g.
 * "float16 storage, float32 compute: input x; outputs y, z". Empty without narrow values.
 */
export function storageLines(s: StorageSummary | undefined | null): string[] {
  if (!s || !Array.isArray(s.values)) return [];
  const groups = new Map<string, { inputs: string[]; outputs: string[] }>();
  for (const v of s.values) {
    const key = storageKind(v.storage, v.compute);
    const g = groups.get(key) ?? { inputs: [], outputs: [] };
    (v.role === "output" ? g.outputs : g.inputs).push(v.name);
    groups.set(key, g);
  }
  return [...groups].map(([key, g]) => {
    const parts = [];
    if (g.inputs.length) parts.push(`${plural(g.inputs.length, "input")} ${g.inputs.join(", ")}`);
    if (g.outputs.length) parts.push(`${plural(g.outputs.length, "output")} ${g.outputs.join(", ")}`);
    return `${key}: ${parts.join("; ")}`;
  });
}

function storageKind(storage: string, compute: string): string {
  return `${storage} storage, ${compute} compute`;
}

/** The storage kinds alone, e.g. "float16 storage, float32 compute"; "–" without narrow values. */
export function storageKinds(s: StorageSummary | undefined | null): string {
  if (!s || !Array.isArray(s.values) || s.values.length === 0) return "–";
  return [...new Set(s.values.map((v) => storageKind(v.storage, v.compute)))].join("; ");
}

/** The storage notes as sent ("float16 storage computed in float32 ..."). */
export function storageNotes(s: StorageSummary | undefined | null): string[] {
  return s && Array.isArray(s.notes) ? s.notes.map(String) : [];
}
