// The lobby: live, finished and open matches, polled every 2 s; take a seat or play the bots.

import { getJSON, postJSON, ratingsByName, seg, ApiError } from "./api.js";
import { ago, h, name, replace, setTitle } from "./dom.js";
import { familyName, reasonText, rulesText } from "./describe.js";
import { tokenKey } from "./play.js";

const POLL_MS = 2000;
const NAME_KEY = "domino.name";

function savedName() {
  try {
    return localStorage.getItem(NAME_KEY) || "";
  } catch {
    return "";
  }
}

function saveName(value) {
  try {
    localStorage.setItem(NAME_KEY, value);
  } catch {
    /* private mode: nothing kept */
  }
}

function field(label, control, hint, hintId) {
  return h("div", { class: "field" }, h("label", { for: control.id }, label), control, hint ? h("small", { id: hintId }, hint) : null);
}

export async function mount(main) {
  setTitle("Lobby");
  const playerName = h("input", { id: "player-name", name: "name", type: "text", maxlength: "20", pattern: "[A-Za-z0-9][A-Za-z0-9_\\-]{1,19}", autocomplete: "nickname", placeholder: "e.g. Ada", value: savedName(), "aria-describedby": "player-name-hint" });
  const family = h("select", { id: "new-family", name: "family" }, h("option", { value: "express" }, "Express (block game)"), h("option", { value: "straight" }, "Straight (all fives)"));
  const opponent = h("select", { id: "new-opponent", name: "opponent" }, h("option", { value: "random" }, "random"), h("option", { value: "greedy" }, "greedy"), h("option", { value: "search" }, "search"));
  opponent.value = "greedy";
  const players = h("select", { id: "new-players", name: "players" }, h("option", { value: "2" }, "2 players"), h("option", { value: "4" }, "4 players (partners)"));
  const target = h("input", { id: "new-target", name: "target", type: "number", min: "1", max: "1000", step: "1", placeholder: "100", inputmode: "numeric" });
  const start = h("button", { id: "start-game", type: "submit", class: "primary" }, "Start");
  const formMessage = h("p", { id: "lobby-message", class: "message", role: "alert" });
  const form = h(
    "form",
    { id: "new-game", class: "new-game", "aria-labelledby": "new-game-title" },
    h("h2", { id: "new-game-title" }, "Play the bots"),
    h("div", { class: "fields" }, field("Your name", playerName, "2–20 letters, digits, _ or -", "player-name-hint"), field("Game", family), field("Opponents", opponent), field("Players", players), field("Target", target, "empty: the game's default")),
    h("div", { class: "form-actions" }, start),
    formMessage,
  );
  family.addEventListener("change", () => {
    target.placeholder = family.value === "straight" ? "250" : "100";
  });

  const filterFamily = h("select", { id: "filter-family" }, h("option", { value: "" }, "all games"), h("option", { value: "express" }, "Express"), h("option", { value: "straight" }, "Straight"));
  const filterPlayer = h("input", { id: "filter-player", type: "search", placeholder: "exact name", autocomplete: "off" });
  const filters = h(
    "div",
    { class: "filters", role: "search", "aria-label": "Filter matches" },
    h("label", { for: "filter-family" }, "Game "),
    filterFamily,
    h("label", { for: "filter-player" }, "Player "),
    filterPlayer,
  );

  const makeTable = (id, caption, heads) => {
    const tbody = h("tbody");
    const empty = h("p", { class: "empty" }, "None right now.");
    const t = h("table", { id, class: "matches" }, h("caption", { class: "visually-hidden" }, caption), h("thead", {}, h("tr", {}, heads.map((x) => h("th", { scope: "col" }, x)))), tbody);
    return { table: t, tbody, empty };
  };
  const open = makeTable("open-matches", "Matches waiting for players", ["Match", "Game", "Seats", "Created"]);
  const live = makeTable("live-matches", "Matches being played", ["Watch", "Game", "Players", "Round", "Score"]);
  const done = makeTable("finished-matches", "Finished matches", ["Replay", "Game", "Players", "Score", "Result"]);
  const section = (title, id, t) => h("section", { class: "lobby-section", "aria-labelledby": id }, h("h2", { id }, title), h("div", { class: "table-scroll" }, t.table), t.empty);
  const updated = h("p", { class: "updated", "aria-live": "off" });

  main.append(
    h("div", { class: "page-head" }, h("h1", {}, "Lobby"), h("p", { class: "subtitle" }, "Dominoes against the house bots, or against each other. Matches update every two seconds.")),
    form,
    filters,
    section("Open matches", "open-title", open),
    section("Live matches", "live-title", live),
    section("Finished matches", "finished-title", done),
    updated,
  );

  const needName = () => {
    const value = playerName.value.trim();
    if (!value) {
      formMessage.textContent = "Enter your name first.";
      playerName.focus();
      return null;
    }
    if (!playerName.checkValidity()) {
      formMessage.textContent = "A name is 2 to 20 letters, digits, _ or -, starting with a letter or digit.";
      playerName.focus();
      return null;
    }
    saveName(value);
    return value;
  };

  async function join(matchId, seat, who) {
    const joined = await postJSON(`/matches/${seg(matchId)}/join`, { name: who, seat });
    sessionStorage.setItem(tokenKey(matchId, joined.seat), joined.token);
    location.assign(`/play/${seg(matchId)}?seat=${joined.seat}`);
  }

  const failed = (e) => {
    formMessage.textContent = e instanceof ApiError ? `${e.body.rule ? e.body.rule + ": " : ""}${e.message}` : e.message;
  };

  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const who = needName();
    if (!who) return;
    const n = Number(players.value);
    const rules = { family: family.value, players: n, partners: n === 4 };
    const tv = target.value.trim();
    if (tv) rules.target = Number(tv);
    start.disabled = true;
    formMessage.textContent = "Starting…";
    try {
      const seats = [null, ...Array(n - 1).fill(opponent.value)];
      const created = await postJSON("/matches", { seats, rules, deadline_ms: 60000 });
      await join(created.match.match_id, 0, who);
    } catch (err) {
      failed(err);
      start.disabled = false;
    }
  });

  main.addEventListener("click", async (e) => {
    const b = e.target.closest?.("button.take-seat");
    if (!b) return;
    const who = needName();
    if (!who) return;
    b.disabled = true;
    try {
      await join(b.dataset.matchId, Number(b.dataset.seat), who);
    } catch (err) {
      failed(err);
      b.disabled = false;
    }
  });

  // -- the tables, kept in step with the server without losing focus ------------------------

  function sync(t, rows) {
    const keep = new Map();
    for (const tr of t.tbody.querySelectorAll("tr[data-match-id]")) keep.set(tr.dataset.matchId, tr);
    const want = rows.map(([id, sig, build]) => {
      const old = keep.get(id);
      if (old && old.dataset.sig === sig) {
        keep.delete(id);
        return old;
      }
      const tr = build();
      tr.dataset.matchId = id;
      tr.dataset.sig = sig;
      return tr;
    });
    for (const tr of keep.values()) tr.remove();
    want.forEach((tr, i) => {
      if (t.tbody.children[i] !== tr) t.tbody.insertBefore(tr, t.tbody.children[i] || null);
    });
    while (t.tbody.children.length > want.length) t.tbody.lastElementChild.remove();
    t.table.hidden = rows.length === 0;
    t.empty.hidden = rows.length > 0;
  }

  const withRating = (player, ratings) => {
    const r = ratings.get(player);
    return h("span", { class: "player" }, name(player), r ? h("span", { class: "rating", title: `rating (ordinal), ${r.rated} rated matches` }, ` ${r.ordinal.toFixed(1)}`) : null);
  };
  const playersCell = (list, ratings, winnerSeats = []) =>
    h("td", { class: "players" }, list.flatMap((p, i) => [i ? h("span", { class: "vs" }, " · ") : null, winnerSeats.includes(i) ? h("strong", {}, withRating(p, ratings)) : withRating(p, ratings)]));
  const idCell = (id, href) => h("th", { scope: "row" }, h("a", { href, class: "match-link" }, h("code", {}, id)));
  const ratingSig = (list, ratings) => list.map((p) => ratings.get(p)?.ordinal?.toFixed(1) ?? "").join(",");

  const matchesFilter = (fam, players) => {
    const f = filterFamily.value;
    const p = filterPlayer.value.trim();
    return (!f || fam === f) && (!p || players.includes(p));
  };

  async function refresh() {
    const f = filterFamily.value;
    const p = filterPlayer.value.trim();
    const q = new URLSearchParams();
    if (f) q.set("family", f);
    if (p) q.set("player", p);
    const qs = q.toString() ? `&${q}` : "";
    const [openList, liveList, doneList, rx, rs] = await Promise.all([
      getJSON(`/matches?status=open`),
      getJSON(`/matches?status=live&limit=50${qs}`),
      getJSON(`/matches?status=finished&limit=30${qs}`),
      ratingsByName("express"),
      ratingsByName("straight"),
    ]);
    const ratingsFor = (fam) => (fam === "straight" ? rs : rx);

    sync(
      open,
      openList.matches
        .filter((m) => matchesFilter(m.rules.family, m.seats.map((x) => x.name)))
        .map((m) => {
          const ratings = ratingsFor(m.rules.family);
          const sig = JSON.stringify([m.status, m.seats, ratingSig(m.seats.map((x) => x.name), ratings)]);
          return [
            m.match_id,
            sig,
            () =>
              h(
                "tr",
                {},
                idCell(m.match_id, `/watch/${seg(m.match_id)}`),
                h("td", {}, rulesText(m.rules), h("br"), h("small", {}, `${Math.round(m.deadline_ms / 1000)} s a move`)),
                h(
                  "td",
                  { class: "seats" },
                  h(
                    "ul",
                    { class: "seat-list" },
                    m.seats.map((x) =>
                      h(
                        "li",
                        {},
                        `${x.seat}: `,
                        x.kind === "open"
                          ? h("button", { type: "button", class: "take-seat", "data-seat": String(x.seat), "data-match-id": m.match_id, "aria-label": `Take seat ${x.seat} of ${m.match_id}` }, "Take seat")
                          : withRating(x.name, ratings),
                        x.kind === "bot" ? h("small", { class: "kind" }, " (bot)") : null,
                      ),
                    ),
                  ),
                ),
                h("td", {}, ago(m.created)),
              ),
          ];
        }),
    );

    sync(
      live,
      liveList.matches
        .filter((m) => matchesFilter(m.family, m.players))
        .map((m) => {
          const ratings = ratingsFor(m.family);
          const sig = JSON.stringify([m.version, m.scores, m.round, m.turn, ratingSig(m.players, ratings)]);
          return [
            m.match_id,
            sig,
            () =>
              h(
                "tr",
                {},
                idCell(m.match_id, `/watch/${seg(m.match_id)}`),
                h("td", {}, familyName(m.family)),
                playersCell(m.players, ratings),
                h("td", {}, String(m.round)),
                h("td", { class: "score" }, m.scores.join("–")),
              ),
          ];
        }),
    );

    sync(
      done,
      doneList.matches
        .filter((m) => matchesFilter(m.family, m.players))
        .map((m) => {
          const ratings = ratingsFor(m.family);
          const sig = JSON.stringify([m.version, m.scores, m.winner, ratingSig(m.players, ratings)]);
          const sides = m.scores.length;
          const winnerSeats = m.winner === null || m.winner === undefined ? [] : m.players.map((_, i) => i).filter((i) => i % sides === m.winner);
          return [
            m.match_id,
            sig,
            () =>
              h(
                "tr",
                {},
                idCell(m.match_id, `/replay/${seg(m.match_id)}`),
                h("td", {}, familyName(m.family)),
                playersCell(m.players, ratings, winnerSeats),
                h("td", { class: "score" }, m.scores.join("–")),
                h("td", {}, m.winner === null || m.winner === undefined ? `no winner (${reasonText(m.reason)})` : reasonText(m.reason), h("br"), h("small", {}, ago(m.updated))),
              ),
          ];
        }),
    );
    updated.textContent = `Updated ${new Date().toLocaleTimeString()}`;
  }

  let timer = null;
  let running = false;
  let again = false;
  async function loop() {
    clearTimeout(timer);
    if (running) {
      again = true; // a filter changed mid-refresh: refresh once more when it is done
      return;
    }
    running = true;
    try {
      await refresh();
      updated.classList.remove("error");
    } catch (e) {
      updated.textContent = `Could not update: ${e.message}`;
      updated.classList.add("error");
    } finally {
      running = false;
    }
    if (again) {
      again = false;
      loop();
      return;
    }
    timer = setTimeout(loop, POLL_MS);
  }
  filterFamily.addEventListener("change", loop);
  let typing = null;
  filterPlayer.addEventListener("input", () => {
    clearTimeout(typing);
    typing = setTimeout(loop, 300);
  });
  document.addEventListener("visibilitychange", () => {
    if (!document.hidden) loop();
  });
  loop();
}
