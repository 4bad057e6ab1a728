/**
 * URL state: every view of the app has a URL, parsed from and formatted to `location`.
 *
 *   /                                  start page
 *   /c/<id>                            compilation summary   (/c/<id>/summary is the same view)
 *   /c/<id>/kernels                    the kernels list
 *   /c/<id>/remarks                    the remarks           (?pass=<name>&kind=applied|missed|analysis filter them, ?remark=<n>:<r> marks remark r of pass n)
 *   /c/<id>/pass/<n>                   IR after pass n       (?diff=1 for the diff to pass n-1, ?line=<k> marks a line)
 *   /c/<id>/kernel/<name>              one kernel            (?tab=loop|llvm|opt|optdiff|asm, ?line=<k> marks a line, ?node=<name> selects an ONNX node,
 *                                                            ?panes=onnx,graph,loop,llvm,opt,asm the texts beside the tab; empty: none)
 *   /c/<id>/graph                      fusion graph          (?node=<name> selects a node)
 *   /c/<id>/comments                   the conversation      (?status=open|resolved|outdated|all&kind=<anchor kind>)
 *   /c/<id>/comments/<cid>             one comment's thread, beside its anchor (commentlink.ts)
 *   /signin, /signup                   sign in, create an account
 *   /compare/<a>...<b>                 two compilations side by side
 *
 * Names are percent-encoded in paths and queries, so any node or kernel name round-trips.
 * Links from before every view was a path (`/c/<id>?view=kernels`, `/c/<id>?view=remarks&pass=…`)
 * still parse to their view; `canonicalUrl` gives the path form the app replaces them with on load.
 */

import type { RemarkKind } from "./events";

const REMARK_KINDS: readonly string[] = ["applied", "missed", "analysis"];

export type KernelTab = "loop" | "llvm" | "opt" | "optdiff" | "asm";
export const KERNEL_TABS: readonly KernelTab[] = ["loop", "llvm", "opt", "optdiff", "asm"];
/**
 * A text that can be shown beside a kernel's tab (`?panes=`): the kernel's ONNX nodes as imported, the
 * final graph IR, or one of the kernel's own texts. Listed in source-to-machine order (the order the
 * panes stand in, left to right).
 */
export type PaneText = "onnx" | "graph" | "loop" | "llvm" | "opt" | "asm";
export const PANE_TEXTS: readonly PaneText[] = ["onnx", "graph", "loop", "llvm", "opt", "asm"];

/** `?panes=` text -> the panes it names (known ones, each once, in PANE_TEXTS order); null when absent. */
export function parsePanes(q: string | null): PaneText[] | null {
  if (q === null) return null;
  const named = new Set(q.split(","));
  return PANE_TEXTS.filter((t) => named.has(t));
}

export type View =
  | { page: "start" }
  | { page: "compilation"; id: string; view: "summary" }
  | { page: "compilation"; id: string; view: "remarks"; pass?: string; kind?: RemarkKind; remark?: string }
  | { page: "compilation"; id: string; view: "kernels" }
  | { page: "compilation"; id: string; view: "pass"; pass: number; diff: boolean; line?: number }
  | { page: "compilation"; id: string; view: "kernel"; kernel: string; tab: KernelTab; line?: number; node?: string; panes?: PaneText[] }
  | { page: "compilation"; id: string; view: "graph"; node: string | null }
  | { page: "compilation"; id: string; view: "comments"; comment?: number; status?: string; kind?: string }
  | { page: "signin"; next?: string }
  | { page: "signup"; next?: string }
  | { page: "compare"; ids: [string, string] }
  | { page: "notfound"; path: string };

export type CompilationView = Extract<View, { page: "compilation" }>;

function decode(s: string): string | null {
  try {
    return decodeURIComponent(s);
  } catch {
    return null;
  }
}

function remarksView(id: string, q: URLSearchParams): View {
  const pass = q.get("pass");
  const kind = q.get("kind");
  const remark = q.get("remark");
  return {
    page: "compilation", id, view: "remarks",
    ...(pass ? { pass } : {}),
    ...(kind && REMARK_KINDS.includes(kind) ? { kind: kind as RemarkKind } : {}),
    ...(remark && /^\d+:\d+$/.test(remark) ? { remark } : {}),
  };
}

