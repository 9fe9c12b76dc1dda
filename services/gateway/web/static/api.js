// The JSON API and its NDJSON streams, as the pages use them.

export const API = "/api/v1";

/** An answer that was not 2xx: `status`, the body's `code` ("rejected", "no_match", ...) and body. */
export class ApiError extends Error {
  constructor(status, body) {
    super(body?.message || `HTTP ${status}`);
    this.name = "ApiError";
    this.status = status;
    this.code = body?.error || "http_error";
    this.body = body || {};
  }
  get rule() {
    return this.body.rule || null;
  }
}

/** The network failed (no answer at all). */
export class NetworkError extends Error {
  constructor(cause) {
    super("the server could not be reached");
    this.name = "NetworkError";
    this.cause = cause;
  }
}

async function request(path, { method = "GET", body, token, key, signal } = {}) {
  const headers = { accept: "application/json" };
  if (body !== undefined) headers["content-type"] = "application/json";
  if (token) headers.authorization = `Bearer ${token}`;
  if (key) headers["idempotency-key"] = key;
  let res;
  try {
    res = await fetch(API + path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      signal,
      cache: "no-store",
    });
  } catch (e) {
    if (e.name === "AbortError") throw e;
    throw new NetworkError(e);
  }
  let data = null;
  const text = await res.text();
  if (text) {
    try {
      data = JSON.parse(text);
    } catch {
      data = { error: "bad_json", message: text.slice(0, 200) };
    }
  }
  if (!res.ok) throw new ApiError(res.status, data);
  return data;
}

export const getJSON = (path, opts) => request(path, opts);
export const postJSON = (path, body, opts = {}) => request(path, { ...opts, method: "POST", body });

/** A URL-safe path segment. */
export const seg = (text) => encodeURIComponent(String(text));

const sleep = (ms, signal) =>
  new Promise((resolve) => {
    const t = setTimeout(resolve, ms);
    signal?.addEventListener("abort", () => {
      clearTimeout(t);
      resolve();
    });
  });

/**
 * Follow an NDJSON stream: `onLine(obj)` for each line (blank keep-alives skipped),
 * `onState("connecting"|"live"|"reconnecting"|"over"|"error", detail)` as it changes.
 * A dropped stream is opened again with `after=<last event id>` after a growing pause;
 * it ends for good when the match is over, on a 4xx other than 429, or on close().
 */
export function followStream(path, { token, onLine, onState, onReset, silenceMs = 60000 }) {
  let lastId = 0;
  let closed = false;
  let controller = null;
  let over = false;
  const stop = new AbortController();

  const url = () => {
    const u = new URL(API + path, location.origin);
    u.searchParams.set("views", "1");
    u.searchParams.set("after", String(lastId));
    return u.pathname + u.search;
  };

  async function once() {
    controller = new AbortController();
    let watchdog = null;
    const arm = () => {
      clearTimeout(watchdog);
      watchdog = setTimeout(() => controller.abort(), silenceMs);
    };
    const headers = { accept: "application/x-ndjson" };
    if (token) headers.authorization = `Bearer ${token}`;
    arm();
    let res;
    try {
      res = await fetch(url(), { headers, signal: controller.signal, cache: "no-store" });
    } catch (e) {
      clearTimeout(watchdog);
      throw new NetworkError(e);
    }
    if (!res.ok) {
      clearTimeout(watchdog);
      let body = null;
      try {
        body = await res.json();
      } catch {
        /* not JSON */
      }
      throw new ApiError(res.status, body);
    }
    onState("live");
    const reader = res.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    let gotLine = false;
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        arm();
        buffer += decoder.decode(value, { stream: true });
        let nl;
        while ((nl = buffer.indexOf("\n")) >= 0) {
          const raw = buffer.slice(0, nl).trim();
          buffer = buffer.slice(nl + 1);
          if (!raw) continue; // keep-alive
          let line;
          try {
            line = JSON.parse(raw);
          } catch {
            continue;
          }
          gotLine = true;
          if (line.type === "event" && typeof line.id === "number") {
            if (line.id <= lastId) continue; // already seen
            lastId = line.id;
            if (line.event?.type === "match_ended") over = true;
          }
          if (line.type === "snapshot" && line.view?.phase === "over") over = true;
          onLine(line);
        }
      }
    } catch (e) {
      if (closed) return gotLine;
      if (e.name !== "AbortError") throw new NetworkError(e);
    } finally {
      clearTimeout(watchdog);
    }
    return gotLine;
  }

  (async () => {
    let pause = 500;
    onState("connecting");
    while (!closed) {
      try {
        const gotLine = await once();
        if (closed) return;
        if (over) {
          onState("over");
          return;
        }
        if (gotLine) pause = 500;
      } catch (e) {
        if (closed) return;
        if (e instanceof ApiError) {
          if (e.status === 400 && e.code === "bad_resume") {
            lastId = 0; // the match is not where we thought: start again from the beginning
            onReset?.();
          } else if (e.status === 429) {
            pause = Math.max(pause, 1000 * (e.body.retry_after || 1));
          } else if (e.status < 500) {
            onState("error", e);
            return;
          }
        }
      }
      onState("reconnecting");
      await sleep(pause + Math.random() * 250, stop.signal);
      pause = Math.min(pause * 2, 15000);
    }
  })();

  return {
    close() {
      closed = true;
      stop.abort();
      controller?.abort();
    },
    get lastId() {
      return lastId;
    },
  };
}

const ratingsCache = new Map(); // family -> {at, promise}

/** Ratings of one family by player name (kept 30 s); an empty map when they cannot be had. */
export function ratingsByName(family) {
  const now = Date.now();
  const hit = ratingsCache.get(family);
  if (hit && now - hit.at < 30000) return hit.promise;
  const promise = getJSON(`/ratings?family=${seg(family)}`)
    .then((data) => {
      const byName = new Map();
      for (const r of data.ratings || []) if (!byName.has(r.name)) byName.set(r.name, r);
      return byName;
    })
    .catch(() => new Map());
  ratingsCache.set(family, { at: now, promise });
  return promise;
}
