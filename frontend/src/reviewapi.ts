/**
 * Accounts, comments and reviews over HTTP, and the comment log over its WebSocket
 * (`/ws/compilations/<id>/comments/?after=<seq>`: reconnects after the last seq it applied, so
 * nothing is missed and, with the reducer in review.ts, nothing is shown twice).
 */
import { CLOSE_TOO_MANY_REQUESTS, request, retryAfterMs } from "./api";
import { isReviewMessage, type Anchor, type Review, type ReviewComment, type ReviewMessage, type ReviewSummary, type Verdict } from "./review";

export interface Me {
  user: { username: string } | null;
  teams: { slug: string; name: string }[];
  signup_enabled: boolean;
  require_sign_in: boolean;
}

const c = (id: string) => `/api/compilations/${encodeURIComponent(id)}`;

export const auth = {
  me: () => request<Me>("GET", "/api/auth/me"),
  login: (username: string, password: string) => request<Me>("POST", "/api/auth/login", { username, password }),
  signup: (username: string, password: string) => request<Me>("POST", "/api/auth/signup", { username, password }),
  logout: () => request<Me>("POST", "/api/auth/logout"),
};

let meCache: Promise<Me> | null = null;
/** Who is signed in, asked once per page load (sign-in and sign-out reload the page). */
export function currentUser(): Promise<Me> {
  meCache ??= auth.me().catch(() => ({ user: null, teams: [], signup_enabled: false, require_sign_in: false }));
  return meCache;
}

export const reviewApi = {
  comments: (id: string) => request<{ comments: ReviewComment[]; review_seq: number }>("GET", `${c(id)}/comments`),
  comment: (id: string, anchor: Anchor, body: string) => request<ReviewComment>("POST", `${c(id)}/comments`, { anchor, body }),
  reply: (id: string, parent: number, body: string) => request<ReviewComment>("POST", `${c(id)}/comments`, { parent, body }),
  update: (id: string, cid: number, change: { body?: string; resolved?: boolean }) => request<ReviewComment>("PATCH", `${c(id)}/comments/${cid}`, change),
  remove: (id: string, cid: number) => request<null>("DELETE", `${c(id)}/comments/${cid}`),
  reviews: (id: string) => request<{ reviews: Review[]; state: ReviewSummary }>("GET", `${c(id)}/reviews`),
  review: (id: string, verdict: Verdict, summary: string) => request<{ reviews: Review[]; state: ReviewSummary }>("POST", `${c(id)}/reviews`, { verdict, summary }),
  setVisibility: (id: string, visibility: string) => request<{ visibility: string }>("PATCH", c(id), { visibility }),
};

export interface CommentFeed {
  close(): void;
}

/** Follows the comment log after `lastSeq()`; reconnects (back-off up to 10 s) after a drop, and after a
 * 4429 close (too many connections) when its reason says (`retryAfterMs`). */
export function followComments(id: string, lastSeq: () => number, onMessage: (m: ReviewMessage) => void): CommentFeed {
  let ws: WebSocket | null = null;
  let closed = false;
  let failures = 0;
  let timer: ReturnType<typeof setTimeout> | null = null;
  const connect = () => {
    if (closed) return;
    const proto = location.protocol === "https:" ? "wss:" : "ws:";
    ws = new WebSocket(`${proto}//${location.host}/ws/compilations/${encodeURIComponent(id)}/comments/?after=${lastSeq()}`);
    ws.onopen = () => (failures = 0);
    ws.onmessage = (e) => {
      try {
        const data: unknown = JSON.parse(String(e.data));
        if (isReviewMessage(data)) onMessage(data);
      } catch {
        /* not a review message; ignore */
      }
    };
    ws.onclose = (e) => {
      ws = null;
      if (closed || e.code === 4404) return;
      const wait = e.code === CLOSE_TOO_MANY_REQUESTS ? retryAfterMs(e.reason ?? "") : null;
      failures++;
      timer = setTimeout(connect, wait !== null ? wait * (1 + 0.2 * Math.random()) : Math.min(10000, 300 * 2 ** failures));
    };
  };
  connect();
  return {
    close() {
      closed = true;
      if (timer) clearTimeout(timer);
      ws?.close();
    },
  };
}
