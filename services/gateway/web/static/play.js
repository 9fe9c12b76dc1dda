// The play page: a person plays one seat with the seat's token, by mouse or keyboard.

import { postJSON, seg, ApiError } from "./api.js";
import { h, replace, setTitle } from "./dom.js";
import { createTable } from "./table.js";
import { tileFace, tileText } from "./tiles.js";
import { connectionBadge, followMatch } from "./watch.js";

const END_KEYS = { l: "left", r: "right", u: "up", d: "down" };

export const tokenKey = (matchId, seat) => `domino.token.${matchId}.${seat}`;

export async function mount(main, { param: matchId, query }) {
  const seatText = query.get("seat") ?? "";
  const mySeat = /^\d+$/.test(seatText) ? Number(seatText) : null;
  setTitle(`Play ${matchId}`);
  main.append(h("div", { class: "page-head" }, h("h1", {}, "Match ", h("code", {}, matchId), mySeat !== null ? `, seat ${mySeat}` : "")));
  let token = null;
  try {
    token = mySeat === null ? null : sessionStorage.getItem(tokenKey(matchId, mySeat));
  } catch {
    token = null;
  }
  if (mySeat === null || !token) {
    main.append(
      h(
        "p",
        { class: "notice", id: "message", role: "alert" },
        mySeat === null ? "No seat given for this match. " : `This browser tab holds no token for seat ${mySeat} of this match (a seat's token is kept only in the tab that took the seat). `,
        h("a", { href: "/" }, "Take a seat in the lobby"),
        " or ",
        h("a", { href: `/watch/${seg(matchId)}` }, "watch the match"),
        ".",
      ),
    );
    return;
  }

  const badge = connectionBadge();
  const waiting = h("p", { class: "notice", hidden: true }, "Waiting for the other players to take their seats…");
  const message = h("p", { id: "message", role: "alert", class: "message" });
  const endChoices = h("div", { id: "end-choices", class: "end-choices", role: "group", "aria-label": "Choose an end", hidden: true });
  const draw = h("button", { id: "draw", type: "button", class: "move-button", "aria-keyshortcuts": "w" }, "Draw (W)");
  const pass = h("button", { id: "pass", type: "button", class: "move-button", "aria-keyshortcuts": "p" }, "Pass (P)");
  const help = h("p", { class: "help" }, "Keys: 1–9 pick a tile, L/R/U/D pick an end, Enter plays the only choice, W draws, P passes, Esc cancels.");
  const controls = h("div", { class: "play-controls" }, h("div", { class: "buttons" }, draw, pass), endChoices, message, help);
  main.append(waiting);

  let view = null;
  let selected = null; // "a-b" of the tile picked, waiting for an end
  let posting = false;

  const legal = () => (view && view.phase === "playing" && view.turn === mySeat ? view.legal || [] : []);
  const playsOf = (tileStr) => legal().filter((m) => m.type === "play_tile" && tileText(m.tile) === tileStr);
  const has = (type) => legal().some((m) => m.type === type);

  function say(text, kind = "") {
    message.textContent = text;
    message.className = `message ${kind}`;
  }

  async function post(body) {
    if (posting) return;
    posting = true;
    const key = `v${view ? view.version : 0}`;
    try {
      await postJSON(`/matches/${seg(matchId)}/seats/${mySeat}/moves`, body, { token, key });
      say("");
      selected = null;
      drawChoices();
      markSelected();
    } catch (e) {
      if (e instanceof ApiError && e.code === "rejected") say(`${e.body.rule || "?"}: ${e.body.message}`, "rejected");
      else if (e instanceof ApiError && e.status === 429) say(`Too fast: ${e.message}`, "rejected");
      else say(e.message, "rejected");
    } finally {
      posting = false;
    }
  }

  function playTile(tileStr, end) {
    const t = tileStr.split("-").map(Number);
    post({ type: "play_tile", tile: t, end: end ?? null });
  }

  function pick(tileStr, { confirm }) {
    const moves = playsOf(tileStr);
    if (!moves.length) {
      if (confirm) playTile(tileStr, null); // the referee says why it does not fit
      else say(`${tileStr} cannot be played now.`);
      return;
    }
    if (moves.length === 1 && confirm) {
      playTile(tileStr, moves[0].end);
      return;
    }
    selected = tileStr;
    say(moves.length > 1 ? `${tileStr}: choose an end.` : `${tileStr} selected: press Enter to play it.`);
    drawChoices();
    markSelected();
  }

  function markSelected() {
    for (const b of document.querySelectorAll("#hand .tile-button")) {
      const on = b.dataset.tile === selected;
      b.classList.toggle("selected", on);
      if (on) b.setAttribute("aria-pressed", "true");
      else b.removeAttribute("aria-pressed");
    }
  }

  function drawChoices() {
    const moves = selected ? playsOf(selected) : [];
    if (moves.length > 1) {
      replace(
        endChoices,
        h("span", { class: "label" }, `Play ${selected} on:`),
        moves.map((m) => h("button", { type: "button", class: "end-button", "data-end": m.end, "aria-keyshortcuts": m.end[0], onclick: () => playTile(selected, m.end) }, `${m.end} (${m.end[0].toUpperCase()})`)),
      );
      endChoices.hidden = false;
    } else {
      endChoices.replaceChildren();
      endChoices.hidden = true;
    }
  }

  function drawButtons() {
    draw.classList.toggle("legal", has("draw_tile"));
    pass.classList.toggle("legal", has("pass_turn"));
  }

  function drawHand(handEl, v, shown) {
    const hand = v.hand || [];
    const focused = document.activeElement?.closest?.(".tile-button")?.dataset.tile ?? null;
    const buttons = hand.map((t, i) => {
      const label = tileText(t);
      const ok = playsOf(label).length > 0;
      const b = h(
        "button",
        {
          type: "button",
          class: ["tile-button", ok ? "legal" : "", selected === label ? "selected" : ""],
          "data-tile": label,
          "aria-label": `play ${label}`,
          "aria-disabled": String(!ok),
          "aria-keyshortcuts": i < 9 ? String(i + 1) : null,
          "aria-pressed": selected === label ? "true" : null,
        },
        tileFace(t, { vertical: true }),
        i < 9 ? h("span", { class: "key-hint", "aria-hidden": "true" }, String(i + 1)) : null,
      );
      b.addEventListener("click", () => pick(label, { confirm: true }));
      return b;
    });
    replace(handEl, buttons);
    if (!hand.length && shown) handEl.append(h("p", { class: "hand-empty" }, "No tiles left"));
    if (focused) handEl.querySelector(`.tile-button[data-tile="${focused}"]`)?.focus();
  }

  draw.addEventListener("click", () => post({ type: "draw_tile" }));
  pass.addEventListener("click", () => post({ type: "pass_turn" }));

  const table = createTable(main, { mySeat, drawHand, statusExtra: badge.el });
  table.root.querySelector(".felt").after(controls);

  document.addEventListener("keydown", (e) => {
    if (e.altKey || e.ctrlKey || e.metaKey) return;
    const t = e.target;
    if (t instanceof HTMLElement && (t.tagName === "INPUT" || t.tagName === "SELECT" || t.tagName === "TEXTAREA")) return;
    const key = e.key.toLowerCase();
    if (/^[1-9]$/.test(key)) {
      const buttons = document.querySelectorAll("#hand .tile-button");
      const b = buttons[Number(key) - 1];
      if (!b) return;
      e.preventDefault();
      b.focus();
      pick(b.dataset.tile, { confirm: false });
    } else if (key in END_KEYS) {
      if (!selected) return;
      const m = playsOf(selected).find((x) => x.end === END_KEYS[key]);
      e.preventDefault();
      if (m) playTile(selected, m.end);
      else say(`${selected} cannot go on the ${END_KEYS[key]} end.`);
    } else if (key === "w") {
      e.preventDefault();
      post({ type: "draw_tile" });
    } else if (key === "p") {
      e.preventDefault();
      post({ type: "pass_turn" });
    } else if (key === "enter") {
      if (t instanceof HTMLButtonElement) return; // its own click
      const moves = selected ? playsOf(selected) : legal();
      if (moves.length === 1) {
        e.preventDefault();
        const m = moves[0];
        if (m.type === "play_tile") playTile(tileText(m.tile), m.end);
        else post({ type: m.type });
      }
    } else if (key === "escape") {
      selected = null;
      say("");
      drawChoices();
      markSelected();
    }
  });

  followMatch(`/matches/${seg(matchId)}/seats/${mySeat}/stream`, {
    token,
    table,
    badge,
    onLine(line) {
      waiting.hidden = !(line.type === "snapshot" && line.view === null);
    },
    onView(v) {
      if (!v) return;
      const turnChanged = !view || view.version !== v.version;
      view = v;
      if (turnChanged && selected && !playsOf(selected).length) selected = null;
      drawChoices();
      drawButtons();
    },
    onError(e) {
      if (e.status === 401 || e.status === 403) say("The seat token was refused: take a seat again from the lobby.", "rejected");
      else say(e.message, "rejected");
    },
  });
}
