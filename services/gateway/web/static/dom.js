// Building DOM from data without ever parsing server strings as markup.

const SVG_NS = "http://www.w3.org/2000/svg";

function fill(el, attrs, children) {
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name === "class") el.setAttribute("class", Array.isArray(value) ? value.filter(Boolean).join(" ") : value);
    else if (name === "text") el.textContent = String(value);
    else if (name.startsWith("on") && typeof value === "function") el.addEventListener(name.slice(2), value);
    else el.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

/** An HTML element: h("a", {href: "/"}, "text", otherNode). Strings become text nodes. */
export function h(tag, attrs = {}, ...children) {
  return fill(document.createElement(tag), attrs, children);
}

/** An SVG element, same calling convention as h(). */
export function s(tag, attrs = {}, ...children) {
  return fill(document.createElementNS(SVG_NS, tag), attrs, children);
}

/** A player's name, isolated so that bidi overrides in it cannot reorder the text around it. */
export function name(text) {
  return h("bdi", { class: "name" }, text ?? "?");
}

/** Replace every child of `el`. */
export function replace(el, ...children) {
  el.replaceChildren();
  return fill(el, {}, children);
}

/** A link to a page of this site; `path` segments are encoded by the caller. */
export function link(href, ...children) {
  return h("a", { href }, ...children);
}

/** Readable "time ago" from seconds since the epoch. */
export function ago(seconds) {
  if (!seconds) return "";
  const d = Math.max(0, Date.now() / 1000 - seconds);
  if (d < 60) return `${Math.round(d)} s ago`;
  if (d < 3600) return `${Math.round(d / 60)} min ago`;
  if (d < 86400) return `${Math.round(d / 3600)} h ago`;
  return new Date(seconds * 1000).toLocaleDateString();
}

export function setTitle(text) {
  document.title = text ? `${text} · Dominoes` : "Dominoes";
}
