// The table as watch, replay and play pages show it: one renderer, fed a view and the events
// up to it. The line is laid out from the round's tile_played events; every number shown
// (scores, hand sizes, stock, turn, ends, phase) is the view's.

import { h, name, replace } from "./dom.js";
import { tileFace, tileBack } from "./tiles.js";
import { roundPlays, layOut } from "./layout.js";
import { describe, endsCount, resultText, rulesText, sideName, sidesOf, seatName } from "./describe.js";
import { lineChart, legend } from "./charts.js";

const POSITIONS = { 2: ["bottom", "top"], 3: ["bottom", "right", "left"], 4: ["bottom", "right", "top", "left"] };

/**
 * Build the table inside `root`. Options: `mySeat` (the seat at the bottom, whose hand the
 * page draws itself with `drawHand(handEl, view)`), `statusExtra` (a node for the status bar,
 * e.g. the connection state).
 */
export function createTable(root, { mySeat = null, drawHand = null, statusExtra = null } = {}) {
  const round = h("span", { id: "round", class: "chip" }, "Round –");
  const stock = h("span", { id: "stock", class: "chip" }, "Stock –");
  const rules = h("span", { class: "chip rules" });
  const turn = h("p", { id: "turn", "aria-live": "polite" }, "");
  const deadline = h("span", { id: "deadline", class: "deadline", "aria-label": "seconds left" });
  const lineInner = h("div", { class: "line-inner" });
  const line = h("div", { id: "line", tabindex: "0", role: "region", "aria-label": "Line of play" }, lineInner);
  const ends = h("ul", { id: "ends", "aria-label": "Open ends" });
  const count = h("p", { id: "count", class: "count" });
  const result = h("p", { id: "result", role: "status", hidden: true });
  const lastRound = h("p", { id: "last-round", class: "last-round" });
  const felt = h("div", { class: "felt" }, line);
  const table = h(
    "section",
    { id: "table", "aria-label": "Table", "data-version": "0", "data-phase": "" },
    h("div", { class: "status-bar" }, round, stock, rules, statusExtra, h("div", { class: "turn-box" }, turn, deadline)),
    result,
    felt,
    h("div", { class: "ends-row" }, h("span", { class: "label" }, "Open ends"), ends, count),
    lastRound,
  );
  const scores = h("table", { id: "scores", class: "scores" });
  const chart = h("div", { id: "score-chart", class: "chart-box" });
  const chartLegend = h("div", { class: "chart-legend" });
  const log = h("ol", { id: "log", "aria-live": "polite", "aria-label": "Moves" });
  const side = h(
    "aside",
    { class: "side-panel", "aria-label": "Scores and moves" },
    h("section", { class: "panel" }, h("h2", {}, "Scores"), h("div", { class: "scores-scroll" }, scores), chart, chartLegend),
    h("section", { class: "panel" }, h("h2", {}, "Moves"), h("div", { class: "log-box" }, log)),
  );
  root.append(h("div", { class: "match-layout" }, table, side));

  let seats = []; // {el, hand, nameEl, countEl}
  let seatKey = "";
  let logState = { first: null, count: 0 };
  let roundShown = null;
  let lastPlayShown = -1;
  let deadlineAt = null; // performance.now() ms when the turn times out
  let timer = null;

  function tickDeadline() {
    if (deadlineAt === null) {
      deadline.textContent = "";
      deadline.removeAttribute("data-seconds");
      return;
    }
    const left = Math.max(0, Math.ceil((deadlineAt - performance.now()) / 1000));
    deadline.textContent = `${left} s`;
    deadline.dataset.seconds = String(left);
    deadline.classList.toggle("urgent", left <= 5);
  }

  function buildSeats(view) {
    const n = view.players.length;
    const base = mySeat ?? view.seat ?? 0;
    const pos = POSITIONS[n] || POSITIONS[4];
    for (const s of seats) s.el.remove();
    seats = [];
    for (let k = 0; k < n; k++) {
      const nameEl = h("span", { class: "seat-name" });
      const countEl = h("span", { class: "seat-count" });
      const tag = h("span", { class: "seat-tag" });
      const hand = h("div", { class: "hand" });
      const el = h("section", { class: ["seat", `pos-${pos[(k - base + n) % n]}`], "data-seat": String(k) }, h("h3", { class: "seat-head" }, nameEl, tag, countEl), hand);
      seats.push({ el, hand, nameEl, countEl, tag });
      felt.append(el);
    }
    felt.dataset.players = String(n);
    seatKey = `${n}:${base}`;
  }

  function drawSeats(view) {
    const n = view.players.length;
    if (seatKey !== `${n}:${mySeat ?? view.seat ?? 0}`) buildSeats(view);
    const over = roundIsOver(view);
    const shown = over ? view.last_round.hands : null;
    seats.forEach((s, k) => {
      const count = view.hand_sizes?.[k] ?? 0;
      s.el.dataset.count = String(count);
      if (view.phase === "playing" && view.turn === k) s.el.dataset.turn = "true";
      else delete s.el.dataset.turn;
      replace(s.nameEl, name(seatName(view.players, k)));
      const tags = [];
      if (k === mySeat) tags.push("you");
      if (view.rules?.partners) tags.push(`side ${k % 2}`);
      if (view.phase === "playing" && view.leader === k) tags.push("leads");
      s.tag.textContent = tags.length ? `(${tags.join(", ")})` : "";
      s.countEl.textContent = `${count} ${count === 1 ? "tile" : "tiles"}`;
      if (k === mySeat && drawHand) {
        s.hand.id = "hand";
        drawHand(s.hand, view, shown);
        return;
      }
      let faces = null;
      if (shown && shown[k]) faces = shown[k];
      else if (view.hand && view.seat === k) faces = view.hand;
      const key = faces ? `f:${JSON.stringify(faces)}` : `b:${count}`;
      if (s.hand.dataset.key === key) return;
      s.hand.dataset.key = key;
      if (faces) replace(s.hand, faces.map((t) => tileFace(t, { vertical: true })));
      else replace(s.hand, Array.from({ length: count }, () => tileBack({ vertical: true })));
      s.hand.setAttribute("aria-label", faces ? `${faces.length} tiles shown` : `${count} hidden tiles`);
    });
  }

  function drawLine(view, events) {
    const plays = roundPlays(events);
    const { tiles, box } = layOut(plays, view.rules?.family === "straight");
    const newRound = roundShown !== view.round;
    roundShown = view.round;
    const pad = 0.5;
    const width = box.maxX - box.minX + 2 * pad;
    const height = box.maxY - box.minY + 2 * pad;
    lineInner.style.width = `calc(var(--u) * ${width})`;
    lineInner.style.height = `calc(var(--u) * ${Math.max(height, 2 + 2 * pad)})`;
    const offY = height < 3 ? (3 - height) / 2 : 0;
    const els = tiles.map((t, i) => {
      const el = tileFace(t.tile, { halves: t.halves, vertical: t.vertical, extraClass: [t.cross ? "cross" : "", t.spinner ? "spinner" : ""].filter(Boolean).join(" ") });
      el.dataset.order = String(i);
      el.dataset.end = t.end;
      el.style.left = `calc(var(--u) * ${t.x - box.minX + pad})`;
      el.style.top = `calc(var(--u) * ${t.y - box.minY + pad + offY})`;
      if (i === tiles.length - 1) el.classList.add("latest");
      return el;
    });
    replace(lineInner, els);
    line.setAttribute("aria-label", tiles.length ? `Line of play, ${tiles.length} tiles` : "Line of play, empty");
    if (!tiles.length) {
      lineInner.append(h("p", { class: "line-empty" }, view.phase === "playing" ? "No tile played yet" : ""));
    }
    // keep the lead in view at a round's start, then the latest tile
    if (newRound && tiles.length) {
      const lead = els[0];
      line.scrollLeft = lead.offsetLeft + lead.offsetWidth / 2 - line.clientWidth / 2;
    } else if (tiles.length && tiles.length - 1 !== lastPlayShown) {
      const el = els[els.length - 1];
      const l = el.offsetLeft, r = l + el.offsetWidth;
      if (l < line.scrollLeft) line.scrollLeft = l - 8;
      else if (r > line.scrollLeft + line.clientWidth) line.scrollLeft = r - line.clientWidth + 8;
    }
    lastPlayShown = tiles.length - 1;
  }

  function drawEnds(view) {
    const items = (view.ends || []).map((e) =>
      h("li", { class: ["end", e.double ? "double" : ""], "data-end": e.end, "data-number": String(e.number), title: e.double ? "a double lies crosswise here" : null }, `${e.end} ${e.number}`),
    );
    replace(ends, items.length ? items : [h("li", { class: "none" }, view.phase === "playing" ? "any tile leads" : "–")]);
    if (view.rules?.family === "straight" && (view.played || []).length) {
      const c = endsCount(view);
      count.textContent = c > 0 && c % 5 === 0 ? `Count ${c}: scores` : `Count ${c}`;
      count.hidden = false;
    } else {
      count.textContent = "";
      count.hidden = true;
    }
  }

  function drawStatus(view, deadlineInfo) {
    table.dataset.version = String(view.version);
    table.dataset.phase = view.phase;
    round.dataset.round = String(view.round);
    round.textContent = `Round ${view.round}`;
    stock.dataset.count = String(view.stock_size);
    replace(stock, tileBack({ vertical: true }), ` Stock ${view.stock_size}`);
    rules.textContent = rulesText(view.rules);
    if (view.phase === "playing" && view.turn !== null && view.turn !== undefined) {
      turn.dataset.seat = String(view.turn);
      turn.textContent = view.turn === mySeat ? "Your move" : `${seatName(view.players, view.turn)} to move`;
      turn.classList.toggle("mine", view.turn === mySeat);
    } else {
      delete turn.dataset.seat;
      turn.classList.remove("mine");
      turn.textContent = view.phase === "over" ? "Match over" : view.last_round ? "Round over" : "Waiting";
    }
    if (deadlineInfo && deadlineInfo.remainingMs !== null && deadlineInfo.remainingMs !== undefined && view.phase === "playing") {
      deadlineAt = deadlineInfo.receivedAt + deadlineInfo.remainingMs;
      if (!timer) timer = setInterval(tickDeadline, 250);
    } else {
      deadlineAt = null;
    }
    tickDeadline();
    const over = view.phase === "over" || view.result;
    if (over && view.result) {
      result.hidden = false;
      result.textContent = resultText(view.result, { players: view.players, rules: view.rules });
    } else {
      result.hidden = true;
      result.textContent = "";
    }
    lastRound.textContent = view.last_round ? `Last round: ${describe(view.last_round, { players: view.players, rules: view.rules })}` : "";
  }

  function drawScores(view, events) {
    const n = sidesOf(view.rules) || view.scores.length;
    const names = Array.from({ length: n }, (_, s) => sideName(view.rules, view.players, s));
    const ended = events.map((x) => x.event).filter((e) => e && e.type === "round_ended");
    const head = h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "Round"), names.map((nm, s) => h("th", { scope: "col", class: `side-${s}` }, h("span", { class: `swatch series-${s}`, "aria-hidden": "true" }), name(nm)))));
    const rows = ended.map((e) =>
      h(
        "tr",
        {},
        h("th", { scope: "row" }, String(e.round)),
        e.scores.map((sc, s) => h("td", { "data-round-side": String(s), class: e.side === s && e.points ? "scored" : "" }, e.side === s && e.points ? `${sc} (+${e.points})` : String(sc))),
      ),
    );
    const foot = h("tfoot", {}, h("tr", {}, h("th", { scope: "row" }, "Total"), view.scores.map((sc, s) => h("td", { "data-side": String(s) }, String(sc)))));
    replace(scores, h("caption", { class: "visually-hidden" }, "Scores by round"), head, h("tbody", {}, rows), foot);

    const series = names.map((nm, s) => {
      const pts = [[0, 0]];
      for (const e of ended) pts.push([e.round, e.scores[s] ?? 0]);
      const lastX = ended.length ? ended[ended.length - 1].round : 0;
      if (view.phase === "playing" && view.round > lastX && (view.scores[s] ?? 0) !== pts[pts.length - 1][1]) pts.push([view.round, view.scores[s]]);
      return { label: nm, points: pts };
    });
    replace(chart, lineChart(series, { title: "Score by round", xLabel: "round", yLabel: "points", guide: view.rules?.target ?? null }));
    const key = names.join("\u0000");
    if (chartLegend.dataset.key !== key) {
      chartLegend.dataset.key = key;
      replace(chartLegend, legend(names));
    }
  }

  function drawLog(view, events) {
    const ctx = { players: view.players, rules: view.rules };
    const first = events.length ? events[0].id : null;
    const box = log.parentElement;
    const atBottom = box.scrollHeight - box.scrollTop - box.clientHeight < 40;
    if (first !== logState.first || events.length < logState.count) {
      log.setAttribute("aria-busy", "true");
      log.replaceChildren();
      logState = { first, count: 0 };
    }
    for (let i = logState.count; i < events.length; i++) {
      const item = events[i];
      if (!item.event) continue;
      log.append(h("li", { "data-version": String(item.id), class: `ev-${item.event.type}` }, describe(item.event, ctx)));
    }
    logState.count = events.length;
    log.removeAttribute("aria-busy");
    if (atBottom || events.length < 3) box.scrollTop = box.scrollHeight;
  }

  return {
    /** Show `view` with `events` ([{id, event}], every event up to the view's version). */
    update(view, events, deadlineInfo = null) {
      if (!view) return;
      drawStatus(view, deadlineInfo);
      drawSeats(view);
      drawLine(view, events);
      drawEnds(view);
      drawScores(view, events);
      drawLog(view, events);
    },
    destroy() {
      clearInterval(timer);
    },
    root: table,
  };
}

/** Whether the view shows a round that has ended (every hand shown, C8). */
export function roundIsOver(view) {
  return Boolean(view.last_round && view.last_round.round === view.round && view.phase !== "playing");
}
