// @vitest-environment happy-dom
/**
 * No emoji anywhere in the app: Debian's Chromium without an emoji font (fonts-noto-color-emoji) draws them
 * as empty boxes. Every character outside the Basic Multilingual Plane (U+10000 and up: the emoji blocks) in
 * the app's source is a defect; icons are inline SVG (icons.ts) beside words or an aria-label.
 */
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { commentCount, commentIcon, threadWords } from "../src/icons";

function files(dir: string): string[] {
  return readdirSync(dir).flatMap((n) => {
    const p = join(dir, n);
    return statSync(p).isDirectory() ? files(p) : /\.(ts|css|html)$/.test(n) ? [p] : [];
  });
}

describe("icons", () => {
  it("the app's source and page hold no character outside the Basic Multilingual Plane", () => {
    const root = join(__dirname, "..");
    const found = [...files(join(root, "src")), join(root, "index.html")].flatMap((p) =>
      readFileSync(p, "utf8").split("\n").flatMap((line, i) => [...line].filter((c) => (c.codePointAt(0) ?? 0) > 0xffff).map((c) => `${p}:${i + 1} U+${(c.codePointAt(0) ?? 0).toString(16).toUpperCase()}`)));
    expect(found).toEqual([]);
  });

  it("the comment icon is a decorative SVG; a count is the icon and the number, named in words", () => {
    const icon = commentIcon();
    expect(icon.tagName.toLowerCase()).toBe("svg");
    expect(icon.getAttribute("aria-hidden")).toBe("true");
    expect(icon.querySelector("path")?.getAttribute("stroke")).toBe("currentColor");
    const holder = document.createElement("span");
    holder.append(commentCount(3));
    expect(holder.querySelector("svg.icon-comment")).not.toBeNull();
    expect(holder.textContent).toBe("3");
    expect([threadWords(1), threadWords(3)]).toEqual(["1 open comment thread", "3 open comment threads"]);
  });
});
