// @vitest-environment happy-dom
/** The router in a DOM (happy-dom): old `?view=` links become paths in place; back/forward give the views back. */
import { describe, expect, it } from "vitest";
import { currentView, navigate, normalizeLocation, onNavigate } from "../src/router";
import type { View } from "../src/urlstate";

describe("router", () => {
  it("replaces an old ?view= link with the view's path, without a new history entry", () => {
    history.replaceState(null, "", "/c/abc?view=remarks&pass=fuse-ops");
    const before = history.length;
    normalizeLocation();
    expect(location.pathname + location.search).toBe("/c/abc/remarks?pass=fuse-ops");
    expect(history.length).toBe(before);
    expect(currentView()).toEqual({ page: "compilation", id: "abc", view: "remarks", pass: "fuse-ops" });
  });

  it("leaves a canonical path alone", () => {
    history.replaceState(null, "", "/c/abc/kernels");
    normalizeLocation();
    expect(location.pathname + location.search).toBe("/c/abc/kernels");
  });

  it("pushes paths for tabs and gives them back on back", async () => {
    history.replaceState(null, "", "/c/abc");
    const seen: View[] = [];
    const off = onNavigate((v) => seen.push(v));
    navigate({ page: "compilation", id: "abc", view: "kernels" });
    expect(location.pathname).toBe("/c/abc/kernels");
    navigate({ page: "compilation", id: "abc", view: "remarks", kind: "missed" });
    expect(location.pathname + location.search).toBe("/c/abc/remarks?kind=missed");
    const popped = new Promise((r) => window.addEventListener("popstate", r, { once: true }));
    history.back();
    await popped;
    await new Promise((r) => setTimeout(r, 0));
    expect(location.pathname).toBe("/c/abc/kernels");
    expect(seen.at(-1)).toEqual({ page: "compilation", id: "abc", view: "kernels" });
    off();
  });
});
