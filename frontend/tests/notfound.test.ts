// @vitest-environment happy-dom
/** "Not found" as the app says it: the header every page has, what was not found, and a link home. */
import { describe, expect, it, vi } from "vitest";
import { notFoundBody, notFoundPage } from "../src/pages/notfound";
import { auth } from "../src/reviewapi";

// the header's user menu asks who is signed in: nobody, here (no server)
vi.spyOn(auth, "me").mockResolvedValue({ user: null, teams: [], signup_enabled: true, require_sign_in: false });

describe("not found", () => {
  it("has the app's header (brand to the start page, user menu) over the message and a link home", async () => {
    const el = notFoundPage("the page /no/such/page", "The address may be mistyped.");
    expect(el.querySelector(".page-header a.brand")?.getAttribute("href")).toBe("/");
    expect(el.querySelector(".page-header .user-menu")).not.toBeNull();
    await vi.waitFor(() => expect(el.querySelector(".page-header .user-menu a.sign-in")).not.toBeNull());
    expect(el.querySelector(".not-found-title")?.textContent).toBe("Not found: the page /no/such/page");
    expect(el.querySelector(".not-found-detail")?.textContent).toBe("The address may be mistyped.");
    expect(el.querySelector(".not-found a.home-link")?.getAttribute("href")).toBe("/");
    expect(document.title).toBe("Not found — Prism");
  });

  it("shows a name literally, whatever characters it holds", () => {
    const el = notFoundBody("compilation “<img src=x onerror=alert(1)>”");
    expect(el.querySelector("img")).toBeNull();
    expect(el.querySelector(".not-found-title")?.textContent).toBe("Not found: compilation “<img src=x onerror=alert(1)>”");
    expect(el.querySelector(".not-found-detail")).toBeNull();
  });

  it("a compilation's page offers a signed-out visitor a sign-in link back here, the same words for any id", async () => {
    history.replaceState(null, "", "/c/ygh4q2ed/graph");
    const a = notFoundBody("compilation “ygh4q2ed”", "no such compilation you may see", { signIn: true });
    await vi.waitFor(() => expect(a.querySelector<HTMLElement>(".not-found-sign-in")?.hidden).toBe(false));
    expect(a.querySelector(".not-found-sign-in a.sign-in-link")?.getAttribute("href")).toBe(`/signin?next=${encodeURIComponent("/c/ygh4q2ed/graph")}`);
    history.replaceState(null, "", "/c/zzzzzzzz");
    const b = notFoundBody("compilation “zzzzzzzz”", "no such compilation you may see", { signIn: true });
    await vi.waitFor(() => expect(b.querySelector<HTMLElement>(".not-found-sign-in")?.hidden).toBe(false));
    // a missing and a private id read the same: nothing tells them apart
    expect(b.querySelector(".not-found-sign-in")?.textContent).toBe(a.querySelector(".not-found-sign-in")?.textContent);
    // an unknown page has no sign-in line
    expect(notFoundBody("the page /x").querySelector(".not-found-sign-in")).toBeNull();
  });
});
