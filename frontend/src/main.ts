/** Entry: picks the page for the URL and keeps it in step with history navigation. */
import "./styles.css";
import { h, replace } from "./dom";
import { compilationPage, type CompilationPage } from "./pages/compilation";
import { comparePage, type ComparePage } from "./pages/compare";
import { authPage, userMenu } from "./pages/auth";
import { startPage } from "./panes/start";
import { currentView, normalizeLocation, onNavigate } from "./router";
import { notFoundPage } from "./pages/notfound";
import type { View } from "./urlstate";

const root = document.getElementById("app") ?? document.body;
let page: CompilationPage | null = null;
let compare: ComparePage | null = null;

function show(v: View): void {
  if (v.page !== "compare" || compare?.key !== v.ids.join("...")) {
    compare?.destroy();
    compare = null;
  }
  if (v.page === "compare") {
    page?.destroy();
    page = null;
    if (!compare) {
      compare = comparePage(v.ids);
      replace(root, compare.el);
      window.scrollTo(0, 0); // a new page opens at its top, not at the last page's scroll position
    }
    return;
  }
  if (v.page === "compilation") {
    if (page && page.id === v.id) {
      page.show(v);
      return;
    }
    page?.destroy();
    page = compilationPage(v);
    replace(root, page.el);
    window.scrollTo(0, 0);
    page.show(v);
    return;
  }
  page?.destroy();
  page = null;
  document.title = "Prism — AI compiler explorer";
  window.scrollTo(0, 0);
  if (v.page === "start") replace(root, h("div", { class: "top-bar" }, userMenu()), startPage());
  else if (v.page === "signin" || v.page === "signup") replace(root, authPage(v.page, v.next));
  else replace(root, notFoundPage(`the page ${v.path}`, "The address may be mistyped, or the page may have moved."));
}

normalizeLocation();
onNavigate(show);
show(currentView());
