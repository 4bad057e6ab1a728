/**
 * The compiler's event stream, typed. The types and lists (event types, stages, terminal types)
 * are generated from the one schema, compiler/events/schema.py, into `events.generated.ts`
 * (`python -m compiler.events.typescript`); never copy them here by hand.
 *
 * Fields may be added by the compiler, never renamed; the reducer ignores unknown types.
 */
import { EVENT_TYPES, TERMINAL_EVENT_TYPES } from "./events.generated";
import type { CompileEvent, EventBase } from "./events.generated";

export * from "./events.generated";

/** An event of a type this build does not know; kept in the log, ignored by the reducer. */
export interface UnknownEvent extends EventBase {
  type: string;
  [extra: string]: unknown;
}

export function isKnownEvent(e: { type: string }): e is CompileEvent {
  return (EVENT_TYPES as readonly string[]).includes(e.type);
}

/** Whether `e` ends its stream (`compile.finished` or `compile.failed`). */
export function isTerminalEvent(e: { type: string }): boolean {
  return (TERMINAL_EVENT_TYPES as readonly string[]).includes(e.type);
}

/** Checks the envelope of a message from the wire; throws on anything that is not an event. */
export function parseEvent(raw: unknown): CompileEvent | UnknownEvent {
  if (typeof raw !== "object" || raw === null) throw new Error("event is not an object");
  const o = raw as Record<string, unknown>;
  if (typeof o.seq !== "number" || !Number.isInteger(o.seq) || o.seq < 0) {
    throw new Error("event has no integer seq");
  }
  if (typeof o.type !== "string") throw new Error("event has no type");
  return o as unknown as CompileEvent | UnknownEvent;
}
