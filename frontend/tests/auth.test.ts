/** Where signing in leads: the page the user came from, never back to the sign-in or sign-up form. */
import { describe, expect, it } from "vitest";
import { afterSignIn } from "../src/urlstate";

describe("after sign-in", () => {
  it("goes to the page the user came from", () => {
    expect(afterSignIn("/c/abc/kernels?x=1")).toBe("/c/abc/kernels?x=1");
    expect(afterSignIn("/")).toBe("/");
  });
  it("never back to an auth page, nor off the site", () => {
    for (const next of [undefined, "", "/signin", "/signin/", "/signin?next=%2Fsignin", "/signup#x", "//evil.example/", "https://evil.example/"]) {
      expect(afterSignIn(next)).toBe("/");
    }
  });
});
