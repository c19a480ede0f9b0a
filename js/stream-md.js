// @ts-check
/**
 * Markdown drawn while a reply streams (issue 23, item 5), still sealed: the paragraph that grows
 * is made into nodes with createElement and textContent only — bold, italics, inline code, lists,
 * headings and code fences, as the elements the settled reply will have — so no text from anyone
 * is ever parsed as HTML here. Once the reply settles, the server's sealed HTML (core/render.py)
 * replaces it all, as before.
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

const BULLET = /^(\s*)([-*+]|(\d+)[.)])\s+/;
const HEADING = /^(#{1,6})\s+/;
const FENCE = /^\s*(```|~~~)/;
const QUOTE = /^\s{0,3}> ?/;
// A line that ends in two spaces (or a backslash) breaks there, as CommonMark has it.
const HARD_BREAK = /(?: {2,}|\\)$/;

/**
 * @typedef {{kind: "p" | "quote", lines: string[]}
 *   | {kind: "list", ordered: boolean, start: number, items: string[][]}
 *   | {kind: "heading", level: number, text: string}
 *   | {kind: "code", text: string}} Block
 */

/**
 * A paragraph of a streaming reply as the blocks it will settle into (issue 32): lines of text
 * are a paragraph, bullets a list (an item's next unmarked line goes on in it), `>` lines a
 * quote, `#` lines headings, fenced lines code (a fence still open runs to the end of the text
 * so far). So a
 * list is a list while it streams, not "•" text that jumps into one when it settles.
 * @param {string} text @returns {Block[]}
 */
export function blocksOf(text) {
  /** @type {Block[]} */
  const blocks = [];
  /** @type {string[] | null} the lines that go on now: a paragraph's, or a list item's */
  let open = null;
  /** @type {{kind: "code", text: string} | null} */
  let code = null;
  for (const line of text.split("\n")) {
    if (FENCE.test(line)) {
      code = code ? null : { kind: "code", text: "" };
      if (code) blocks.push(code);
      open = null;
      continue;
    }
    if (code) {
      code.text += (code.text ? "\n" : "") + line;
      continue;
    }
    if (!line.trim()) {
      open = null;
      continue;
    }
    const last = blocks[blocks.length - 1];
    const bullet = BULLET.exec(line);
    if (bullet) {
      const ordered = bullet[3] !== undefined;
      const rest = line.slice(bullet[0].length);
      if (last?.kind === "list" && last.ordered === ordered) {
        open = [rest];
        last.items.push(open);
      } else {
        open = [rest];
        blocks.push({ kind: "list", ordered, start: ordered ? Number(bullet[3]) : 1, items: [open] });
      }
      continue;
    }
    const quoted = QUOTE.exec(line);
    if (quoted) {
      const rest = line.slice(quoted[0].length);
      if (last?.kind === "quote" && open === last.lines) open.push(rest);
      else {
        open = [rest];
        blocks.push({ kind: "quote", lines: open });
      }
      continue;
    }
    const heading = HEADING.exec(line);
    if (heading) {
      blocks.push({ kind: "heading", level: heading[1].length, text: line.slice(heading[0].length) });
      open = null;
      continue;
    }
    if (open) open.push(line.trim());
    else {
      open = [line.trim()];
      blocks.push({ kind: "p", lines: open });
    }
  }
  return blocks;
}

/** A line's inline Markdown as nodes (text only: createElement and textContent). @param {string} line */
function inline(line) {
  return inlinePieces(line).map((p) => (p.kind === "text" ? document.createTextNode(p.text) : h(p.kind, { text: p.text })));
}

/**
 * Lines that go on in one paragraph, as the settled HTML has them: a line end between, or a line
 * break where a line ends in two spaces.
 * @param {string[]} lines
 */
function inlineLines(lines) {
  return lines.flatMap((line, i) => {
    const before = i === 0 ? [] : HARD_BREAK.test(lines[i - 1]) ? [h("br")] : [document.createTextNode("\n")];
    return [...before, ...inline(line.replace(HARD_BREAK, ""))];
  });
}

/**
 * Draw one paragraph of a streaming reply into `block` from its Markdown text so far, as the
 * elements the settled reply will have (p, ul/ol and li, blockquote, h1-h6, pre and code).
 * @param {HTMLElement} block @param {string} text
 */
export function drawParagraph(block, text) {
  const nodes = blocksOf(text).map((b) => {
    if (b.kind === "p") return h("p", {}, ...inlineLines(b.lines));
    if (b.kind === "quote") return h("blockquote", {}, h("p", {}, ...inlineLines(b.lines)));
    if (b.kind === "heading") return h(`h${b.level}`, {}, ...inline(b.text));
    if (b.kind === "code") return h("pre", {}, h("code", { text: b.text }));
    if (b.kind !== "list") return h("p");
    const items = b.items.map((lines) => h("li", {}, ...inlineLines(lines)));
    return h(b.ordered ? "ol" : "ul", b.ordered && b.start !== 1 ? { start: String(b.start) } : {}, ...items);
  });
  block.replaceChildren(...nodes);
}
