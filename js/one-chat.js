// @ts-check
/**
 * One chat per notebook (issue 23, item 4): a page draws each chat in full once, live, in the
 * first output that shows it; every other output of the same chat (another `%conch`, `%%conch`
 * or `this_chat()` cell) folds to one line that says where the chat is and takes you there. So a
 * pending run is answered in one place, and the page follows the chat's stream once. When the
 * full chat's output goes (its cell run again or cleared), the next folded output draws it.
 * `ChatWidget(id)` of another chat is another chat: drawn in full where it is first shown.
 *
 * One chat per view, in fact (issue 32): JupyterLab's own second views — *Create New View for
 * Cell Output* (a cell's output in a panel of its own) and *New View for Notebook* (a second
 * panel of the notebook) — each draw the chat in full too, where it is read and answered, not
 * as a line pointing at a chat in another panel.
 */

import { h, reducedMotion } from "./dom.js";

/**
 * @typedef {{el: HTMLElement, line: HTMLElement | null, cleanup: (() => void) | null, promote(): void}} Shown
 * @typedef {{full: Shown | null, waiting: Shown[]}} Place
 */

/**
 * Chat id and view -> the output that draws it, and those folded to a line. Kept on the page, not in this
 * module: anywidget imports the module once per widget model, and `%conch`, `%%conch` and
 * `this_chat()` outputs may each have a model of their own.
 * @type {Map<string, Place>}
 */
const PLACES = (() => {
  const page = /** @type {any} */ (globalThis);
  const key = Symbol.for("conch.one-chat");
  page[key] ??= new Map();
  return page[key];
})();

/**
 * Where the full chat is, in words: "in the output of cell [3]" when the page numbers cells.
 * @param {HTMLElement} el
 */
function whereWords(el) {
  const prompt = el.closest(".jp-Cell")?.querySelector(".jp-InputArea-prompt")?.textContent?.trim() || "";
  const number = /^\[(\d+)\]:?$/.exec(prompt)?.[1];
  return number ? `in the output of cell [${number}]` : "in another cell's output";
}

/** @param {Place} place @returns {HTMLElement} */
function pointer(place) {
  const words = h("span", { class: "conch-elsewhere-words" });
  const say = () => {
    words.textContent = `This notebook's chat is drawn ${place.full ? whereWords(place.full.el) : "in another cell's output"}, live: read, write and answer there.`;
  };
  const go = h("button", {
    type: "button",
    class: "conch-button conch-quiet",
    text: "Go to the chat",
    onclick: () => {
      const full = place.full?.el;
      if (!full) return;
      full.scrollIntoView({ block: "start", behavior: reducedMotion() ? "auto" : "smooth" });
      /** @type {HTMLElement | null} */ (full.querySelector(".conch-input"))?.focus({ preventScroll: true });
    },
  });
  const line = h("div", { class: "conch conch-elsewhere", role: "note" }, h("span", { class: "conch-mark", "aria-hidden": "true" }), words, go);
  // The cell's number is known once the page has laid the output in: said then, and on hover.
  requestAnimationFrame(say);
  line.addEventListener("pointerenter", say);
  say();
  return line;
}

// The panels a chat is drawn once in: a notebook's (JupyterLab's or Notebook 7's), a cell
// output's own view, or any other main-area panel.
const VIEW = ".jp-LinkedOutputView, .jp-NotebookPanel, .jp-MainAreaWidget";

/** A name for each view, kept on the page as PLACES is. @type {WeakMap<Element, string>} */
const VIEWS = (() => {
  const page = /** @type {any} */ (globalThis);
  const key = Symbol.for("conch.one-chat.views");
  page[key] ??= new WeakMap();
  return page[key];
})();

/** Which view `el` is in: "page" outside any (a plain page, the test harness). @param {HTMLElement} el */
function viewOf(el) {
  const view = el.closest(VIEW);
  if (!view) return "page";
  let name = VIEWS.get(view);
  if (!name) {
    name = Math.random().toString(36).slice(2);
    VIEWS.set(view, name);
  }
  return name;
}

/**
 * Draw chat `id` into `el` in full if no other output of its view does, else the one line.
 * An output not yet on the page waits for it (a few frames) to know its view.
 * @param {string} id @param {HTMLElement} el @param {() => () => void} drawFull
 * @returns {() => void} the output's cleanup
 */
export function oneChat(id, el, drawFull) {
  if (!id) return drawFull();
  if (el.isConnected) return placeIn(`${id} ${viewOf(el)}`, el, drawFull);
  /** @type {(() => void) | null} */
  let cleanup = null;
  let frames = 0;
  let waiting = requestAnimationFrame(function look() {
    if (!el.isConnected && ++frames < 30) waiting = requestAnimationFrame(look);
    else cleanup = placeIn(`${id} ${el.isConnected ? viewOf(el) : "page"}`, el, drawFull);
  });
  return () => {
    cancelAnimationFrame(waiting);
    cleanup?.();
  };
}

/**
 * @param {string} key the chat in one view @param {HTMLElement} el @param {() => () => void} drawFull
 * @returns {() => void}
 */
function placeIn(key, el, drawFull) {
  let place = PLACES.get(key);
  if (!place) {
    place = { full: null, waiting: [] };
    PLACES.set(key, place);
  }
  const here = place;
  /** @type {Shown} */
  const me = {
    el,
    line: null,
    cleanup: null,
    promote() {
      me.line?.remove();
      me.line = null;
      here.full = me;
      me.cleanup = drawFull();
    },
  };
  if (here.full === null) me.promote();
  else {
    me.line = pointer(here);
    el.append(me.line);
    here.waiting.push(me);
  }
  return () => {
    if (here.full === me) {
      me.cleanup?.();
      here.full = null;
      const next = here.waiting.shift();
      if (next) next.promote();
      else PLACES.delete(key);
    } else {
      here.waiting = here.waiting.filter((other) => other !== me);
      me.line?.remove();
    }
  };
}
