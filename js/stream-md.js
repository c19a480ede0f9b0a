// @ts-check
/**
 * Markdown drawn while a reply streams (issue 23, item 5), still sealed: the paragraph that grows
 * is made into nodes with createElement and textContent only — bold, italics, inline code, list
 * bullets, headings and code fences — so no text from anyone is ever parsed as HTML here. Once the
 * reply settles, the server's sealed HTML (core/render.py) replaces it all, as before.
 *
 * Only the paragraph still growing is drawn again on each chunk, so a reply costs what its length
 * does (its paragraphs are blocks of their own: reconcile.js's paragraphPieces). An opened `**`
 * or `` ` `` not yet closed formats to the end of the text so far: the words look as they will.
 */

import { h } from "./dom.js";

/** @typedef {{kind: "text" | "strong" | "em" | "code", text: string}} Piece */

const INLINE = /(`+)|(\*\*|__)|(\*|_)/g;

/**
 * A line's inline Markdown as pieces: `code`, **strong**, *em* (and _em_ between spaces).
 * @param {string} line @returns {Piece[]}
 */
export function inlinePieces(line) {
  /** @type {Piece[]} */
  const out = [];
  let at = 0;
  let text = "";
  const push = (/** @type {Piece["kind"]} */ kind, /** @type {string} */ words) => {
    if (!words) return;
    const last = out[out.length - 1];
    if (last && last.kind === kind) last.text += words;
    else out.push({ kind, text: words });
  };
  INLINE.lastIndex = 0;
  for (let m = INLINE.exec(line); m; m = INLINE.exec(line)) {
    const start = m.index;
    const mark = m[0];
    if (m[3] === "_" && /\w/.test(line[start - 1] || "")) continue; // snake_case stays as it is
    const close = line.indexOf(mark, start + mark.length);
    const end = close < 0 ? line.length : close;
    const inner = line.slice(start + mark.length, end);
    if (!inner || (!m[1] && /^\s/.test(inner))) continue; // "* " is no emphasis
    text += line.slice(at, start);
    push("text", text);
    text = "";
    if (m[1]) push("code", inner);
    else if (m[2]) for (const p of inlinePieces(inner)) push(p.kind === "text" ? "strong" : p.kind, p.text);
    else for (const p of inlinePieces(inner)) push(p.kind === "text" ? "em" : p.kind, p.text);
    at = close < 0 ? line.length : close + mark.length;
    INLINE.lastIndex = at;
  }
  push("text", text + line.slice(at));
  return out;
}

const BULLET = /^(\s*)([-*+]|\d+[.)])\s+/;
const HEADING = /^#{1,6}\s+/;
const FENCE = /^\s*(```|~~~)/;

/**
 * Draw one paragraph of a streaming reply into `block` from its Markdown text so far.
 * @param {HTMLElement} block @param {string} text
 */
export function drawParagraph(block, text) {
  /** @type {Node[]} */
  const nodes = [];
  let fenced = false;
  const lines = text.split("\n");
  lines.forEach((line, i) => {
    const end = i < lines.length - 1 ? "\n" : "";
    if (FENCE.test(line)) {
      fenced = !fenced;
      return; // the fence itself is not shown
    }
    if (fenced) {
      nodes.push(h("code", { class: "conch-stream-code", text: line + end }));
      return;
    }
    let rest = line;
    /** @type {string | null} */
    let wrap = null;
    const bullet = BULLET.exec(rest);
    if (bullet) {
      const mark = /\d/.test(bullet[2]) ? `${bullet[2]} ` : "• ";
      nodes.push(h("span", { class: "conch-stream-bullet", text: bullet[1] + mark }));
      rest = rest.slice(bullet[0].length);
    } else if (HEADING.test(rest)) {
      rest = rest.replace(HEADING, "");
      wrap = "conch-stream-heading";
    }
    const inline = inlinePieces(rest).map((p) =>
      p.kind === "text" ? document.createTextNode(p.text) : h(p.kind, p.kind === "code" ? { class: "conch-stream-code", text: p.text } : { text: p.text }),
    );
    if (wrap) nodes.push(h("strong", { class: wrap }, ...inline));
    else nodes.push(...inline);
    if (end) nodes.push(document.createTextNode(end));
  });
  block.replaceChildren(...nodes);
}
