// @ts-check
/**
 * The cells an agent wrote, marked in the notebook itself (issue 27), pure: which of the cells
 * a page shows carry which mark, from the server's list of the notebook's cells in order
 * (`GET conversations/{id}/cells`), and the words of a mark. No DOM, no network (tested with
 * node --test); cell-marker.js finds the cells in the page and draws the marks.
 *
 * JupyterLab's cell elements carry no cell id, so a cell is matched by its place. That is only
 * safe while the page and the list agree: when the page shows a different number of cells, a
 * cell of another type at some place, or only some of the cells (a windowed notebook scrolled
 * far), nothing is marked until they agree again. A wrong mark is worse than none.
 */

/** @typedef {{agent: string, name: string | null, chat: string | null}} Conch */
/** @typedef {{id: string, type?: string, conch: Conch | null}} Listed */
/** @typedef {{index: number | null, type: string | null}} Shown a cell as the page shows it */

/**
 * The mark of each shown cell, in the order given (null: not written by an agent), or null when
 * the page and the list are out of step and nothing may be marked.
 * @param {Shown[]} shown the page's cells in document order: their windowed-list index (if the
 *   page gives one) and type ("code", "markdown", "raw"; null if unknown)
 * @param {Listed[]} listed the notebook's cells in order, from the server
 * @returns {(Conch | null)[] | null}
 */
export function marksFor(shown, listed) {
  if (shown.length !== listed.length) return null;
  const indexed = shown.every((cell) => cell.index !== null);
  if (!indexed && shown.some((cell) => cell.index !== null)) return null; // half windowed: a page mid-change
  /** @type {(Conch | null)[]} */
  const marks = [];
  for (let place = 0; place < shown.length; place++) {
    const cell = shown[place];
    const index = indexed ? cell.index : place;
    if (index === null || index !== place) return null; // the page's own order disagrees
    const entry = listed[index];
    if (cell.type && entry.type && cell.type !== entry.type) return null;
    marks.push(entry.conch || null);
  }
  return marks;
}

/**
 * What a mark says: the badge's words and its title.
 * @param {Conch} conch @param {string} thisChat the chat of the view that draws it
 */
export function markWords(conch, thisChat) {
  const name = conch.name || "an agent since removed";
  const where = conch.chat && conch.chat === thisChat ? "in this notebook's Conch chat" : "in another Conch chat";
  return { badge: `written by ${name}`, title: `Conch: ${name} wrote this cell ${where}. Undo is in the chat.` };
}

/** A cell's type from its element's classes (JupyterLab's and Notebook 7's). @param {{contains(name: string): boolean}} classes */
export function typeOf(classes) {
  if (classes.contains("jp-CodeCell")) return "code";
  if (classes.contains("jp-MarkdownCell")) return "markdown";
  if (classes.contains("jp-RawCell")) return "raw";
  return null;
}

/** Whether a chat item may have changed who wrote which cell: a cell write's tool message, or an Undo. @param {any} item */
export function changesMarks(item) {
  if (item?.type === "event") return item.event?.type === "tool.undone";
  if (item?.type !== "message" || item.message?.role !== "tool") return false;
  return WRITES.has(String(item.message.tool || ""));
}

const WRITES = new Set(["add_cell", "edit_cell", "delete_cell"]);
