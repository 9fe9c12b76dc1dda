// The replay page: every frame of a match fetched once, a scrubber over them.

import { getJSON, seg, ApiError } from "./api.js";
import { h, s as svg, replace, setTitle } from "./dom.js";
import { createTable } from "./table.js";
import { describe } from "./describe.js";

const SPEEDS = ["0.5", "1", "2", "4", "8"];

// Button icons drawn in a 16x16 box (no icon font is available under the page's CSP).
const ICONS = {
  first: ["M3 3h2v10H3z", "M13 3v10L6 8z"],
  prev: ["M12 3v10L5 8z"],
  play: ["M5 3v10l8-5z"],
  pause: ["M4 3h3v10H4z", "M9 3h3v10H9z"],
  next: ["M4 3v10l7-5z"],
  last: ["M3 3v10l7-5z", "M11 3h2v10h-2z"],
};

function icon(shape) {
  return svg("svg", { class: "icon", viewBox: "0 0 16 16", "aria-hidden": "true", focusable: "false" }, ICONS[shape].map((d) => svg("path", { d })));
}

export async function mount(main, { param: matchId, query }) {
  setTitle(`Replay ${matchId}`);
  let seat = query.get("seat");
  seat = seat !== null && /^\d+$/.test(seat) ? seat : "";
  const title = h("h1", {}, "Replay of ", h("code", {}, matchId));
  const subtitle = h("p", { class: "subtitle" });
  const error = h("p", { class: "error", role: "alert", hidden: true });
  const scrubber = h("input", { id: "scrubber", type: "range", min: "1", max: "1", value: "1", step: "1", "aria-label": "Position in the match" });
  const position = h("output", { id: "position", for: "scrubber" }, "");
  const btn = (id, label, shape) => h("button", { id, type: "button", "aria-label": label, title: label }, icon(shape));
  const first = btn("first", "First event", "first");
  const prev = btn("prev", "Previous event", "prev");
  const playpause = btn("playpause", "Play", "play");
  const next = btn("next", "Next event", "next");
  const last = btn("last", "Last event", "last");
  const speed = h("select", { id: "speed", "aria-label": "Speed, events per second" }, SPEEDS.map((v) => h("option", { value: v }, `${v}/s`)));
  speed.value = "2";
  const seatView = h("select", { id: "seat-view", "aria-label": "Whose view" }, h("option", { value: "" }, "Public view"));
  const now = h("p", { id: "now", class: "now", "aria-live": "polite" });
  const controls = h(
    "div",
    { class: "replay-controls", role: "group", "aria-label": "Replay controls" },
    h("div", { class: "buttons" }, first, prev, playpause, next, last),
    h("label", { class: "scrub" }, h("span", { class: "visually-hidden" }, "Position"), scrubber),
    position,
    h("label", {}, "Speed ", speed),
    h("label", {}, "View ", seatView),
  );
  main.append(h("div", { class: "page-head" }, title, subtitle, h("p", { class: "page-links" }, h("a", { href: `/watch/${seg(matchId)}` }, "Watch page"))), error, controls, now);
  const table = createTable(main, {});

  let frames = [];
  let at = 1;
  let playing = null;
  let status = "finished";

  async function load() {
    const q = seat === "" ? "" : `?seat=${seat}`;
    const data = await getJSON(`/matches/${seg(matchId)}/replay${q}`);
    frames = data.frames || [];
    status = data.status;
    scrubber.max = String(Math.max(1, frames.length));
    const players = frames.length ? frames[frames.length - 1].view?.players || [] : [];
    subtitle.textContent = `${players.join(" vs ")} · ${status === "live" ? "still being played" : "finished"} · ${frames.length} events`;
    const options = [h("option", { value: "" }, "Public view")];
    players.forEach((p, k) => options.push(h("option", { value: String(k), disabled: status !== "finished" }, `Seat ${k}: ${p}`)));
    replace(seatView, options);
    seatView.value = seat;
  }

  function syncUrl() {
    const q = `?at=${at}${seat === "" ? "" : `&seat=${seat}`}`;
    if (location.search !== q) history.replaceState(null, "", location.pathname + q);
  }

  function show(n) {
    if (!frames.length) return;
    at = Math.min(Math.max(1, n), frames.length);
    scrubber.value = String(at);
    position.textContent = `${at} / ${frames.length}`;
    const frame = frames[at - 1];
    table.update(frame.view, frames.slice(0, at));
    now.textContent = frame.event ? describe(frame.event, { players: frame.view.players, rules: frame.view.rules }) : "";
    first.disabled = prev.disabled = at <= 1;
    next.disabled = last.disabled = at >= frames.length;
    syncUrl();
  }

  function stop() {
    clearInterval(playing);
    playing = null;
    playpause.replaceChildren(icon("play"));
    playpause.setAttribute("aria-label", "Play");
    playpause.title = "Play";
  }

  function play() {
    if (at >= frames.length) show(1);
    playpause.replaceChildren(icon("pause"));
    playpause.setAttribute("aria-label", "Pause");
    playpause.title = "Pause";
    clearInterval(playing);
    playing = setInterval(() => {
      if (at >= frames.length) stop();
      else show(at + 1);
    }, 1000 / Number(speed.value));
  }

  const toggle = () => (playing ? stop() : play());
  first.addEventListener("click", () => show(1));
  prev.addEventListener("click", () => show(at - 1));
  next.addEventListener("click", () => show(at + 1));
  last.addEventListener("click", () => show(frames.length));
  playpause.addEventListener("click", toggle);
  scrubber.addEventListener("input", () => show(Number(scrubber.value)));
  speed.addEventListener("change", () => playing && play());
  seatView.addEventListener("change", async () => {
    seat = seatView.value;
    const keep = at;
    try {
      await load();
      show(keep);
    } catch (e) {
      fail(e);
    }
  });
  document.addEventListener("keydown", (e) => {
    if (e.altKey || e.ctrlKey || e.metaKey) return;
    const t = e.target;
    if (t instanceof HTMLElement && (t.tagName === "SELECT" || t.tagName === "TEXTAREA" || (t.tagName === "INPUT" && t !== scrubber))) return;
    if (e.key === "ArrowLeft" || e.key === "ArrowRight") {
      if (t === scrubber) return; // the range input moves by itself and fires input
      show(at + (e.key === "ArrowLeft" ? -1 : 1));
    } else if (e.key === "Home" || e.key === "End") {
      if (t === scrubber) return;
      show(e.key === "Home" ? 1 : frames.length);
    } else if (e.key === " ") {
      if (!e.repeat) toggle();
    } else return;
    e.preventDefault();
  });
  // Space is play/pause wherever the focus is: a focused button must not also be clicked
  document.addEventListener("keyup", (e) => {
    if (e.key === " " && e.target instanceof HTMLButtonElement) e.preventDefault();
  });

  function fail(e) {
    error.hidden = false;
    if (e instanceof ApiError && e.code === "no_match") error.textContent = `There is no match ${matchId}.`;
    else if (e instanceof ApiError && e.code === "match_not_over") error.textContent = "A seat's view is shown only once the match is over.";
    else error.textContent = e.message;
  }

  try {
    await load();
  } catch (e) {
    if (e instanceof ApiError && e.code === "match_not_over" && seat !== "") {
      seat = "";
      try {
        await load();
        fail(e);
      } catch (e2) {
        return fail(e2);
      }
    } else return fail(e);
  }
  if (!frames.length) {
    error.hidden = false;
    error.textContent = "This match has no events yet.";
    return;
  }
  const asked = Number(query.get("at"));
  show(Number.isInteger(asked) && asked >= 1 ? asked : frames.length);
}
