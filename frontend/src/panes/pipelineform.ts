/**
 * Pipeline picker: presets (O0..O3) show their expansion; editing the text makes a custom
 * pipeline, checked as you type against the server's pass list (GET /api/passes), then by the
 * server itself (POST /api/pipelines/validate, which also checks option values); the server checks
 * it again on submit and its message is shown here.
 */
import { api, type PassInfo, type Pipeline } from "../api";
import { h, replace } from "../dom";
import { splitPipeline } from "../pipeline";
import { rstNodes, rstSummary } from "../rst";

/**
 * Names an unknown pass or option in `text`, or returns null when every name is known. A preset's name
 * (`presets`: O0..O3) stands for its passes, as the server's pipeline parser reads it (`O2,quantize{...}`).
 */
export function pipelineProblem(text: string, passes: PassInfo[], presets: string[] = []): string | null {
  if (passes.length === 0) return null;
  const entries = splitPipeline(text);
  const byName = new Map(passes.map((p) => [p.name, p]));
  for (const e of entries) {
    if (e.group && e.group.name !== "fixed-point") return `Unknown pass group “${e.group.name}” (groups: fixed-point).`;
    for (const kv of e.group?.options ? e.group.options.split(",") : []) {
      const key = kv.split("=")[0].trim();
      if (key && key !== "max-iterations") return `Group “fixed-point” has no option “${key}” (it has: max-iterations).`;
    }
    if (!e.group && !e.options && presets.includes(e.name)) continue;
    const p = byName.get(e.name);
    if (!p) return `Unknown pass “${e.name}”.`;
    if (!e.options) continue;
    for (const kv of e.options.split(",")) {
      const key = kv.split("=")[0].trim();
      if (key && !p.options.some((o) => o.name === key)) return `Pass “${e.name}” has no option “${key}” (it has: ${p.options.map((o) => o.name).join(", ") || "none"}).`;
    }
  }
  return null;
}

export interface PipelineForm {
  el: HTMLElement;
  /** What to send: the preset's name while unedited, else the text. */
  value(): string;
  localProblem(): string | null;
  serverProblem(message: string): void;
}

export function pipelineForm(presets: Pipeline[], passes: PassInfo[]): PipelineForm {
  const sel = h("select", { class: "pipeline-preset", "aria-label": "Pipeline preset" }, ...presets.map((p) => h("option", { value: p.name }, p.name)), h("option", { value: "" }, "custom"));
  const text = h("textarea", { class: "pipeline-text", rows: 3, spellcheck: false, "aria-label": "Pipeline text" });
  const note = h("p", { class: "pipeline-note muted" });
  const docs = h("details", { class: "pass-docs" }, h("summary", null, `${passes.length} passes available`),
    h("dl", null, ...passes.flatMap((p) => [
      h("dt", null, h("code", null, p.name), p.options.length ? h("span", { class: "muted" }, ` {${p.options.map((o) => `${o.name}=${JSON.stringify(o.default)}`).join(",")}}`) : ""),
      h("dd", null, h("details", { class: "pass-doc" }, h("summary", null, rstSummary(p.doc || "")), h("div", { class: "rst" }, ...rstNodes(p.doc || "")))),
    ])));
  const preset = () => presets.find((p) => p.name === sel.value);
  let asked = 0;
  const check = () => {
    const problem = pipelineProblem(text.value, passes, presets.map((p) => p.name));
    note.className = `pipeline-note ${problem ? "error" : "muted"}`;
    const p = preset();
    replace(note, problem ?? (p ? `${p.name} expands to ${splitPipeline(p.text).length} passes (listed in the text box; edit it for a custom pipeline).` : `${splitPipeline(text.value).length} passes.`));
    if (problem || p || !text.value.trim()) return;
    const mine = ++asked;
    api.validatePipeline(text.value.trim()).then(
      (ok) => {
        if (mine === asked) replace(note, `${splitPipeline(ok.pipeline).length} passes, checked by the server.`);
      },
      (err: unknown) => {
        if (mine !== asked) return;
        note.className = "pipeline-note error";
        replace(note, err instanceof Error ? err.message : String(err));
      },
    );
  };
  sel.addEventListener("change", () => {
    const p = preset();
    if (p) text.value = p.text;
    check();
  });
  let timer: ReturnType<typeof setTimeout> | undefined;
  text.addEventListener("input", () => {
    const p = preset();
    if (p && text.value.trim() !== p.text.trim()) sel.value = "";
    clearTimeout(timer);
    timer = setTimeout(check, 200);
  });
  const initial = presets.find((p) => p.name === "O2") ?? presets[0];
  if (initial) {
    sel.value = initial.name;
    text.value = initial.text;
  }
  check();
  return {
    el: h("div", { class: "field pipeline" }, h("label", null, "Pipeline "), sel, text, note, docs),
    value: () => preset()?.name ?? text.value.trim(),
    localProblem: () => pipelineProblem(text.value, passes, presets.map((p) => p.name)),
    serverProblem(message) {
      note.className = "pipeline-note error";
      replace(note, message);
    },
  };
}
