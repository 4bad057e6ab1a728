/**
 * The explorer service's HTTP API and WebSocket, in one place (issue 4). Every error the
 * server reports as `{error: "..."}` reaches the caller as an `ApiError` with that message.
 */
import type { CompileEvent, Dim, TensorInfo, UnknownEvent } from "./events";
import { parseEvent } from "./events";
import { errorField } from "./requesterror";

export interface ModelMeta {
  id: string;
  sha256: string;
  name: string;
  size: number;
  opset: number | null;
  inputs: TensorInfo[];
  outputs: TensorInfo[];
  node_count?: number;
  /** Shapes the server suggests for the inputs (samples), `{name: [ints]}`. */
  default_input_shapes?: Record<string, Dim[]> | null;
  source?: string;
  [extra: string]: unknown;
}

export interface Target {
  name: string;
  triple: string;
  cpu: string;
  features: string;
  runnable: boolean;
  note: string;
}

export interface PassOption {
  name: string;
  type: string;
  default: unknown;
  doc: string;
}

export interface PassInfo {
  name: string;
  doc: string;
  options: PassOption[];
}

export interface Pipeline {
  name: string;
  text: string;
}

export interface Sample {
  name: string;
  /** A short title for a gallery card, e.g. "ResNet-50 image classifier". */
  title?: string;
  description?: string;
  /** "seeded random weights" or "trained weights". */
  weights?: string;
  /** True when the model file is already on this server (older servers say `available`). */
  cached?: boolean;
  available?: boolean;
  input_shapes?: Record<string, Dim[]>;
  source?: string;
  [extra: string]: unknown;
}

export interface Compilation {
  id: string;
  status: "queued" | "running" | "succeeded" | "failed" | string;
  target: string;
  pipeline: string;
  input_shapes: Record<string, number[]>;
  /** Inputs bound to values (constants of the compiled model), `{}` when none. */
  input_values?: Record<string, number[]>;
  /** `{N: [min, max]}`: one artifact for every size of N (input_shapes name it), `{}` when none. */
  dim_ranges?: Record<string, [number, number]>;
  model: Partial<ModelMeta> & { name?: string };
  created?: string;
  [extra: string]: unknown;
}

export interface CreateCompilation {
  model: string;
  target: string;
  pipeline: string;
  /** Dims are sizes, or the name of a dim in `dim_ranges`. */
  input_shapes: Record<string, (number | string)[]>;
  /** `{N: [min, max]}`: one artifact serving every size of the dim N named in input_shapes. */
  dim_ranges?: Record<string, [number, number]>;
  /** `{input: [values]}`: binds inputs to values (an If on one folds at compile time). */
  input_values?: Record<string, number[]>;
  /** private (owner and teams), unlisted (default: anyone with the link), public (listed). */
  visibility?: "private" | "unlisted" | "public";
  /** Seconds of auto-tuning before compiling (positive); absent: none. */
  tune_budget_s?: number;
  /** verify/benchmark booleans, `calibration` (the sha256 of uploaded calibration data) and `threads`
   * (the compiled model's and ONNX Runtime's threads; absent: all the worker's CPUs). */
  options?: Record<string, unknown>;
}

/** Where a tuned kernel's schedule came from (GET /api/compilations/<id>/tuning `records`). */
export interface TuningRecordInfo {
  kernel: string;
  median_us: number;
  default_us: number | null;
  trials: number;
  threads: number | null;
  /** "this run": found by this compilation's tuning; "database": found before, by any compilation. */
  source: "this run" | "database";
  /** The finder's compilation id, or null when the requester may not see it. */
  found_in: string | null;
  found_by: { username: string } | null;
  created_at: string;
}

/** GET /api/compilations/<id>/tuning. */
export interface TuningInfo {
  id: string;
  /** Seconds of tuning asked for; null: not a tuning compilation. */
  budget_s: number | null;
  status: string;
  stop_requested_at: string | null;
  /** The requester may stop it (its owner or the owner's teams; an anonymous one's own browser session). */
  can_stop: boolean;
  queue: string | null;
  /** Who measured: batches, candidates and busy seconds per worker. */
  workers: Record<string, { batches: number; candidates: number; busy_s: number }>;
  /** The best record of every workload its kernels looked up, by workload key. */
  records: Record<string, TuningRecordInfo>;
}