/** Parses a path and query (`location.pathname`, `location.search`) into a view. */
export function parseUrl(pathname: string, search = ""): View {
  const q = new URLSearchParams(search);
  const parts = pathname.split("/").filter((p) => p !== "");
  if (parts.length === 0) return { page: "start" };
  if (parts.length === 1 && (parts[0] === "signin" || parts[0] === "signup")) {
    const next = q.get("next");
    return next && next.startsWith("/") && !next.startsWith("//") ? { page: parts[0], next } : { page: parts[0] };
  }
  if (parts[0] === "compare" && parts.length === 2) {
    const ids = (decode(parts[1]) ?? "").split("...");
    if (ids.length === 2 && ids.every((x) => /^[\w-]+$/.test(x))) return { page: "compare", ids: [ids[0], ids[1]] };
    return { page: "notfound", path: pathname };
  }
  if (parts[0] !== "c" || parts.length < 2) return { page: "notfound", path: pathname };
  const id = decode(parts[1]);
  if (id === null || id === "") return { page: "notfound", path: pathname };
  if (parts.length === 2) {
    // Before every view was a path: /c/<id>?view=kernels|remarks.
    const v = q.get("view");
    if (v === "kernels") return { page: "compilation", id, view: v };
    if (v === "remarks") return remarksView(id, q);
    return { page: "compilation", id, view: "summary" };
  }
  const kind = parts[2];
  if (parts.length === 3 && kind === "summary") return { page: "compilation", id, view: "summary" };
  if (parts.length === 3 && kind === "kernels") return { page: "compilation", id, view: "kernels" };
  if (parts.length === 3 && kind === "remarks") return remarksView(id, q);
  if (kind === "pass" && parts.length === 4 && /^\d+$/.test(parts[3])) {
    const line = q.get("line");
    const v: View = { page: "compilation", id, view: "pass", pass: Number(parts[3]), diff: q.get("diff") === "1" };
    return line !== null && /^[1-9]\d*$/.test(line) ? { ...v, line: Number(line) } : v;
  }
  if (kind === "kernel" && parts.length >= 4) {
    const kernel = decode(parts.slice(3).join("/"));
    if (kernel === null || kernel === "") return { page: "notfound", path: pathname };
    const t = q.get("tab");
    const tab: KernelTab = t !== null && (KERNEL_TABS as readonly string[]).includes(t) ? (t as KernelTab) : "loop";
    const line = q.get("line");
    const node = q.get("node");
    const panes = parsePanes(q.get("panes"));
    return { page: "compilation", id, view: "kernel", kernel, tab, ...(line !== null && /^[1-9]\d*$/.test(line) ? { line: Number(line) } : {}), ...(node ? { node } : {}), ...(panes ? { panes } : {}) };
  }
  if (kind === "comments" && (parts.length === 3 || (parts.length === 4 && /^\d+$/.test(parts[3])))) {
    const status = q.get("status");
    const akind = q.get("kind");
    return {
      page: "compilation", id, view: "comments",
      ...(parts.length === 4 ? { comment: Number(parts[3]) } : {}),
      ...(status ? { status } : {}),
      ...(akind ? { kind: akind } : {}),
    };
  }
  if (kind === "graph" && parts.length === 3) {
    const node = q.get("node");
    return { page: "compilation", id, view: "graph", node: node === null || node === "" ? null : node };
  }
  return { page: "notfound", path: pathname };
}

/** Formats a view as a path plus query; `parseUrl` of the result gives the view back. */
export function formatUrl(v: View): string {
  if (v.page === "start") return "/";
  if (v.page === "signin" || v.page === "signup") return `/${v.page}${v.next ? `?${new URLSearchParams({ next: v.next }).toString()}` : ""}`;
  if (v.page === "notfound") return v.path;
  if (v.page === "compare") return `/compare/${v.ids[0]}...${v.ids[1]}`;
  const base = `/c/${encodeURIComponent(v.id)}`;
  switch (v.view) {
    case "summary":
      return base;
    case "kernels":
      return `${base}/kernels`;
    case "remarks": {
      const q = new URLSearchParams();
      if (v.pass) q.set("pass", v.pass);
      if (v.kind) q.set("kind", v.kind);
      if (v.remark) q.set("remark", v.remark);
      const qs = q.toString();
      return `${base}/remarks${qs ? `?${qs}` : ""}`;
    }
    case "pass": {
      const q = new URLSearchParams();
      if (v.diff) q.set("diff", "1");
      if (v.line !== undefined) q.set("line", String(v.line));
      const qs = q.toString();
      return `${base}/pass/${v.pass}${qs ? `?${qs}` : ""}`;
    }
    case "kernel": {
      const q = new URLSearchParams();
      if (v.tab !== "loop") q.set("tab", v.tab);
      if (v.line !== undefined) q.set("line", String(v.line));
      if (v.node) q.set("node", v.node);
      if (v.panes) q.set("panes", v.panes.join(","));
      const qs = q.toString();
      return `${base}/kernel/${encodeURIComponent(v.kernel)}${qs ? `?${qs}` : ""}`;
    }
    case "comments": {
      const q = new URLSearchParams();
      if (v.status) q.set("status", v.status);
      if (v.kind) q.set("kind", v.kind);
      const qs = q.toString();
      return `${base}/comments${v.comment !== undefined ? `/${v.comment}` : ""}${qs ? `?${qs}` : ""}`;
    }
    case "graph":
      return v.node === null ? `${base}/graph` : `${base}/graph?${new URLSearchParams({ node: v.node }).toString()}`;
  }
}

export function sameView(a: View, b: View): boolean {
  return formatUrl(a) === formatUrl(b);
}

/**
 * The canonical URL of a location (path + query + hash), or null when it already is one: old
 * `?view=` links become paths, `/c/<id>/summary` and a trailing slash become `/c/<id>`, unknown
 * query parameters are dropped. Unknown paths are left alone (the not-found page shows them).
 */
export function canonicalUrl(pathname: string, search = "", hash = ""): string | null {
  const v = parseUrl(pathname, search);
  if (v.page === "notfound") return null;
  const url = formatUrl(v);
  return url === pathname + search ? null : url + hash;
}

/**
 * Where the app goes once the user is signed in: `next` (a path of this site) unless it is missing or
 * is the sign-in or sign-up page itself (a header link followed from one of them), then the start page.
 */
export function afterSignIn(next?: string): string {
  if (!next || !next.startsWith("/") || next.startsWith("//")) return "/";
  const path = next.split(/[?#]/)[0].replace(/\/+$/, "");
  return path === "/signin" || path === "/signup" ? "/" : next;
}
