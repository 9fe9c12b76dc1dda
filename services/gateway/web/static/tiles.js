// Domino tiles as SVG: faces with pips, and face-down backs.

import { s } from "./dom.js";

// Pip positions on a 100x100 half, as [x, y] in a 3x3 grid (0..2); sets above double-six
// use a 3x4 grid (rows 0..3).
const GRID3 = {
  0: [],
  1: [[1, 1]],
  2: [[0, 0], [2, 2]],
  3: [[0, 0], [1, 1], [2, 2]],
  4: [[0, 0], [2, 0], [0, 2], [2, 2]],
  5: [[0, 0], [2, 0], [1, 1], [0, 2], [2, 2]],
  6: [[0, 0], [2, 0], [0, 1], [2, 1], [0, 2], [2, 2]],
  7: [[0, 0], [2, 0], [0, 1], [1, 1], [2, 1], [0, 2], [2, 2]],
  8: [[0, 0], [1, 0], [2, 0], [0, 1], [2, 1], [0, 2], [1, 2], [2, 2]],
  9: [[0, 0], [1, 0], [2, 0], [0, 1], [1, 1], [2, 1], [0, 2], [1, 2], [2, 2]],
};
const GRID4 = {
  10: [[0, 0], [2, 0], [0, 1], [1, 1], [2, 1], [0, 2], [1, 2], [2, 2], [0, 3], [2, 3]],
  11: [[0, 0], [1, 0], [2, 0], [0, 1], [2, 1], [0, 2], [1, 1.5], [2, 2], [0, 3], [1, 3], [2, 3]],
  12: [[0, 0], [1, 0], [2, 0], [0, 1], [1, 1], [2, 1], [0, 2], [1, 2], [2, 2], [0, 3], [1, 3], [2, 3]],
};

function pips(n, ox, oy) {
  const out = [];
  if (n <= 9) {
    for (const [gx, gy] of GRID3[n]) {
      out.push(s("circle", { class: "pip", cx: ox + 22 + gx * 28, cy: oy + 22 + gy * 28, r: n > 6 ? 8 : 9.5 }));
    }
  } else {
    for (const [gx, gy] of GRID4[n] || []) {
      out.push(s("circle", { class: "pip", cx: ox + 22 + gx * 28, cy: oy + 17 + gy * 22, r: 7 }));
    }
  }
  return out;
}

export const tileText = (t) => `${t[0]}-${t[1]}`;

/**
 * A tile's face. `tile` is the tile as the server gives it (low half first: its data-tile and
 * name); `halves` is the order in which to draw them (left-right, or top-bottom when
 * `vertical`), by default the tile's own.
 */
export function tileFace(tile, { halves = tile, vertical = false, extraClass = "" } = {}) {
  const [a, b] = halves;
  const w = vertical ? 100 : 200;
  const hgt = vertical ? 200 : 100;
  const label = tileText(tile);
  return s(
    "svg",
    {
      class: ["tile", vertical ? "v" : "h", extraClass],
      "data-tile": label,
      role: "img",
      "aria-label": label,
      viewBox: `0 0 ${w} ${hgt}`,
      focusable: "false",
    },
    s("title", {}, label),
    s("rect", { class: "body", x: 3, y: 3, width: w - 6, height: hgt - 6, rx: 14 }),
    vertical
      ? s("line", { class: "bar", x1: 16, y1: 100, x2: 84, y2: 100 })
      : s("line", { class: "bar", x1: 100, y1: 16, x2: 100, y2: 84 }),
    pips(a, 0, 0),
    vertical ? pips(b, 0, 100) : pips(b, 100, 0),
  );
}

/** A face-down tile. */
export function tileBack({ vertical = true } = {}) {
  const w = vertical ? 100 : 200;
  const hgt = vertical ? 200 : 100;
  return s(
    "svg",
    {
      class: ["tile", "back", vertical ? "v" : "h"],
      role: "img",
      "aria-label": "hidden tile",
      viewBox: `0 0 ${w} ${hgt}`,
      focusable: "false",
    },
    s("rect", { class: "body", x: 3, y: 3, width: w - 6, height: hgt - 6, rx: 14 }),
    s("rect", { class: "inlay", x: 18, y: 18, width: w - 36, height: hgt - 36, rx: 8 }),
  );
}