export class ApiError extends Error {
  constructor(
    message: string,
    readonly status: number,
    /** The request field the error body names (`requesterror.errorField`), or null. */
    readonly field: string | null = null,
  ) {
    super(message);
  }
}

function messageFor(status: number, body: unknown, fallback: string): string {
  if (body && typeof body === "object") {
    const o = body as Record<string, unknown>;
    if (typeof o.error === "string") return o.error;
    if (typeof o.detail === "string") return o.detail;
    if (typeof o.message === "string") return o.message;
  }
  if (status === 413) return "The file is larger than the server accepts.";
  return fallback;
}

/**
 * Django's CSRF token, when its cookie is set (a user signed in to /admin/ has a session, and
 * then Django REST framework checks CSRF on unsafe requests).
 */
function csrfHeader(): Record<string, string> {
  const m = typeof document === "undefined" ? null : /(?:^|;\s*)csrftoken=([^;]+)/.exec(document.cookie);
  return m ? { "X-CSRFToken": decodeURIComponent(m[1]) } : {};
}

export async function request<T>(method: string, url: string, body?: unknown): Promise<T> {
  let res: Response;
  const headers: Record<string, string> = { Accept: "application/json", ...(method === "GET" ? {} : csrfHeader()) };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  try {
    res = await fetch(url, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch {
    throw new ApiError("The server cannot be reached.", 0);
  }
  const text = await res.text();
  let data: unknown = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = null;
  }
  if (!res.ok) throw new ApiError(messageFor(res.status, data, `${method} ${url} failed: HTTP ${res.status}`), res.status, errorField(data));
  return data as T;
}

/** One download of a compilation (GET /api/compilations/<id>/artifacts). */
export interface Artifact {
  name: string;
  /** "report", "model" (the ONNX model after a pass), "kernels", "object", "shared-object", "trace", "reproducer". */
  kind: string;
  media_type: string;
  description: string;
  url: string;
}

export interface ArtifactList {
  artifacts: Artifact[];
  /** `{name: reason}` for the standard artifacts this compilation does not have. */
  missing: Record<string, string>;
}

export const api = {
  artifacts: (id: string) => request<ArtifactList>("GET", `/api/compilations/${encodeURIComponent(id)}/artifacts`),
  targets: () => request<Target[]>("GET", "/api/targets"),
  passes: () => request<PassInfo[]>("GET", "/api/passes"),
  pipelines: () => request<Pipeline[]>("GET", "/api/pipelines"),
  /** The server's check of pipeline text: its expansion, or an ApiError naming the problem. */
  validatePipeline: (pipeline: string) => request<{ pipeline: string }>("POST", "/api/pipelines/validate", { pipeline }),
  samples: () => request<Sample[]>("GET", "/api/samples"),
  useSample: (name: string) => request<ModelMeta>("POST", `/api/samples/${encodeURIComponent(name)}/model`),
  compile: (req: CreateCompilation) => request<{ id: string; url: string; cached?: boolean }>("POST", "/api/compilations", req),
  /** The most recent compilations on this server, newest first. */
  recent: () => request<Compilation[]>("GET", "/api/compilations"),
  compilation: (id: string) => request<Compilation>("GET", `/api/compilations/${encodeURIComponent(id)}`),
  tuning: (id: string) => request<TuningInfo>("GET", `/api/compilations/${encodeURIComponent(id)}/tuning`),
  /** Stops the tuning (the search ends after its batch, keeping what it found). */
  stopTuning: (id: string) => request<TuningInfo>("POST", `/api/compilations/${encodeURIComponent(id)}/tuning/stop`),
  /** Stored events with seq > after, one page (`{events, complete}`; at most 1,000 a page). */
  events: async (id: string, after: number): Promise<{ events: (CompileEvent | UnknownEvent)[]; complete: boolean }> => {
    const data = await request<unknown>("GET", `/api/compilations/${encodeURIComponent(id)}/events?after=${after}`);
    const obj = data && typeof data === "object" && !Array.isArray(data) ? (data as { events?: unknown; complete?: unknown }) : null;
    const list = Array.isArray(data) ? data : Array.isArray(obj?.events) ? (obj.events as unknown[]) : [];
    return { events: list.map(parseEvent), complete: obj?.complete === true };
  },
};

/**
 * Uploads calibration data (an ``.npz``: one array per graph input, samples along the leading axis) to
 * POST /api/calibrations; resolves to its id (the sha256 the compile request's ``options.calibration`` names).
 */
export async function uploadCalibration(file: File): Promise<{ id: string }> {
  const form = new FormData();
  form.append("data", file, file.name);
  let res: Response;
  try {
    res = await fetch("/api/calibrations", { method: "POST", headers: { Accept: "application/json", ...csrfHeader() }, body: form });
  } catch {
    throw new ApiError("The calibration upload did not reach the server.", 0);
  }
  let data: unknown = null;
  try {
    data = await res.json();
  } catch {
    data = null;
  }
  if (!res.ok) throw new ApiError(messageFor(res.status, data, `Calibration upload failed: HTTP ${res.status}`), res.status);
  return data as { id: string };
}

/** Uploads a model with progress (0..1) through XMLHttpRequest's upload events. */
export function uploadModel(file: File, onProgress: (fraction: number) => void): { done: Promise<ModelMeta>; abort: () => void } {
  const xhr = new XMLHttpRequest();
  const done = new Promise<ModelMeta>((resolve, reject) => {
    xhr.open("POST", "/api/models");
    xhr.setRequestHeader("Accept", "application/json");
    for (const [k, v] of Object.entries(csrfHeader())) xhr.setRequestHeader(k, v);
    xhr.upload.onprogress = (e) => {
      if (e.lengthComputable) onProgress(e.loaded / e.total);
    };
    xhr.onload = () => {
      let body: unknown = null;
      try {
        body = JSON.parse(xhr.responseText);
      } catch {
        body = null;
      }
      if (xhr.status >= 200 && xhr.status < 300) resolve(body as ModelMeta);
      else reject(new ApiError(messageFor(xhr.status, body, `Upload failed: HTTP ${xhr.status}`), xhr.status));
    };
    xhr.onerror = () => reject(new ApiError("The upload did not reach the server.", 0));
    xhr.onabort = () => reject(new ApiError("The upload was cancelled.", 0));
    const form = new FormData();
    form.append("model", file, file.name);
    xhr.send(form);
  });
  return { done, abort: () => xhr.abort() };
}

export interface EventFeed {
  close(): void;
}

export type FeedStatus = "live" | "reconnecting" | "waiting" | "closed";

/** WebSocket close code of a refused connection: over the server's `PRISM_WS_CONNECT_RATE`
 * (explorer/compilations/messages.py `CLOSE_TOO_MANY_REQUESTS`); the close reason ends "retry in N s". */
export const CLOSE_TOO_MANY_REQUESTS = 4429;

/**
 * The wait, in ms, that a 4429 close reason asks for ("...; retry in 12 s" -> 12000), or null when
 * the reason names none. At least 1 s, at most 10 min (a wrong or hostile reason cannot stop the feed).
 */
export function retryAfterMs(reason: string): number | null {
  const m = /retry in (\d+(?:\.\d+)?) ?s\b/.exec(reason);
  if (!m) return null;
  return Math.min(600_000, Math.max(1000, Math.ceil(Number(m[1]) * 1000)));
}

export interface FeedCallbacks {
  onEvent(e: CompileEvent | UnknownEvent): void;
  /** Connection state for the page's indicator; with "waiting", `detail` is the server's reason
   * (e.g. "too many WebSocket connections: ...; retry in 12 s") and the feed reconnects after it. */
  onStatus(s: FeedStatus, detail?: string): void;
  /** The highest seq the page holds, for `after=` on reconnect. */
  lastSeq(): number;
  /** True once the compilation has ended; the feed then stops reconnecting. */
  done(): boolean;
  /** The server does not know this compilation. */
  onMissing?(): void;
  /** Reading the stored events failed (the feed goes on trying over the WebSocket). */
  onError?(message: string): void;
}

/**
 * Follows a compilation's events: the stored ones from `/api/compilations/<id>/events`, then
 * `/ws/compilations/<id>/?after=<seq>` until the terminal event. On a dropped
 * connection it reconnects with the last seq it holds (back-off up to 10 s); when WebSockets
 * fail repeatedly it reads `/api/compilations/<id>/events?after=` instead. A close with code 4413
 * (the next event is over the server's WebSocket message limit) is answered the same way at once.
 * A close with 4429 (too many connections from this client) waits the time its reason names (a random
 * 0–20% more, so that a page's feeds do not return together), telling the page with "waiting".
 */
export function followEvents(id: string, cb: FeedCallbacks): EventFeed {
  let ws: WebSocket | null = null;
  let closed = false;
  let failures = 0;
  let timer: ReturnType<typeof setTimeout> | null = null;

  const schedule = (fn: () => void, ms: number) => {
    if (timer) clearTimeout(timer);
    timer = setTimeout(fn, ms);
  };

  const poll = async () => {
    if (closed) return;
    try {
      for (;;) {
        const page = await api.events(id, cb.lastSeq());
        page.events.forEach(cb.onEvent);
        if (page.events.length === 0 || page.complete || cb.done()) break;
      }
      if (cb.done()) {
        cb.onStatus("closed");
        return;
      }
    } catch (e) {
      if (e instanceof ApiError && e.status === 404) {
        cb.onStatus("closed");
        cb.onMissing?.();
        return;
      }
    }
    schedule(() => (failures % 3 === 0 ? connect() : void poll()), 1500);
  };

  const connect = () => {
    if (closed) return;
    const proto = location.protocol === "https:" ? "wss:" : "ws:";
    const url = `${proto}//${location.host}/ws/compilations/${encodeURIComponent(id)}/?after=${cb.lastSeq()}`;
    try {
      ws = new WebSocket(url);
    } catch {
      failures++;
      void poll();
      return;
    }
    ws.onopen = () => {
      failures = 0;
      cb.onStatus("live");
    };
    ws.onmessage = (m) => {
      try {
        const data: unknown = JSON.parse(String(m.data));
        (Array.isArray(data) ? data : [data]).map(parseEvent).forEach(cb.onEvent);
      } catch {
        /* not an event (e.g. a keep-alive); ignore */
      }
      if (cb.done()) {
        closed = true;
        ws?.close();
        cb.onStatus("closed");
      }
    };
    ws.onclose = (ev) => {
      ws = null;
      if (closed) return;
      if (ev.code === 4413) {
        // The next event is larger than a WebSocket message may be: read it (and what follows)
        // over HTTP, then reconnect after the last one read.
        failures = 0;
        void poll();
        return;
      }
      if (ev.code === 4404) {
        closed = true;
        cb.onStatus("closed");
        cb.onMissing?.();
        return;
      }
      if (cb.done()) {
        cb.onStatus("closed");
        return;
      }
      const wait = ev.code === CLOSE_TOO_MANY_REQUESTS ? retryAfterMs(ev.reason ?? "") : null;
      if (wait !== null) {
        // Refused for the connect rate: polling instead would only add load; come back when told.
        cb.onStatus("waiting", ev.reason);
        schedule(connect, wait * (1 + 0.2 * Math.random()));
        return;
      }
      failures++;
      cb.onStatus("reconnecting");
      if (failures >= 3) void poll();
      else schedule(connect, Math.min(10000, 500 * 2 ** failures));
    };
  };

  // Stored events come faster as JSON pages over HTTP than as one frame each; the WebSocket then
  // carries on from the last one (replaying anything stored meanwhile, then live events).
  const start = async () => {
    try {
      for (;;) {
        const page = await api.events(id, cb.lastSeq());
        if (closed) return;
        page.events.forEach(cb.onEvent);
        if (page.events.length === 0 || page.complete || cb.done()) break;
      }
    } catch (e) {
      if (e instanceof ApiError && e.status === 404) {
        closed = true;
        cb.onStatus("closed");
        cb.onMissing?.();
        return;
      }
      cb.onError?.(e instanceof Error ? e.message : String(e));
    }
    if (cb.done()) cb.onStatus("closed");
    else connect();
  };

  void start();
  return {
    close() {
      closed = true;
      if (timer) clearTimeout(timer);
      ws?.close();
    },
  };
}
