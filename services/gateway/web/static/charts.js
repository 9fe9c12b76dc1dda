// Small SVG line charts (scores over a match, a player's rating).

import { s } from "./dom.js";

/**
 * A line chart. `series` = [{label, points: [[x, y], ...]}]; `xLabel`, `yLabel` name the axes;
 * `guide` draws a dashed horizontal line at that y (the target). Colours come from CSS
 * (.series-0, .series-1, ...).
 */
export function lineChart(series, { title, xLabel = "", yLabel = "", guide = null, width = 320, height = 170 } = {}) {
  const pad = { l: 36, r: 10, t: 10, b: 26 };
  const all = series.flatMap((sr) => sr.points);
  const xs = all.map((p) => p[0]);
  const ys = all.map((p) => p[1]);
  if (guide !== null) ys.push(guide);
  let x0 = Math.min(0, ...xs);
  let x1 = Math.max(1, ...xs);
  let y0 = Math.min(0, ...ys);
  let y1 = Math.max(1, ...ys);
  if (x0 === x1) x1 = x0 + 1;
  if (y0 === y1) y1 = y0 + 1;
  const span = y1 - y0;
  y1 += span * 0.05;
  const X = (x) => pad.l + ((x - x0) / (x1 - x0)) * (width - pad.l - pad.r);
  const Y = (y) => height - pad.b - ((y - y0) / (y1 - y0)) * (height - pad.t - pad.b);
  const r2 = (v) => Math.round(v * 10) / 10;

  const kids = [s("title", {}, title || "chart")];
  // axes and a few ticks
  kids.push(s("line", { class: "axis", x1: pad.l, y1: Y(y0), x2: width - pad.r, y2: Y(y0) }));
  kids.push(s("line", { class: "axis", x1: pad.l, y1: pad.t, x2: pad.l, y2: height - pad.b }));
  for (const v of ticks(y0, y1 - span * 0.05, 4)) {
    kids.push(s("line", { class: "grid", x1: pad.l, y1: r2(Y(v)), x2: width - pad.r, y2: r2(Y(v)) }));
    kids.push(s("text", { class: "tick", x: pad.l - 4, y: r2(Y(v)) + 3, "text-anchor": "end" }, fmt(v)));
  }
  for (const v of ticks(x0, x1, 6)) {
    if (!Number.isInteger(v)) continue;
    kids.push(s("text", { class: "tick", x: r2(X(v)), y: height - pad.b + 12, "text-anchor": "middle" }, String(v)));
  }
  if (xLabel) kids.push(s("text", { class: "axis-label", x: width - pad.r, y: height - 2, "text-anchor": "end" }, xLabel));
  if (yLabel) kids.push(s("text", { class: "axis-label", x: 2, y: pad.t - 1 }, yLabel));
  if (guide !== null) {
    kids.push(s("line", { class: "guide", x1: pad.l, y1: r2(Y(guide)), x2: width - pad.r, y2: r2(Y(guide)) }));
  }
  series.forEach((sr, i) => {
    if (!sr.points.length) return;
    const pts = sr.points.map(([x, y]) => `${r2(X(x))},${r2(Y(y))}`).join(" ");
    kids.push(s("polyline", { class: `line series-${i % 6}`, points: pts }));
    for (const [x, y] of sr.points) {
      kids.push(s("circle", { class: `dot series-${i % 6}`, cx: r2(X(x)), cy: r2(Y(y)), r: 2.6 }, s("title", {}, `${sr.label}: ${fmt(y)}`)));
    }
  });
  return s("svg", { class: "chart", viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": title || "chart" }, kids);
}

function fmt(v) {
  return Math.abs(v) >= 100 || Number.isInteger(v) ? String(Math.round(v)) : v.toFixed(1);
}

function ticks(lo, hi, count) {
  const span = hi - lo;
  if (span <= 0) return [lo];
  const raw = span / count;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((m) => m * mag).find((st) => span / st <= count) || 10 * mag;
  const out = [];
  for (let v = Math.ceil(lo / step) * step; v <= hi + 1e-9; v += step) out.push(Math.round(v * 1e6) / 1e6);
  return out;
}

/** A legend: one swatch and label per series. */
export function legend(labels) {
  const ul = document.createElement("ul");
  ul.className = "legend";
  labels.forEach((label, i) => {
    const li = document.createElement("li");
    const sw = document.createElement("span");
    sw.className = `swatch series-${i % 6}`;
    sw.setAttribute("aria-hidden", "true");
    const b = document.createElement("bdi");
    b.textContent = label;
    li.append(sw, b);
    ul.append(li);
  });
  return ul;
}
