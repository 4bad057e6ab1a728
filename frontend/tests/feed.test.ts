/** followEvents against a fake fetch and WebSocket (unit test of the feed's resume logic only). */
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { followEvents, retryAfterMs } from "../src/api";
import { reduce, initialState, isDone, type CompilationState } from "../src/state";
import { EVENTS } from "./fixture";

class FakeWS {
  static all: FakeWS[] = [];
  onopen: (() => void) | null = null;
  onmessage: ((m: { data: string }) => void) | null = null;
  onclose: ((e: { code: number; reason?: string }) => void) | null = null;
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
  drop(code = 1006, reason = "") {
    this.onclose?.({ code, reason });
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
  const details: (string | undefined)[] = [];
  const feed = followEvents("abc", {
    onEvent: (e) => (state = reduce(state, e)),
    onStatus: (s, d) => (statuses.push(s), details.push(d)),
    lastSeq: () => state.nextSeq - 1,
    done: () => isDone(state),
  });
  return { get state() { return state; }, statuses, details, feed };
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

  it("waits the retry time a 4429 close names, tells the page, then resumes after the last seq", async () => {
    const reason = "too many WebSocket connections: the limit is 120/min per client (PRISM_WS_CONNECT_RATE); retry in 12 s";
    const f = follow();
    await vi.advanceTimersByTimeAsync(0);
    FakeWS.all[0].drop(4429, reason);
    expect(f.statuses[f.statuses.length - 1]).toBe("waiting");
    expect(f.details[f.details.length - 1]).toBe(reason);
    await vi.advanceTimersByTimeAsync(11_900); // the exponential back-off would have retried at 1 s
    expect(FakeWS.all).toHaveLength(1);
    expect(fetched).toHaveLength(2); // and it does not poll over HTTP meanwhile
    await vi.advanceTimersByTimeAsync(12_000 * 0.2 + 200); // within the 0-20% jitter
    expect(FakeWS.all).toHaveLength(2);
    expect(FakeWS.all[1].url).toBe("ws://example.test/ws/compilations/abc/?after=2");
  });

  it("falls back to its own back-off when a 4429 reason names no time", async () => {
    const f = follow();
    await vi.advanceTimersByTimeAsync(0);
    FakeWS.all[0].drop(4429, "too many connections");
    expect(f.statuses[f.statuses.length - 1]).toBe("reconnecting");
    await vi.advanceTimersByTimeAsync(1000);
    expect(FakeWS.all).toHaveLength(2);
  });
});

describe("retryAfterMs", () => {
  it("reads the server's 'retry in N s', bounded to 1 s .. 10 min", () => {
    expect(retryAfterMs("too many compile requests: the limit is 30/min per client (PRISM_COMPILE_RATE); retry in 12 s")).toBe(12000);
    expect(retryAfterMs("retry in 0 s")).toBe(1000);
    expect(retryAfterMs("retry in 1.5 s")).toBe(1500);
    expect(retryAfterMs("retry in 99999 s")).toBe(600_000);
    expect(retryAfterMs("retry later")).toBeNull();
    expect(retryAfterMs("")).toBeNull();
  });
});
