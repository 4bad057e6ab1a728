/** followEvents against a fake fetch and WebSocket (unit test of the feed's resume logic only). */
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { followEvents } from "../src/api";
import { reduce, initialState, isDone, type CompilationState } from "../src/state";
import { EVENTS } from "./fixture";

class FakeWS {
  static all: FakeWS[] = [];
  onopen: (() => void) | null = null;
  onmessage: ((m: { data: string }) => void) | null = null;
  onclose: ((e: { code: number }) => void) | null = null;
  closed = false;
  constructor(readonly url: string) {
    FakeWS.all.push(this);
  }
  close() {
    this.closed = true;
  }
  open() {
    this.onopen?.();
  }
  send(seq: number) {
    this.onmessage?.({ data: JSON.stringify(EVENTS[seq]) });
  }
  drop(code = 1006) {
    this.onclose?.({ code });
  }
}

let stored: number;
const fetched: string[] = [];

beforeEach(() => {
  vi.useFakeTimers();
  FakeWS.all = [];
  fetched.length = 0;
  stored = 3; // the server holds seq 0..2 when the page opens
  vi.stubGlobal("location", { protocol: "http:", host: "example.test" });
  vi.stubGlobal("WebSocket", FakeWS);
  vi.stubGlobal("fetch", async (url: string) => {
    fetched.push(url);
    const after = Number(new URL(url, "http://x").searchParams.get("after"));
    const events = EVENTS.slice(after + 1, stored);
    const body = JSON.stringify({ events, complete: events.length > 0 && events[events.length - 1].type === "compile.finished" });
    return { ok: true, status: 200, text: async () => body };
  });
});

afterEach(() => {
  vi.useRealTimers();
  vi.unstubAllGlobals();
});

function follow() {
  let state: CompilationState = initialState();
  const statuses: string[] = [];
  const feed = followEvents("abc", {
    onEvent: (e) => (state = reduce(state, e)),
    onStatus: (s) => statuses.push(s),
    lastSeq: () => state.nextSeq - 1,
    done: () => isDone(state),
  });
  return { get state() { return state; }, statuses, feed };
}

describe("followEvents", () => {
  it("reads stored events over HTTP, then resumes the WebSocket after the last seq held", async () => {
    const f = follow();
    await vi.advanceTimersByTimeAsync(0);
    expect(fetched).toEqual(["/api/compilations/abc/events?after=-1", "/api/compilations/abc/events?after=2"]);
    expect(f.state.nextSeq).toBe(3);
    expect(FakeWS.all.map((w) => w.url)).toEqual(["ws://example.test/ws/compilations/abc/?after=2"]);
    const ws = FakeWS.all[0];
    ws.open();
    ws.send(3);
    ws.send(4);
    ws.send(4); // a duplicate changes nothing
    ws.drop();
    expect(f.statuses).toContain("reconnecting");
    await vi.advanceTimersByTimeAsync(1000);
    expect(FakeWS.all[1].url).toBe("ws://example.test/ws/compilations/abc/?after=4");
    FakeWS.all[1].open();
    for (let s = 5; s < EVENTS.length; s++) FakeWS.all[1].send(s);
    expect(isDone(f.state)).toBe(true);
    expect(f.state.passes).toHaveLength(2);
    expect(FakeWS.all[1].closed).toBe(true);
    expect(f.statuses[f.statuses.length - 1]).toBe("closed");
  });

  it("does not open a WebSocket for a finished compilation", async () => {
    stored = EVENTS.length;
    const f = follow();
    await vi.advanceTimersByTimeAsync(0);
    expect(isDone(f.state)).toBe(true);
    expect(FakeWS.all).toHaveLength(0);
  });

  it("stops on close code 4404 (unknown compilation)", async () => {
    const f = follow();
    await vi.advanceTimersByTimeAsync(0);
    FakeWS.all[0].drop(4404);
    await vi.advanceTimersByTimeAsync(20000);
    expect(FakeWS.all).toHaveLength(1);
    expect(f.statuses[f.statuses.length - 1]).toBe("closed");
  });
});
