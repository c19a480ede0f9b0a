// @ts-check
/**
 * DOM helpers every part of the view shares: elements built from nodes and textContent, the one
 * place sealed HTML is inserted, SVG nodes, an agent's colour, and the person's motion setting.
 *
 * Safety: `html` is the only way HTML reaches the page, and only sealed HTML is given to it (the
 * server draws Markdown with conch_jupyter/core/render.py: markdown-it, then an nh3 allowlist).
 */

const SVG = "http://www.w3.org/2000/svg";

let counter = 0;

/** A number unique in this page, for ids that ARIA attributes point at. */
export function uid() {
  counter += 1;
  return counter;
}

/** @returns {boolean} */
export function reducedMotion() {
  return Boolean(window.matchMedia?.("(prefers-reduced-motion: reduce)").matches);
}

/**
 * A DOM element: `h("li", {class: "conch-note", role: "note"}, "text", child)`.
 * Keys: class, text, html (sealed HTML only), on* (listeners), anything else an attribute.
 * @param {string} tag
 * @param {Record<string, any>} [props]
 * @param {...(Node | string | null | undefined | false)} children
 * @returns {HTMLElement}
 */
export function h(tag, props = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") el.className = value;
    else if (key === "text") el.textContent = value;
    // sealed HTML from core/render.py only
    else if (key === "html") el.innerHTML = value;
    else if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
    else el.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children) {
    if (child) el.append(child);
  }
  return el;
}

/** @param {string} tag @param {Record<string, string | number>} [attrs] */
export function s(tag, attrs = {}) {
  const el = document.createElementNS(SVG, tag);
  for (const [key, value] of Object.entries(attrs)) el.setAttribute(key, String(value));
  return el;
}

/** A stable hue for a name, so an agent keeps its colour everywhere. @param {string} name */
export function hue(name) {
  let sum = 0;
  for (const ch of name) sum = (sum * 31 + (ch.codePointAt(0) || 0)) % 3600;
  return sum % 360;
}

/** @param {string} name @param {string} initials @param {boolean} [outside] */
export function disc(name, initials, outside = false) {
  return h("span", {
    class: "conch-disc" + (outside ? " is-outside" : ""),
    style: `--conch-hue: ${hue(name)}`,
    "aria-hidden": "true",
    text: initials,
  });
}
