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

/** The extension: related-line marks, and `onLine(line)` with the 1-based line clicked. */
export function provenanceLines(onLine: (line: number) => void): Extension {
  return [related, EditorView.domEventHandlers({
    click(e, v) {
      const pos = v.posAtCoords({ x: e.clientX, y: e.clientY });
      if (pos !== null) onLine(v.state.doc.lineAt(pos).number);
      return false;
    },
  })];
}

/** Marks `lines` (1-based) as related in `view`, scrolling the first into view when `scroll`. */
export function showRelated(view: EditorView, lines: readonly number[], scroll = false): void {
  const effects: StateEffect<unknown>[] = [setRelated.of(lines)];
  if (scroll && lines.length && lines[0] <= view.state.doc.lines) effects.push(EditorView.scrollIntoView(view.state.doc.line(lines[0]).from, { y: "center" }));
  view.dispatch({ effects });
}
