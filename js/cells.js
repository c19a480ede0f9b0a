// @ts-check
/**
 * Agents that write the notebook (issue 27), pure: the change a cell tool call asks for as the
 * approval shows it (a line diff of the cell, the new cell, the cell to delete, the cell to
 * run), and the words for it. No DOM, no network (tested with node --test); cell-views.js
 * draws it.
 */

/** @typedef {{op: " " | "-" | "+", text: string}} DiffLine */

// Past this many lines on either side the diff is the cell before, then after, in full
// (a line diff costs old × new steps).
const DIFF_LINES = 400;

/**
 * The lines of `before` and `after`, each kept (" "), removed ("-") or added ("+"), in order:
 * the longest common subsequence of lines, so an edit shows as what changed.
 * @param {string} before @param {string} after @returns {DiffLine[]}
 */
export function lineDiff(before, after) {
  const a = before === "" ? [] : before.split("\n");
  const b = after === "" ? [] : after.split("\n");
  if (a.length > DIFF_LINES || b.length > DIFF_LINES) {
    return [...a.map((text) => ({ op: /** @type {"-"} */ ("-"), text })), ...b.map((text) => ({ op: /** @type {"+"} */ ("+"), text }))];
  }
  // lengths[i][j]: the common lines of a[i:] and b[j:]
  const lengths = Array.from({ length: a.length + 1 }, () => new Array(b.length + 1).fill(0));
  for (let i = a.length - 1; i >= 0; i--) {
    for (let j = b.length - 1; j >= 0; j--) {
      lengths[i][j] = a[i] === b[j] ? lengths[i + 1][j + 1] + 1 : Math.max(lengths[i + 1][j], lengths[i][j + 1]);
    }
  }
  /** @type {DiffLine[]} */
  const out = [];
  let i = 0;
  let j = 0;
  while (i < a.length || j < b.length) {
    if (i < a.length && j < b.length && a[i] === b[j]) {
      out.push({ op: " ", text: a[i] });
      i++;
      j++;
    } else if (j < b.length && (i === a.length || lengths[i][j + 1] >= lengths[i + 1][j])) {
      out.push({ op: "+", text: b[j++] });
    } else {
      out.push({ op: "-", text: a[i++] });
    }
  }
  return out;
}

/**
 * What an approval for a cell tool says: the head's words after the agent's name, the label
 * of its text, and its two buttons.
 * @param {{tool: string, cell_id?: string | null, after?: string | null, cell_type?: string}} asking
 */
export function cellAskWords(asking) {
  const cell = asking.cell_id ? `cell ${asking.cell_id}` : "a cell";
  switch (asking.tool) {
    case "add_cell": {
      const where = asking.after ? `after cell ${asking.after}` : "at the end";
      return { head: ` wants to add a ${asking.cell_type || "code"} cell ${where}`, label: "The new cell", yes: "Add it", no: "Don't add" };
    }
    case "edit_cell":
      return { head: ` wants to change ${cell}`, label: "The change (− before, + after)", yes: "Change it", no: "Don't change" };
    case "delete_cell":
      return { head: ` wants to delete ${cell}`, label: "The cell to delete", yes: "Delete it", no: "Don't delete" };
    default:
      return { head: ` wants to run ${cell} in your notebook's kernel`, label: "The cell's code", yes: "Run", no: "Don't run" };
  }
}
