/**
 * Where the start page shows a refused compile request (a 400 of POST /api/compilations): by the
 * field the error payload names (`field`, or the one key of DRF's `detail`: `ErrorOut` in
 * explorer/compilations/api/serializers.py), in the form's words rather than the API's.
 */

/** The form's label of each request field an error may name. */
export const FIELD_LABELS: Record<string, string> = {
  input_shapes: "Input shapes",
  input_values: "Input values",
  dim_ranges: "Dim range",
  pipeline: "Pipeline",
  target: "Target",
  calibration: "Calibration",
  threads: "Threads",
  tune_budget_s: "Tune for",
  options: "Options",
};

/** The request field an API error body names, or null (the model itself, or no body). */
export function errorField(body: unknown): string | null {
  if (!body || typeof body !== "object") return null;
  const o = body as Record<string, unknown>;
  if (typeof o.field === "string") return o.field;
  if (o.detail && typeof o.detail === "object" && !Array.isArray(o.detail)) {
    const keys = Object.keys(o.detail);
    if (keys.length === 1) return keys[0];
  }
  return null;
}

/**
 * The compiler's message for a form user: its hints in API syntax (`input_shapes={"images": ["N", 3,
 * 224, 224]}`, `dim_ranges={'N': (MIN, MAX)}`, `input_values=...`) said as what to write in the form.
 */
export function formWords(message: string): string {
  return message
    .replace(/\s*\(e\.g\. input_shapes=\{[^)]*\]\}\)/g, " (write it in a shape field of the inputs table)")
    .replace(/(?:give one )?with dim_ranges=\{['"]([^'"]+)['"]: \(MIN, MAX\)\}/g, (_m, d: string) => `give it a range in the Dim range field (${d}=MIN..MAX)`)
    .replace(/\binput_shapes gives\b/g, "the shape field gives")
    .replace(/\binput_shapes names\b/g, "the shape fields name")
    .replace(/\binput_values=\{[^}]*\}/g, "the value field");
}

/**
 * Shows a failed submit's message where it belongs: a 400 that names `pipeline` under the pipeline
 * text (`pipeline`), one that names another field with a place in `places` (field -> element) there,
 * anything else only under the Compile button. Every place is cleared first. Returns the text for
 * under the Compile button (which, when the message is shown by its field, says where).
 */
export function placeRequestError(status: number, field: string | null, message: string, places: Record<string, HTMLElement>, pipeline: (message: string) => void): string {
  clearPlaces(places);
  const words = formWords(message);
  const at = status === 400 ? field : null;
  if (at === "pipeline") {
    pipeline(words);
    return "Not compiled: the pipeline has a problem (shown under it).";
  }
  const place = at !== null ? places[at] : undefined;
  if (!place || at === null) return words;
  place.textContent = words;
  place.hidden = false;
  return `Not compiled: see ${FIELD_LABELS[at] ?? at} above.`;
}

/** Hides and empties every place of `placeRequestError` (a new submit). */
export function clearPlaces(places: Record<string, HTMLElement>): void {
  for (const el of Object.values(places)) {
    el.hidden = true;
    el.textContent = "";
  }
}
