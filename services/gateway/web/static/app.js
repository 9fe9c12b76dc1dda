// The pages' router: one HTML shell, the page chosen by location.pathname.

import { h, replace, setTitle } from "./dom.js";

const ROUTES = [
  [/^\/$/, "lobby", () => import("./lobby.js")],
  [/^\/watch\/([^/]+)$/, "watch", () => import("./watch.js")],
  [/^\/replay\/([^/]+)$/, "replay", () => import("./replay.js")],
  [/^\/play\/([^/]+)$/, "play", () => import("./play.js")],
  [/^\/players\/?$/, "players", () => import("./players.js")],
  [/^\/players\/(.+)$/, "player", () => import("./players.js")],
];

async function start() {
  const main = document.getElementById("page");
  const path = location.pathname;
  for (const [pattern, page, load] of ROUTES) {
    const m = pattern.exec(path);
    if (!m) continue;
    main.dataset.page = page;
    replace(main);
    for (const a of document.querySelectorAll("[data-nav]")) {
      const here = a.dataset.nav === page || (a.dataset.nav === "players" && page === "player");
      if (here) a.setAttribute("aria-current", "page");
    }
    let param = m[1];
    if (param !== undefined) {
      try {
        param = decodeURIComponent(param);
      } catch {
        /* keep it as it came */
      }
    }
    try {
      const mod = await load();
      await mod.mount(main, { page, param, query: new URLSearchParams(location.search) });
    } catch (e) {
      console.error(e);
      main.append(h("p", { class: "error", role: "alert" }, `This page failed to load: ${e.message}`));
    }
    return;
  }
  main.dataset.page = "missing";
  setTitle("Not found");
  replace(main, h("h1", {}, "Page not found"), h("p", {}, h("a", { href: "/" }, "Back to the lobby")));
}

start();
