/**
 * "Not found", as the app says it: the header every page has (the Prism brand linking to the start
 * page, the user menu) over one message naming what was not found and a link to the start page.
 * Shown for an address no page of the app has (the server answers it with the app and status 404)
 * and for an API 404 a page surfaces (an unknown or invisible compilation: HTTP 404 or WebSocket 4404).
 */
import { h } from "../dom";
import { linkTo } from "../router";
import { currentUser } from "../reviewapi";
import { userMenu } from "./auth";

/** The header of a page that has no header of its own: brand (home) on the left, user menu on the right. */
export function siteHeader(): HTMLElement {
  return h("header", { class: "page-header" }, linkTo(h("a", { class: "brand" }, "Prism"), { page: "start" }), h("span", { class: "spacer" }), userMenu());
}

/**
 * The message: "Not found: <what>" (e.g. `what` = "the page /no/such/path", "compilation “abc”"),
 * an optional line saying why that may be, and "Go to the start page".
 */
export function notFoundBody(what: string, detail?: string, opts: { signIn?: boolean } = {}): HTMLElement {
  return h("main", { class: "not-found", role: "alert" },
    h("h1", { class: "not-found-title" }, `Not found: ${what}`),
    detail ? h("p", { class: "not-found-detail muted" }, detail) : null,
    opts.signIn ? signInHint() : null,
    h("p", null, linkTo(h("a", { class: "home-link" }, "Go to the start page"), { page: "start" })));
}

/**
 * For a visitor who is not signed in: "If it was shared with you, sign in" with a link back here
 * after signing in. Shown whoever asked and whatever the id (a missing and a private compilation
 * read the same: the page never says which); hidden once the user menu knows someone is signed in.
 */
function signInHint(): HTMLElement {
  const next = `/signin?next=${encodeURIComponent(location.pathname + location.search)}`;
  const el = h("p", { class: "not-found-sign-in", hidden: true },
    "If it was shared with you, ", h("a", { class: "sign-in-link", href: next }, "sign in"), " to see it: a private compilation shows only to its owner and team.");
  void currentUser().then((me) => { el.hidden = me.user !== null; });
  return el;
}

/** The whole page: the header, then the message (sets the document title). */
export function notFoundPage(what: string, detail?: string): HTMLElement {
  document.title = "Not found — Prism";
  return h("div", { class: "not-found-page" }, siteHeader(), notFoundBody(what, detail));
}
