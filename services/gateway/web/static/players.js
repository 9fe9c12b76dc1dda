// The ratings table, and one player's page.

import { getJSON, seg, ApiError } from "./api.js";
import { ago, h, name, replace, setTitle } from "./dom.js";
import { familyName, reasonText } from "./describe.js";
import { lineChart, legend } from "./charts.js";

const FAMILIES = ["express", "straight"];
const fmt = (x) => (typeof x === "number" ? x.toFixed(1) : "–");
const playerHref = (key) => `/players/${seg(key)}`;

export async function mount(main, { page, param, query }) {
  if (page === "player") return mountPlayer(main, param);
  setTitle("Players");
  let family = FAMILIES.includes(query.get("family")) ? query.get("family") : "express";
  const select = h("select", { id: "ratings-family" }, FAMILIES.map((f) => h("option", { value: f }, familyName(f))));
  select.value = family;
  const tbody = h("tbody");
  const error = h("p", { class: "error", role: "alert", hidden: true });
  const empty = h("p", { class: "empty", hidden: true }, "Nobody is rated in this game yet.");
  const table = h(
    "table",
    { id: "ratings", class: "ratings" },
    h("caption", { class: "visually-hidden" }, "Ratings"),
    h("thead", {}, h("tr", {}, ["#", "Player", "Rating", "μ ± σ", "Rated", "Won"].map((x) => h("th", { scope: "col" }, x)))),
    tbody,
  );
  main.append(
    h("div", { class: "page-head" }, h("h1", {}, "Players"), h("p", { class: "subtitle" }, "Ratings by game: the rating is μ − 3σ (a cautious estimate of skill).")),
    h("div", { class: "filters" }, h("label", { for: "ratings-family" }, "Game "), select),
    error,
    h("div", { class: "table-scroll" }, table),
    empty,
  );

  async function load() {
    try {
      const data = await getJSON(`/ratings?family=${seg(family)}`);
      error.hidden = true;
      const rows = (data.ratings || []).map((r, i) =>
        h(
          "tr",
          { "data-key": r.key },
          h("td", {}, String(i + 1)),
          h("th", { scope: "row" }, h("a", { href: playerHref(r.key) }, name(r.name)), h("small", { class: "key" }, ` ${r.key}`)),
          h("td", { class: "num" }, fmt(r.ordinal)),
          h("td", { class: "num" }, `${fmt(r.mu)} ± ${fmt(r.sigma)}`),
          h("td", { class: "num" }, String(r.rated)),
          h("td", { class: "num" }, String(r.won)),
        ),
      );
      replace(tbody, rows);
      empty.hidden = rows.length > 0;
    } catch (e) {
      error.hidden = false;
      error.textContent = e.message;
      replace(tbody);
    }
  }
  select.addEventListener("change", () => {
    family = select.value;
    const u = new URL(location.href);
    u.searchParams.set("family", family);
    history.replaceState(null, "", u.pathname + u.search);
    load();
  });
  await load();
}

async function mountPlayer(main, key) {
  setTitle(key);
  const title = h("h1", { id: "player-name-title" }, key);
  main.append(h("div", { class: "page-head" }, h("p", { class: "crumbs" }, h("a", { href: "/players" }, "Players")), title));
  let data;
  try {
    data = await getJSON(`/players/${seg(key)}`);
  } catch (e) {
    const text = e instanceof ApiError && e.status === 404 ? "This player has not played any match yet." : e.message;
    main.append(h("p", { class: "error", role: "alert" }, text));
    return;
  }
  setTitle(data.name);
  replace(title, name(data.name));
  const kind = { account: "account", house: "house bot", guest: "guest" }[data.kind] || data.kind;
  title.after(h("p", { class: "subtitle" }, `${kind} · `, h("code", {}, data.key)));

  const r = data.results || {};
  const results = h(
    "dl",
    { id: "results", class: "results" },
    [
      ["Played", r.played],
      ["Won", r.won],
      ["Points for", r.points_for],
      ["Points against", r.points_against],
      ["Aborted", r.aborted],
      ["Cancelled", r.cancelled],
    ].map(([k, v]) => h("div", {}, h("dt", {}, k), h("dd", {}, String(v ?? 0)))),
  );
  const ratings = h(
    "ul",
    { class: "rating-list" },
    (data.ratings || []).map((x) => h("li", {}, h("strong", {}, familyName(x.family)), ` ${fmt(x.ordinal)} `, h("small", {}, `(μ ${fmt(x.mu)} ± ${fmt(x.sigma)}, ${x.rated} rated, ${x.won} won)`))),
  );
  const past = data.history || [];
  const families = FAMILIES.filter((f) => past.some((x) => x.family === f));
  const series = families.map((f) => ({
    label: familyName(f),
    points: past.map((x, i) => [i + 1, x]).filter(([, x]) => x.family === f).map(([i, x]) => [i, x.ordinal]),
  }));
  const chart = h(
    "div",
    { id: "rating-chart", class: "chart-box" },
    lineChart(series, { title: "Rating over matches", xLabel: "rated match", yLabel: "rating" }),
  );
  const recentBody = h(
    "tbody",
    {},
    (data.recent || []).map((m) => {
      const mine = m.sides || [];
      const won = m.winner !== null && m.winner !== undefined && mine.includes(m.winner);
      const outcome = m.winner === null || m.winner === undefined ? `no winner (${reasonText(m.reason)})` : won ? "won" : "lost";
      return h(
        "tr",
        { "data-match-id": m.match_id },
        h("th", { scope: "row" }, h("a", { href: `/replay/${seg(m.match_id)}` }, h("code", {}, m.match_id))),
        h("td", {}, familyName(m.family)),
        h("td", {}, (m.players || []).flatMap((p, i) => [i ? " · " : "", (m.seats || []).includes(i) ? h("strong", {}, name(p)) : name(p)])),
        h("td", { class: "score" }, (m.scores || []).join("–")),
        h("td", { class: won ? "won" : "" }, outcome),
        h("td", {}, ago(m.ended)),
      );
    }),
  );
  main.append(
    h("div", { class: "player-grid" },
      h("section", { class: "panel", "aria-labelledby": "results-title" }, h("h2", { id: "results-title" }, "Results"), results, ratings),
      h("section", { class: "panel", "aria-labelledby": "chart-title" }, h("h2", { id: "chart-title" }, "Rating"), chart, legend(series.map((x) => x.label))),
    ),
    h(
      "section",
      { class: "lobby-section", "aria-labelledby": "recent-title" },
      h("h2", { id: "recent-title" }, "Recent matches"),
      h(
        "div",
        { class: "table-scroll" },
        h("table", { id: "recent", class: "matches" }, h("thead", {}, h("tr", {}, ["Match", "Game", "Players", "Score", "Result", "Ended"].map((x) => h("th", { scope: "col" }, x)))), recentBody),
      ),
    ),
  );
}
