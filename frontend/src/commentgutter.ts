/**
 * The comment gutter of a code viewer (IR after a pass, a kernel's loop IR, LLVM IR, assembly):
 * a "+" on every line to comment on it, and the number of open threads on lines that have some
 * (GitHub's and Gerrit's gutter markers). The counts are updated in place (`setCommentCounts`).
 */
import { StateEffect, StateField, type Extension } from "@codemirror/state";
import { EditorView, GutterMarker, gutter } from "@codemirror/view";
import { commentCount, threadWords } from "./icons";

const setCounts = StateEffect.define<ReadonlyMap<number, number>>();
const countsField = StateField.define<ReadonlyMap<number, number>>({
  create: () => new Map(),
  update(value, tr) {
    for (const e of tr.effects) if (e.is(setCounts)) return e.value;
    return value;
  },
});

class Marker extends GutterMarker {
  constructor(readonly n: number) {
    super();
  }
  override eq(other: Marker): boolean {
    return other.n === this.n;
  }
  override toDOM(): Node {
    const el = document.createElement("span");
    el.className = this.n ? "comment-mark has-comments" : "comment-mark";
    if (this.n) el.append(commentCount(this.n));
    else el.textContent = "+";
    el.title = this.n ? `${threadWords(this.n)} on this line: click to comment` : "Comment on this line";
    return el;
  }
}

const markers = Array.from({ length: 10 }, (_, i) => new Marker(i));
const markerFor = (n: number) => markers[n] ?? new Marker(n);

/** The gutter; `onComment(line, text)` is called with the 1-based line and its text. */
export function commentGutter(counts: ReadonlyMap<number, number>, onComment: (line: number, text: string) => void): Extension {
  return [
    countsField.init(() => counts),
    gutter({
      class: "cm-comment-gutter",
      lineMarker: (view, block) => markerFor(view.state.field(countsField).get(view.state.doc.lineAt(block.from).number) ?? 0),
      lineMarkerChange: (u) => u.transactions.some((t) => t.effects.some((e) => e.is(setCounts))),
      initialSpacer: () => markerFor(0),
      domEventHandlers: {
        mousedown(view, block) {
          const line = view.state.doc.lineAt(block.from);
          onComment(line.number, line.text);
          return true;
        },
      },
    }),
  ];
}

export function setCommentCounts(view: EditorView, counts: ReadonlyMap<number, number>): void {
  view.dispatch({ effects: setCounts.of(counts) });
}
