/**
 * History-backed navigation: every view change is a pushState (or replaceState), and
 * back/forward and reload give the view back through `parseUrl`.
 */
import { canonicalUrl, formatUrl, parseUrl, sameView, type View } from "./urlstate";

type Listener = (v: View) => void;
const listeners = new Set<Listener>();

export function currentView(): View {
  return parseUrl(location.pathname, location.search);
}

/**
 * Replaces a non-canonical URL (an old `/c/<id>?view=kernels` link, `/c/<id>/summary`) with the
 * view's path, in place (no new history entry), so copy-link and the tabs agree.
 */
export function normalizeLocation(): void {
  const url = canonicalUrl(location.pathname, location.search, location.hash);
  if (url !== null) history.replaceState(history.state, "", url);
}

export function navigate(v: View, opts: { replace?: boolean } = {}): void {
  if (sameView(v, currentView())) return;
  const url = formatUrl(v);
  if (opts.replace) history.replaceState(null, "", url);
  else history.pushState(null, "", url);
  emit();
}

export function onNavigate(fn: Listener): () => void {
  listeners.add(fn);
  return () => listeners.delete(fn);
}

function emit(): void {
  const v = currentView();
  for (const fn of [...listeners]) fn(v);
}

window.addEventListener("popstate", () => {
  normalizeLocation();
  emit();
});

/** Makes an <a> that navigates in-app on a plain click and stays a real link otherwise. */
export function linkTo(a: HTMLAnchorElement, v: View): HTMLAnchorElement {
  a.href = formatUrl(v);
  a.addEventListener("click", (e) => {
    if (e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
    e.preventDefault();
    navigate(v);
  });
  return a;
}
