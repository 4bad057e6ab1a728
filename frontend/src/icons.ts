/**
 * Icons drawn as inline SVG, never as emoji: Debian's Chromium without an emoji font (fonts-noto-color-emoji)
 * draws the speech-balloon emoji (U+1F4AC) as an empty box. An icon is decorative (`aria-hidden`); whatever carries it says in words what it
 * is (its text, or an `aria-label` / `title` on the button), so it reads the same to a screen reader.
 */
const SVG_NS = "http://www.w3.org/2000/svg";

/** A speech bubble (the comment icon), 1em square, in the text's colour. */
export function commentIcon(): SVGSVGElement {
  const el = document.createElementNS(SVG_NS, "svg");
  el.setAttribute("class", "icon icon-comment");
  el.setAttribute("viewBox", "0 0 16 16");
  el.setAttribute("width", "1em");
  el.setAttribute("height", "1em");
  el.setAttribute("aria-hidden", "true");
  el.setAttribute("focusable", "false");
  const path = document.createElementNS(SVG_NS, "path");
  path.setAttribute("d", "M2.5 2.5h11a1 1 0 0 1 1 1v6.5a1 1 0 0 1-1 1H7l-3.5 3v-3h-1a1 1 0 0 1-1-1V3.5a1 1 0 0 1 1-1z");
  path.setAttribute("fill", "none");
  path.setAttribute("stroke", "currentColor");
  path.setAttribute("stroke-width", "1.5");
  path.setAttribute("stroke-linejoin", "round");
  el.appendChild(path);
  return el;
}

/** "<bubble> n": an open-thread count (the words for it go in the holder's title or aria-label). */
export function commentCount(n: number): DocumentFragment {
  const f = document.createDocumentFragment();
  f.append(commentIcon(), String(n));
  return f;
}

/** `count threads` in words: "1 open comment thread", "3 open comment threads". */
export function threadWords(count: number): string {
  return `${count} open comment thread${count === 1 ? "" : "s"}`;
}
