/**
 * Start page: upload a model (drag and drop or picker, with progress) or pick a sample; bind
 * the input shapes; choose a target and a pipeline; compile.
 */
import { api, ApiError, uploadCalibration, uploadModel, type ModelMeta, type PassInfo, type Pipeline, type Sample, type Target } from "../api";
import { emptyState, h, replace } from "../dom";
import { count, fmtBytes, fmtShape } from "../format";
import { linkTo, navigate } from "../router";
import { prefill, readRanges, readShapes, readValues, valueInputs } from "../shapes";
import { readTuneBudget } from "../tuning";
import { clearPlaces, placeRequestError } from "../requesterror";
import { pipelineForm } from "./pipelineform";
import { currentUser } from "../reviewapi";
import { FORM_PRECISIONS, precisionPipeline } from "../precision";

function errorText(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

const READY = "on this server";

/**
 * The sample cards: each a short title, its input shapes and whether it is on this server yet; the
 * long note the light_* samples share (why their weights are random) once, under the cards. A click
 * marks the card chosen (and, once fetched, on this server), the others not.
 */
function sampleCards(samples: Sample[], use: (s: Sample, card: HTMLElement) => Promise<void>): HTMLElement[] {
  const cards = samples.map((s) => {
    const note = h("span", { class: "sample-note muted" }, (s.cached ?? s.available) ? READY : "downloaded on first use");
    const b = h("button", { class: "sample", dataset: { sample: s.name }, "aria-pressed": "false", title: [s.description, s.source].filter(Boolean).join("\n") },
      h("span", { class: "sample-name" }, s.name),
      h("span", { class: "sample-desc" }, String(s.title ?? s.description ?? "")),
      s.weights ? h("span", { class: "sample-weights muted" }, String(s.weights)) : null,
      note,
      s.input_shapes && Object.keys(s.input_shapes).length ? h("span", { class: "sample-shapes muted" }, Object.entries(s.input_shapes).map(([k, v]) => `${k}${fmtShape(v)}`).join(" ")) : null);
    b.addEventListener("click", () => {
      for (const c of cards) c.setAttribute("aria-pressed", String(c === b));
      b.classList.add("busy");
      b.disabled = true;
      use(s, b).then(() => replace(note, READY), () => b.setAttribute("aria-pressed", "false")).finally(() => (b.disabled = false));
    });
    return b;
  });
  const shared = samples.filter((s) => s.weights === "seeded random weights");
  const footnote = shared.length
    ? h("p", { class: "gallery-note muted" }, `${shared.map((s) => s.name).join(", ")}: the onnx package's test models. Their shipped weights are all 0.02, which gives every image the same output, so Prism serves them with seeded random weights: the same file every time, and outputs that depend on the input, so that the check against ONNX Runtime means something.`)
    : null;
  return footnote ? [...cards, footnote] : cards;
}

export function startPage(): HTMLElement {
  const fileInput = h("input", { type: "file", accept: ".onnx", class: "file-input", "aria-label": "ONNX model file" });
  const bar = h("progress", { max: 1, value: 0, class: "upload-progress", hidden: true });
  const upMsg = h("p", { class: "upload-message", role: "status" });
  const drop = h("div", { class: "dropzone", tabindex: "0" },
    h("p", null, h("strong", null, "Drop an ONNX model here"), " or ", h("label", { class: "linkish" }, "choose a file", fileInput)),
    bar, upMsg);
  const gallery = h("div", { class: "gallery" }, h("p", { class: "muted" }, "Loading samples…"));
  const configure = h("section", { class: "configure", hidden: true });
  const recent = h("section", { class: "recent", hidden: true });
  const el = h("main", { class: "start" },
    h("section", { class: "hero" }, h("h1", null, "Prism"), h("p", null, "Upload an ONNX model, choose a target and a pass pipeline, and watch it compile: the IR after every pass, the fusion graph, each kernel's loop IR, LLVM IR and assembly, timings against ONNX Runtime, and accuracy.")),
    h("section", { class: "upload" }, h("h2", null, "1. Model"), drop, h("h3", null, "or a sample"), gallery),
    configure,
    recent);

  api.recent().then((list) => {
    if (!list.length) return;
    recent.hidden = false;
    const picked: string[] = [];
    const compareBtn = h("button", { class: "btn compare-selected", disabled: true }, "Compare the two selected");
    compareBtn.addEventListener("click", () => picked.length === 2 && navigate({ page: "compare", ids: [picked[0], picked[1]] }));
    const pick = (id: string, box: HTMLInputElement) => {
      const at = picked.indexOf(id);
      if (box.checked && at < 0) picked.push(id);
      if (!box.checked && at >= 0) picked.splice(at, 1);
      compareBtn.disabled = picked.length !== 2;
    };
    replace(recent, h("h2", null, "Recent compilations"), h("table", { class: "grid" },
      h("thead", null, h("tr", null, h("th", null, ""), h("th", null, "model"), h("th", null, "target"), h("th", null, "pipeline"), h("th", null, "status"), h("th", null, "created"))),
      h("tbody", null, ...list.slice(0, 12).map((c) => h("tr", null,
        h("td", null, (() => {
          const box = h("input", { type: "checkbox", "aria-label": `select ${c.id} to compare` });
          box.addEventListener("change", () => pick(c.id, box));
          return box;
        })()),
        h("td", null, linkTo(h("a", null, c.model?.name ?? c.id), { page: "compilation", id: c.id, view: "summary" })),
        h("td", null, c.target),
        h("td", null, h("code", null, String(c.requested_pipeline ?? c.pipeline))),
        h("td", null, h("span", { class: `status-badge ${c.status}` }, c.status)),
        h("td", { class: "muted" }, typeof c.created_at === "string" ? new Date(c.created_at).toLocaleString() : ""),
      )))), compareBtn);
  }, () => undefined);

  let targets: Target[] = [];
  let pipelines: Pipeline[] = [];
  let passes: PassInfo[] = [];
  const catalog = Promise.all([api.targets(), api.pipelines(), api.passes()]).then(([t, p, ps]) => {
    targets = t;
    pipelines = p;
    passes = ps;
  });

  const chosen = async (model: ModelMeta, sampleShapes?: Record<string, (number | string | null)[]>) => {
    try {
      await catalog;
    } catch (e) {
      replace(configure, h("p", { class: "error" }, `The compiler's targets and passes could not be loaded: ${errorText(e)}`));
      configure.hidden = false;
      return;
    }
    showConfigure(model, sampleShapes ?? model.default_input_shapes ?? undefined);
  };

  const upload = (file: File) => {
    bar.hidden = false;
    bar.value = 0;
    replace(upMsg, `Uploading ${file.name} (${fmtBytes(file.size)})…`);
    upMsg.className = "upload-message";
    const { done } = uploadModel(file, (f) => (bar.value = f));
    done.then(
      (m) => {
        bar.value = 1;
        replace(upMsg, `Uploaded ${m.name}.`);
        void chosen(m);
      },
      (e) => {
        bar.hidden = true;
        upMsg.className = "upload-message error";
        replace(upMsg, e instanceof ApiError && e.status === 413 ? `Too large: ${e.message}` : errorText(e));
      },
    );
  };
  drop.addEventListener("keydown", (e) => {
    if (e.key === "Enter" || e.key === " ") {
      e.preventDefault();
      fileInput.click();
    }
  });
  fileInput.addEventListener("change", () => {
    const f = fileInput.files?.[0];
    if (f) upload(f);
  });
  drop.addEventListener("dragover", (e) => {
    e.preventDefault();
    drop.classList.add("over");
  });
  drop.addEventListener("dragleave", () => drop.classList.remove("over"));
  drop.addEventListener("drop", (e) => {
    e.preventDefault();
    drop.classList.remove("over");
    const f = e.dataTransfer?.files?.[0];
    if (f) upload(f);
  });

  api.samples().then(
    (samples: Sample[]) => {
      if (samples.length === 0) return replace(gallery, emptyState("This server has no sample models."));
      replace(gallery, ...sampleCards(samples, (s, card) => {
        replace(upMsg, `Preparing sample ${s.name}…`);
        upMsg.className = "upload-message";
        return api.useSample(s.name).then(
          (m) => {
            replace(upMsg, `Sample ${m.name} is ready.`);
            void chosen(m, s.input_shapes);
          },
          (e) => {
            upMsg.className = "upload-message error";
            replace(upMsg, errorText(e));
            throw e;
          },
        ).finally(() => card.classList.remove("busy"));
      }));
    },
    (e) => replace(gallery, h("p", { class: "error" }, `Samples could not be loaded: ${errorText(e)}`)),
  );

  function showConfigure(model: ModelMeta, shapes?: Record<string, (number | string | null)[]>) {
    const fields: Record<string, HTMLInputElement[]> = {};
    const offered = valueInputs(model.inputs);
    const valueFields: Record<string, HTMLInputElement> = Object.fromEntries(offered.map((inp) => [inp.name,
      h("input", { class: "value", size: 8, placeholder: "value", "aria-label": `${inp.name} value`, title: `Bind a value (a constant of the compiled model): it decides ${inp.value_uses!.join("; ")}` })]));
    const inputRows = model.inputs.map((inp) => {
      const pre = prefill(inp, shapes?.[inp.name]);
      fields[inp.name] = (inp.shape ?? []).map((d, i) =>
        h("input", { class: "dim", value: pre[i], size: 5, inputmode: "numeric", placeholder: typeof d === "string" && d ? d : "?", "aria-label": `${inp.name} dim ${i}`, title: typeof d === "string" ? `symbolic dim ${d}` : `dim ${i}` }));
      return h("tr", null, h("td", null, h("code", null, inp.name)), h("td", null, inp.dtype), h("td", { class: "muted" }, fmtShape(inp.shape)), h("td", { class: "dims" }, ...fields[inp.name].flatMap((f, i) => (i ? [" × ", f] : [f]))),
        offered.length ? h("td", { class: "value-cell" }, valueFields[inp.name] ?? "") : null);
    });
    // A symbolic dim means the same size wherever it appears: typing one fills the others.
    const bySymbol = new Map<string, HTMLInputElement[]>();
    model.inputs.forEach((inp) => (inp.shape ?? []).forEach((d, i) => {
      if (typeof d === "string" && d) bySymbol.set(d, [...(bySymbol.get(d) ?? []), fields[inp.name][i]]);
    }));
    for (const group of bySymbol.values()) {
      for (const f of group) f.addEventListener("input", () => group.forEach((g) => g !== f && (g.value = f.value)));
    }
    const targetSel = h("select", { class: "target", "aria-label": "Target" }, ...targets.map((t) =>
      h("option", { value: t.name }, `${t.name} — ${t.runnable ? "timed here" : "code only"}`)));
    const targetNote = h("p", { class: "muted target-note" });
    const showTarget = () => {
      const t = targets.find((x) => x.name === targetSel.value);
      const features = t?.features ? t.features.split(",").filter(Boolean) : [];
      targetNote.title = features.join(" ");
      replace(targetNote, t ? `${t.triple} · cpu ${t.cpu || "generic"}${features.length ? ` · ${features.length} CPU features` : ""} · ${t.runnable ? "runs and is timed on this server" : "code is emitted but not run here"}${t.note ? ` — ${t.note}` : ""}` : "");
    };
    targetSel.addEventListener("change", showTarget);
    if (targets.some((t) => t.name === "host")) targetSel.value = "host";
    showTarget();
    const pipe = pipelineForm(pipelines, passes);
    const visibility = h("select", { class: "visibility-choice", "aria-label": "Visibility" },
      h("option", { value: "unlisted" }, "unlisted — anyone with the link"),
      h("option", { value: "public" }, "public — listed"),
      h("option", { value: "private", disabled: true }, "private — you and your teams (sign in)"));
    void currentUser().then((me) => {
      if (me.user) visibility.querySelector<HTMLOptionElement>("option[value=private]")!.disabled = false;
    });
    const threadsField = h("input", { type: "number", min: "1", step: "1", class: "threads", "aria-label": "Threads", placeholder: "all the worker's CPUs" });
    const threadsNote = h("span", { class: "muted" }, " the compiled model's parallel loops and ONNX Runtime beside it run on this many threads");
    const tuneField = h("input", { type: "number", min: "1", step: "any", class: "tune-budget", "aria-label": "Tune budget in seconds", placeholder: "no tuning", size: 8 });
    const tuneNote = h("span", { class: "muted" }, " seconds of auto-tuning first: schedules searched and measured on the workers, kept in the tuning database every later compilation uses");
    const rangeField = h("input", { class: "dim-ranges", size: 12, placeholder: "N=1..8", "aria-label": "Dim range", title: "One compilation for every size of a dim: write its name (e.g. N) in a shape field above and its range here" });
    const precisionSel = h("select", { class: "precision-choice", "aria-label": "Precision" }, ...FORM_PRECISIONS.map((p) =>
      h("option", { value: p }, p === "fp32" ? "fp32 — as the pipeline says" : `${p} — quantize{dtype=${p}} before fuse-ops`)));
    const calibrationField = h("input", { type: "file", accept: ".npz", class: "calibration-file", "aria-label": "Calibration data" });
    const calibrationRow = h("div", { class: "field calibration", hidden: true }, h("label", null, "Calibration "), calibrationField,
      h("span", { class: "muted" }, " optional .npz, one array per input, samples along the first axis (without it: seeded random inputs, whose ranges mean little)"));
    precisionSel.addEventListener("change", () => { calibrationRow.hidden = precisionSel.value === "fp32"; });
    const submit = h("button", { class: "btn primary compile" }, "Compile");
    const msg = h("p", { class: "submit-message", role: "status" });
    // a refused request's message by the field it names (requesterror.placeRequestError)
    const places: Record<string, HTMLElement> = Object.fromEntries(["input_shapes", "input_values", "target", "calibration", "threads", "tune_budget_s", "dim_ranges"]
      .map((f) => [f, h("p", { class: "field-error error", role: "alert", hidden: true, dataset: { field: f } })]));
    submit.addEventListener("click", async () => {
      msg.className = "submit-message error";
      clearPlaces(places);
      let input_shapes: Record<string, (number | string)[]>;
      let input_values: Record<string, number[]>;
      let dim_ranges: Record<string, [number, number]>;
      try {
        input_values = readValues(offered, Object.fromEntries(Object.entries(valueFields).map(([k, f]) => [k, f.value])));
        dim_ranges = readRanges(rangeField.value);
        const shaped = model.inputs.filter((i) => !(i.name in input_values)); // a bound input's shape comes with its value
        input_shapes = readShapes(shaped, Object.fromEntries(Object.entries(fields).map(([k, v]) => [k, v.map((f) => f.value)])), Object.keys(dim_ranges));
      } catch (e) {
        return replace(msg, errorText(e));
      }
      const threadsText = threadsField.value.trim();
      const threads = threadsText === "" ? null : Number(threadsText);
      if (threads !== null && !(Number.isInteger(threads) && threads >= 1)) return replace(msg, `threads must be a positive integer, got ${threadsText}`);
      let tune_budget_s: number | null;
      try {
        tune_budget_s = readTuneBudget(tuneField.value);
      } catch (e) {
        return replace(msg, errorText(e));
      }
      const problem = pipe.localProblem();
      if (problem) return replace(msg, problem);
      let pipeline: string;
      try {
        pipeline = precisionPipeline(pipe.value(), precisionSel.value);
      } catch (e) {
        return replace(msg, errorText(e));
      }
      submit.disabled = true;
      msg.className = "submit-message";
      replace(msg, "Submitting…");
      try {
        const file = precisionSel.value !== "fp32" ? calibrationField.files?.[0] : undefined;
        const calibration = file ? (await uploadCalibration(file)).id : null;
        const options = { ...(threads !== null ? { threads } : {}), ...(calibration !== null ? { calibration } : {}) };
        const c = await api.compile({ model: model.id, target: targetSel.value, pipeline, input_shapes, ...(Object.keys(input_values).length ? { input_values } : {}), ...(Object.keys(dim_ranges).length ? { dim_ranges } : {}), visibility: visibility.value as "private" | "unlisted" | "public", ...(Object.keys(options).length ? { options } : {}), ...(tune_budget_s !== null ? { tune_budget_s } : {}) });
        navigate({ page: "compilation", id: c.id, view: "summary" });
      } catch (e) {
        submit.disabled = false;
        msg.className = "submit-message error";
        replace(msg, e instanceof ApiError ? placeRequestError(e.status, e.field, e.message, places, (m) => pipe.serverProblem(m)) : errorText(e));
      }
    });
    replace(configure,
      h("h2", null, "2. Inputs, target and pipeline"),
      h("p", null, h("strong", { class: "model-name" }, model.name), ` · ${fmtBytes(model.size)} · opset ${model.opset ?? "?"}`, model.node_count ? ` · ${count(model.node_count, "node")}` : "", " · ", h("code", { class: "muted" }, model.sha256.slice(0, 12))),
      h("table", { class: "inputs" }, h("thead", null, h("tr", null, h("th", null, "input"), h("th", null, "dtype"), h("th", null, "model shape"), h("th", null, "compile for"), offered.length ? h("th", { title: "Inputs whose value decides an If, a trip count or a shape: a value binds them as constants" }, "value") : null)), h("tbody", null, ...inputRows)),
      places.input_shapes, places.input_values,
      h("div", { class: "field" }, h("label", null, "Target "), targetSel, targetNote),
      places.target,
      pipe.el,
      h("div", { class: "field" }, h("label", null, "Precision "), precisionSel),
      calibrationRow,
      places.calibration,
      h("div", { class: "field" }, h("label", null, "Threads "), threadsField, threadsNote),
      places.threads,
      h("div", { class: "field" }, h("label", null, "Tune for "), tuneField, tuneNote),
      places.tune_budget_s,
      h("div", { class: "field" }, h("label", null, "Dim range "), rangeField, h("span", { class: "muted" }, " optional: a dim name in a shape field (e.g. N) and its range, one artifact for every size")),
      places.dim_ranges,
      h("div", { class: "field" }, h("label", null, "Visibility "), visibility),
      h("div", { class: "field" }, submit, msg));
    configure.hidden = false;
    configure.scrollIntoView({ behavior: "smooth", block: "start" });
  }

  return el;
}
