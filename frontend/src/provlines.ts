/**
 * The CodeMirror side of provenance (provenance.ts): a line decoration field the kernels pane sets
 * to the lines related to the selected one, and a click handler reporting the clicked line.
 */
import { StateEffect, StateField, type Extension } from "@codemirror/state";
import { Decoration, EditorView, type DecorationSet } from "@codemirror/view";

const setRelated = StateEffect.define<readonly number[]>();

const related = StateField.define<DecorationSet>({
  create: () => Decoration.none,
  update(deco, tr) {
    for (const e of tr.effects) {
      if (e.is(setRelated)) {
        const lines = [...new Set(e.value)].filter((n) => n >= 1 && n <= tr.state.doc.lines).sort((a, b) => a - b);
        return Decoration.set(lines.map((n) => Decoration.line({ class: "prov-related" }).range(tr.state.doc.line(n).from)));
      }
    }
    return deco.map(tr.changes);
  },
  provide: (f) => EditorView.decorations.from(f),
});

/**
 * The extension: related-line marks, `onLine(line)` with the 1-based line clicked and, when given,
 * `onHover(line)` with the line under the pointer (null when it leaves the text), once per line entered.
 */
export function provenanceLines(onLine: (line: number) => void, onHover?: (line: number | null) => void): Extension {
  let last: number | null = null;
  const hover = (line: number | null) => {
    if (line === last) return;
    last = line;
    onHover?.(line);
  };
  return [related, EditorView.domEventHandlers({
    click(e, v) {
      const pos = v.posAtCoords({ x: e.clientX, y: e.clientY });
      if (pos !== null) onLine(v.state.doc.lineAt(pos).number);
      return false;
    },
    mousemove(e, v) {
      if (!onHover) return false;
      const pos = v.posAtCoords({ x: e.clientX, y: e.clientY }, false);
      hover(v.state.doc.lineAt(pos).number);
      return false;
    },
    mouseleave() {
      hover(null);
      return false;
    },
  })];
}

/**
 * Marks `lines` (1-based) as related in `view`; `scroll` true scrolls the first into view, "reveal"
 * does so only when none of them is in view (a hovered line in another text).
 */
export function showRelated(view: EditorView, lines: readonly number[], scroll: boolean | "reveal" = false): void {
  const effects: StateEffect<unknown>[] = [setRelated.of(lines)];
  const inDoc = lines.filter((n) => n >= 1 && n <= view.state.doc.lines);
  const inView = (n: number) => {
    const b = view.lineBlockAt(view.state.doc.line(n).from);
    const s = view.scrollDOM;
    return b.top >= s.scrollTop && b.bottom <= s.scrollTop + s.clientHeight;
  };
  if (inDoc.length && (scroll === true || (scroll === "reveal" && !inDoc.some(inView)))) {
    effects.push(EditorView.scrollIntoView(view.state.doc.line(Math.min(...inDoc)).from, { y: "center" }));
  }
  view.dispatch({ effects });
}
