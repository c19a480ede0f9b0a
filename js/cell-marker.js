// @ts-check
/**
 * The cells an agent wrote, marked in the notebook the view's output sits in (JupyterLab 4 and
 * Notebook 7): each gets the class `conch-agent-cell` and a quiet badge ("written by Analyst").
 * The view asks the server for the notebook's cells in order with who wrote each, and matches
 * them to the page's cells by place (cell-marks.js: nothing is marked while the two disagree).
 * Only a list read from the live shared document is used (where there is no collaboration the
 * file may be behind the page), and only one read after the page's last change of its cells.
 * Refreshed when the chat brings a cell write or an Undo, and when the notebook's cell list
 * changes in the page; removed when the last view of the notebook goes.
 */

import { changesMarks, markWords, marksFor, typeOf } from "./cell-marks.js";
import { onChatItem } from "./chat-source.js";

const CELL_CLASS = "conch-agent-cell";
const BADGE_CLASS = "conch-cell-badge";
// Changes to the cell list come in bursts (a paste of ten cells, a reload): one read after them.
const SETTLE_MS = 150;

/** @type {WeakMap<Element, {views: number, stop: () => void}>} */
const MARKED = new WeakMap();

/** The page's cells of this notebook, in document order (not those of a notebook inside an output). @param {Element} book */
function cellsOf(book) {
  return /** @type {HTMLElement[]} */ ([...book.querySelectorAll(".jp-Cell")].filter((cell) => cell.closest(".jp-Notebook") === book));
}

/** @param {HTMLElement} cell */
function unmark(cell) {
  cell.classList.remove(CELL_CLASS);
  for (const badge of cell.querySelectorAll(`:scope > .${BADGE_CLASS}`)) badge.remove();
}

/**
 * Mark the cells agents wrote in the notebook that holds `el`; returns the cleanup.
 * @param {import("./server.js").ServerApi} api @param {string} conversationId @param {HTMLElement} el
 * @returns {() => void}
 */
export function markCells(api, conversationId, el) {
  const book = el.closest(".jp-Notebook");
  if (!book) return () => {};
  const known = MARKED.get(book);
  if (known) {
    known.views += 1;
    return release(book);
  }
  const path = `conversations/${encodeURIComponent(conversationId)}/cells`;
  /** @type {import("./cell-marks.js").Listed[] | null} */
  let listed = null;
  let stopped = false;
  let reading = false;
  let again = false;
  /** @type {ReturnType<typeof setTimeout> | undefined} */
  let timer;

  const draw = () => {
    const cells = cellsOf(book);
    const shown = cells.map((cell) => {
      const index = cell.getAttribute("data-windowed-list-index");
      return { index: index === null ? null : Number(index), type: typeOf(cell.classList) };
    });
    const marks = listed ? marksFor(shown, listed) : null;
    cells.forEach((cell, place) => {
      const mark = marks ? marks[place] : null;
      const badge = cell.querySelector(`:scope > .${BADGE_CLASS}`);
      if (!mark) {
        if (badge || cell.classList.contains(CELL_CLASS)) unmark(cell);
        return;
      }
      const words = markWords(mark, conversationId);
      cell.classList.add(CELL_CLASS);
      const shownBadge = badge || cell.appendChild(document.createElement("span"));
      shownBadge.className = BADGE_CLASS;
      if (shownBadge.textContent !== words.badge) shownBadge.textContent = words.badge;
      shownBadge.setAttribute("title", words.title);
    });
  };

  // Each change of the page's cell list makes what was read before it stale: a read counts
  // only if no change came while it was under way.
  let changes = 0;
  const read = async () => {
    if (reading) {
      again = true;
      return;
    }
    reading = true;
    const before = changes;
    /** @type {import("./cell-marks.js").Listed[] | null} */
    let answer = null;
    try {
      const body = await api.request("GET", path);
      // Only the live shared document is what the page shows; a file (no collaboration) may be
      // behind a page's unsaved changes, so it marks nothing.
      answer = body?.where === "live" && Array.isArray(body.cells) ? body.cells : null;
    } catch {
      answer = null; // the server cannot say: mark nothing rather than something stale
    } finally {
      reading = false;
    }
    if (stopped) return;
    if (changes !== before) again = true;
    else listed = answer;
    draw();
    if (again) {
      again = false;
      read();
    }
  };

  const soon = () => {
    clearTimeout(timer);
    timer = setTimeout(read, SETTLE_MS);
  };

  // The cell list's own element (a windowed notebook's viewport, else the notebook): only its
  // children, so typing in a cell (and the badges themselves) never call for a read.
  const list = book.querySelector(".jp-WindowedPanel-viewport") || book;
  const observer = new MutationObserver(() => {
    // At once: the cells moved, came or went, so no mark stays until a read after it agrees.
    changes += 1;
    listed = null;
    draw();
    soon();
  });
  observer.observe(list, { childList: true });
  const unwatch = onChatItem(api, conversationId, (item) => {
    if (changesMarks(item)) soon();
  });
  read();
  MARKED.set(book, {
    views: 1,
    stop() {
      stopped = true;
      clearTimeout(timer);
      observer.disconnect();
      unwatch();
      for (const cell of cellsOf(book)) unmark(cell);
    },
  });
  return release(book);
}

/** @param {Element} book */
function release(book) {
  let done = false;
  return () => {
    const marked = MARKED.get(book);
    if (done || !marked) return;
    done = true;
    marked.views -= 1;
    if (marked.views === 0) {
      marked.stop();
      MARKED.delete(book);
    }
  };
}
