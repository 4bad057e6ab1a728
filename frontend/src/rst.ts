/**
 * The reStructuredText of the compiler's docstrings (pass documentation from GET /api/passes) as
 * DOM nodes: the subset those docstrings use (docutils' spec, "reStructuredText Markup
 * Specification"): paragraphs, `- ` bullet lists (with continuation lines), literal blocks (a
 * paragraph ending in `::`, or lines indented deeper than the text before them), and the inline
 * markup ``literal``, *emphasis*, **strong** and `:role:`text`` (shown as code). Everything is
 * text nodes: nothing from a docstring is parsed as HTML.
 */
import { h } from "./dom";

export type Block = { kind: "p"; text: string } | { kind: "ul"; items: string[] } | { kind: "pre"; text: string };

const indentOf = (line: string) => line.length - line.trimStart().length;

/** Splits a docstring into blocks (paragraphs, bullet lists, literal blocks). */
export function rstBlocks(doc: string): Block[] {
  const lines = doc.replace(/\r\n?/g, "\n").split("\n");
  const out: Block[] = [];
  let i = 0;
  let literalNext = false;
  while (i < lines.length) {
    if (lines[i].trim() === "") {
      i++;
      continue;
    }
    const base = indentOf(lines[i]);
    if (literalNext || base > 0) {
      const block: string[] = [];
      while (i < lines.length && (lines[i].trim() === "" || indentOf(lines[i]) >= base)) block.push(lines[i++].slice(base));
      while (block.length && block[block.length - 1].trim() === "") block.pop();
      out.push({ kind: "pre", text: block.join("\n") });
      literalNext = false;
      continue;
    }
    if (/^[-*] /.test(lines[i].trimStart())) {
      const items: string[] = [];
      while (i < lines.length && lines[i].trim() !== "" && indentOf(lines[i]) >= base) {
        const t = lines[i].trimStart();
        if (indentOf(lines[i]) === base && /^[-*] /.test(t)) items.push(t.slice(2).trim());
        else if (items.length) items[items.length - 1] += ` ${t.trim()}`;
        i++;
      }
      out.push({ kind: "ul", items });
      continue;
    }
    const para: string[] = [];
    while (i < lines.length && lines[i].trim() !== "" && !(para.length && /^[-*] /.test(lines[i].trimStart()) && indentOf(lines[i]) === base)) {
      if (para.length && indentOf(lines[i]) > base) break;
      para.push(lines[i++].trim());
    }
    let text = para.join(" ");
    if (text.endsWith("::")) {
      literalNext = true;
      text = text.endsWith(" ::") ? text.slice(0, -3) : text.slice(0, -1);
    }
    if (text) out.push({ kind: "p", text });
  }
  return out;
}

/** Inline markup as nodes: ``code``, `:role:`code``, **strong**, *em*; the rest as text. */
export function rstInline(text: string): (Node | string)[] {
  const out: (Node | string)[] = [];
  const re = /``(.+?)``|:[\w.-]+:`([^`]+)`|\*\*(.+?)\*\*|\*([^*\s][^*]*?)\*|`([^`]+)`/g;
  let at = 0;
  for (const m of text.matchAll(re)) {
    if (m.index > at) out.push(text.slice(at, m.index));
    if (m[1] !== undefined) out.push(h("code", null, m[1]));
    else if (m[2] !== undefined) out.push(h("code", null, m[2].replace(/^[~!]/, "")));
    else if (m[3] !== undefined) out.push(h("strong", null, m[3]));
    else if (m[4] !== undefined) out.push(h("em", null, m[4]));
    else out.push(h("code", null, m[5]));
    at = m.index + m[0].length;
  }
  if (at < text.length) out.push(text.slice(at));
  return out;
}

/** A docstring rendered: its blocks as <p>, <ul> and <pre>. */
export function rstNodes(doc: string): HTMLElement[] {
  return rstBlocks(doc).map((b) =>
    b.kind === "p" ? h("p", null, ...rstInline(b.text))
      : b.kind === "ul" ? h("ul", null, ...b.items.map((t) => h("li", null, ...rstInline(t))))
        : h("pre", null, b.text));
}

/**
 * The first paragraph of a docstring as plain words (markup removed), for a one-line summary; a
 * leading "``name``: " (the pass docstrings' own name) is left out.
 */
export function rstSummary(doc: string): string {
  const first = rstBlocks(doc).find((b) => b.kind === "p");
  if (!first || first.kind !== "p") return "";
  return rstInline(first.text.replace(/^``[\w.-]+``:\s*/, "")).map((n) => (typeof n === "string" ? n : n.textContent ?? "")).join("");
}
