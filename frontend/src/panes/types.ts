/** What every pane of the compilation page gets: the reduced state and the URL's view. */
import type { Compilation, TuningInfo } from "../api";
import type { Anchor, ReviewState } from "../review";
import type { CompilationState } from "../state";
import type { CompilationView } from "../urlstate";

export interface PaneContext {
  id: string;
  state: CompilationState;
  view: CompilationView;
  meta: Compilation | null;
  /** The compilation's tuning job and the provenance of its tuned schedules (absent until read). */
  tuning?: TuningInfo | null;
  /** Comments and reviews (absent where a page shows none). */
  review?: ReviewState;
  /** Opens the comment composer for an anchor (absent: nobody may comment here). */
  onComment?: (anchor: Anchor) => void;
}

export interface Pane {
  readonly el: HTMLElement;
  /** Called after every state or view change; a pane redraws only what changed. */
  update(ctx: PaneContext): void;
  destroy?(): void;
}
