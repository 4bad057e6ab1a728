/**
 * CodeMirror 6 wrappers: a read-only code viewer and a side-by-side diff (@codemirror/merge).
 * CodeMirror renders only the visible lines, so a 1,000-line IR per pass stays responsive.
 */
import { HighlightStyle, foldGutter, syntaxHighlighting, type LanguageSupport, type StreamLanguage } from "@codemirror/language";
import { MergeView } from "@codemirror/merge";
import { lineAlignedDiff } from "./linediff";
import { highlightSelectionMatches, search, searchKeymap } from "@codemirror/search";
import { EditorState, StateEffect, StateField, type Extension } from "@codemirror/state";
import { tags as t } from "@lezer/highlight";
import { Decoration, EditorView, highlightActiveLine, keymap, lineNumbers, type DecorationSet } from "@codemirror/view";

export type Lang = StreamLanguage<unknown> | LanguageSupport | null;

/** Colours for the token kinds the IR, LLVM IR and asm highlighters emit. */
const irHighlight = HighlightStyle.define([
  { tag: t.comment, color: "#8a8f98", fontStyle: "italic" },
  { tag: [t.keyword, t.controlKeyword], color: "#7c3aed", fontWeight: "600" },
  { tag: t.modifier, color: "#9333ea" },
  { tag: t.function(t.variableName), color: "#1d4ed8", fontWeight: "600" },
  { tag: t.standard(t.variableName), color: "#0e7490" },
  { tag: t.variableName, color: "#b45309" },
  { tag: [t.special(t.variableName), t.definition(t.variableName)], color: "#be123c" },
  { tag: t.typeName, color: "#047857" },
  { tag: t.propertyName, color: "#6d28d9" },
  { tag: [t.number, t.bool, t.atom], color: "#0f766e" },
  { tag: t.string, color: "#a21caf" },
  { tag: [t.meta, t.labelName], color: "#64748b" },
  { tag: t.operator, color: "#475569" },
]);

const setMarked = StateEffect.define<number | null>();
const markedLine = StateField.define<DecorationSet>({
  create: () => Decoration.none,
  update(deco, tr) {
    for (const e of tr.effects) {
      if (e.is(setMarked)) {
        if (e.value === null || e.value < 1 || e.value > tr.state.doc.lines) return Decoration.none;
        const line = tr.state.doc.line(e.value);
        return Decoration.set([Decoration.line({ class: "cm-marked-line" }).range(line.from)]);
      }
    }
    return deco.map(tr.changes);
  },
  provide: (f) => EditorView.decorations.from(f),
});

/** Fixed line classes (1-based line -> CSS class), e.g. the assembly's loop marks. */
export function lineClasses(classes: ReadonlyMap<number, string>): Extension {
  return StateField.define<DecorationSet>({
    create: (state) => Decoration.set([...classes].filter(([n]) => n >= 1 && n <= state.doc.lines).sort((a, b) => a[0] - b[0])
      .map(([n, cls]) => Decoration.line({ class: cls }).range(state.doc.line(n).from))),
    update: (deco, tr) => deco.map(tr.changes),
    provide: (f) => EditorView.decorations.from(f),
  });
}

function baseExtensions(lang: Lang): Extension[] {
  return [
    lineNumbers(),
    foldGutter(),
    highlightActiveLine(),
    highlightSelectionMatches(),
    search({ top: true }),
    keymap.of(searchKeymap),
    EditorState.readOnly.of(true),
    EditorView.editable.of(false),
    EditorView.contentAttributes.of({ tabindex: "0" }),
    syntaxHighlighting(irHighlight),
    markedLine,
    lang ?? [],
  ];
}

export interface CodeViewer {
  readonly dom: HTMLElement;
  readonly view: EditorView;
  setText(text: string): void;
  /** Marks a 1-based line and scrolls it to the middle; null clears the mark. */
  markLine(line: number | null): void;
  destroy(): void;
}

/** `onLineDoubleClick` gets the text of a double-clicked line; `more` adds extensions (the comment gutter). */
export function codeViewer(parent: HTMLElement, text: string, lang: Lang, onLineDoubleClick?: (line: string) => void, more: Extension[] = []): CodeViewer {
  const extra = onLineDoubleClick
    ? EditorView.domEventHandlers({
        dblclick(e, v) {
          const pos = v.posAtCoords({ x: e.clientX, y: e.clientY });
          if (pos === null) return false;
          onLineDoubleClick(v.state.doc.lineAt(pos).text);
          return false;
        },
      })
    : [];
  const view = new EditorView({ parent, state: EditorState.create({ doc: text, extensions: [baseExtensions(lang), extra, more] }) });
  // CodeMirror draws only the lines in view: the browser tests (and the console) read the whole text here.
  (view.dom as HTMLElement & { prismView?: EditorView }).prismView = view;
  return {
    dom: view.dom,
    view,
    setText(t) {
      if (t !== view.state.doc.toString()) view.dispatch({ changes: { from: 0, to: view.state.doc.length, insert: t } });
    },
    markLine(line) {
      const effects: StateEffect<unknown>[] = [setMarked.of(line)];
      if (line !== null && line >= 1 && line <= view.state.doc.lines) {
        effects.push(EditorView.scrollIntoView(view.state.doc.line(line).from, { y: "center" }));
      }
      view.dispatch({ effects });
    },
    destroy: () => view.destroy(),
  };
}

export interface DiffViewer {
  readonly dom: HTMLElement;
  /** Marks a 1-based line of the "after" side and scrolls it to the middle; null clears the mark. */
  markLine(line: number | null): void;
  destroy(): void;
}

// The collapsed-run marker in words ("… 107 unchanged lines …"): @codemirror/merge's own frames it
// in "⦚", which fonts without that glyph draw as a box (the CSS in styles.css drops them).
const diffPhrases = EditorState.phrases.of({ "$ unchanged lines": "… $ unchanged lines …" });

/**
 * Side-by-side diff, `before` on the left: unchanged lines aligned (a line only re-indented counts
 * as unchanged: linediff.ts), each changed chunk starting at the same height on both sides, changed words highlighted inside changed lines, unchanged runs
 * longer than 8 lines collapsed behind "… N unchanged lines …" (a click opens them); long lines
 * scroll sideways instead of wrapping, so the two sides stay line for line.
 */
export function diffViewer(parent: HTMLElement, before: string, after: string, lang: Lang): DiffViewer {
  const mv = new MergeView({
    parent,
    a: { doc: before, extensions: [baseExtensions(lang), diffPhrases] },
    b: { doc: after, extensions: [baseExtensions(lang), diffPhrases] },
    highlightChanges: true,
    gutter: true,
    collapseUnchanged: { margin: 3, minSize: 8 },
    diffConfig: { override: lineAlignedDiff },
  });
  (mv.b.dom as HTMLElement & { prismView?: EditorView }).prismView = mv.b;
  (mv.a.dom as HTMLElement & { prismView?: EditorView }).prismView = mv.a;
  return {
    dom: mv.dom,
    markLine(line) {
      const b = mv.b;
      const effects: StateEffect<unknown>[] = [setMarked.of(line)];
      if (line !== null && line >= 1 && line <= b.state.doc.lines) effects.push(EditorView.scrollIntoView(b.state.doc.line(line).from, { y: "center" }));
      b.dispatch({ effects });
    },
    destroy: () => mv.destroy(),
  };
}
