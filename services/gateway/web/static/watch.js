// The live match page: the public stream, laid out as it goes; also shows a finished match.

import { followStream, seg } from "./api.js";
import { h, setTitle } from "./dom.js";
import { createTable } from "./table.js";
import { seatName } from "./describe.js";

export function connectionBadge() {
  const el = h("span", { id: "connection", class: "chip connection", "data-state": "connecting", role: "status" }, "connecting…");
  const TEXT = { connecting: "connecting…", live: "live", reconnecting: "reconnecting…", over: "match over", error: "disconnected" };
  return {
    el,
    set(state, detail) {
      el.dataset.state = state;
      el.textContent = TEXT[state] || state;
      if (state === "error" && detail) el.title = detail.message;
    },
  };
}

/**
 * Follow a match's stream into a table: the events (kept for the layout and the log) and the
 * latest view. Used by the watch and play pages.
 */
export function followMatch(path, { token, table, badge, onView, onLine, onError }) {
  let events = [];
  let view = null;
  let deadline = null;
  let pending = false;
  const render = () => {
    pending = false;
    onView?.(view, events);
    if (view) table.update(view, events, deadline);
  };
  const schedule = () => {
    if (!pending) {
      pending = true;
      requestAnimationFrame(render);
    }
  };
  const stream = followStream(path, {
    token,
    onState(state, detail) {
      if (state === "over" || (state === "live" && view?.phase === "over")) badge.set("over");
      else badge.set(state, detail);
      if (state === "error") onError?.(detail);
    },
    onReset() {
      events = [];
    },
    onLine(line) {
      if (line.type === "event") {
        events.push({ id: line.id, event: line.event });
      } else if (line.type === "snapshot" || line.type === "turn") {
        if (line.view && (!view || line.view.version >= view.version)) {
          view = line.view;
          deadline = { remainingMs: line.remaining_ms, receivedAt: performance.now() };
        }
      }
      onLine?.(line);
      schedule();
    },
  });
  return { stream, get view() { return view; }, get events() { return events; } };
}

export async function mount(main, { param: matchId }) {
  setTitle(`Watch ${matchId}`);
  const badge = connectionBadge();
  const title = h("h1", {}, "Match ", h("code", {}, matchId));
  const players = h("p", { class: "subtitle" });
  const links = h("p", { class: "page-links" }, h("a", { href: `/replay/${seg(matchId)}` }, "Replay this match"));
  const waiting = h("p", { class: "notice", hidden: true }, "Waiting for players to take their seats…");
  const error = h("p", { class: "error", role: "alert", hidden: true });
  main.append(h("div", { class: "page-head" }, title, players, links), waiting, error);
  const table = createTable(main, { statusExtra: badge.el });
  followMatch(`/matches/${seg(matchId)}/stream`, {
    table,
    badge,
    onLine(line) {
      waiting.hidden = !(line.type === "snapshot" && line.view === null);
    },
    onView(view) {
      if (view) players.textContent = view.players.map((_, k) => seatName(view.players, k)).join(" vs ");
    },
    onError(e) {
      error.hidden = false;
      error.textContent = e.code === "no_match" ? `There is no match ${matchId}.` : e.message;
    },
  });
}
