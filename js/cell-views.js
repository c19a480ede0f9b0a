// @ts-check
/**
 * Agents that write the notebook, as the chat draws them (issue 27): the approval's body for a
 * cell tool (the diff of the cell, the new cell, the cell to delete, the code of the cell to
 * run) and the Undo button under a write's tool message while the server offers it. Text only
 * (textContent): an agent's cell is shown, never turned into DOM.
 */

import { cellAskWords, lineDiff } from "./cells.js";
import { h } from "./dom.js";

/**
 * The text an approval for a cell tool shows, as a monospace block the keyboard reaches.
 * @param {import("./tools.js").Asking} asking
 */
export function cellChange(asking) {
  const words = cellAskWords(asking);
  const before = asking.old || "";
  const after = asking.tool === "run_cell" ? asking.code || "" : asking.new || "";
  const lines =
    asking.tool === "edit_cell"
      ? lineDiff(before, after)
      : (asking.tool === "delete_cell" ? before : after)
          .split("\n")
          .map((text) => ({ op: asking.tool === "delete_cell" ? "-" : asking.tool === "add_cell" ? "+" : " ", text }));
  const code = h(
    "pre",
    { class: "conch-code conch-cell-change", tabindex: "0", "aria-label": words.label, "data-tool": asking.tool },
    ...lines.map((line) =>
      h("span", { class: "conch-diff-line", "data-op": line.op === " " ? "same" : line.op === "+" ? "added" : "removed", text: `${line.op} ${line.text}\n` }),
    ),
  );
  return { words, code };
}

/**
 * Undo under a write's tool message, while the server offers it (`undo: true`). Only the user's
 * own page can undo (the kernel's key gets 403): elsewhere `undo` answers in words.
 * @param {{call_id: string, undo: boolean}} item
 * @param {((callId: string) => Promise<string>) | undefined} undo
 */
export function undoBar(item, undo) {
  if (!item.undo || !undo) return null;
  const said = h("span", { class: "conch-undo-said", role: "status" });
  const button = h("button", {
    type: "button",
    class: "conch-button conch-quiet conch-undo",
    text: "Undo",
    onclick: async () => {
      if (button.getAttribute("aria-disabled") === "true") return;
      button.setAttribute("aria-disabled", "true");
      said.textContent = "Undoing…";
      const words = await undo(item.call_id);
      said.textContent = words;
      if (words) button.setAttribute("aria-disabled", "false");
    },
  });
  return h("div", { class: "conch-undo-bar" }, button, said);
}

/**
 * What a write to a cell changed, in its tool message's folded block: the cell's id and the
 * change as the approval showed it. Nothing for other tools.
 * @param {{[key: string]: any}} item
 * @returns {HTMLElement[]}
 */
export function cellRecord(item) {
  if (!["add_cell", "edit_cell", "delete_cell"].includes(item.tool) || (!item.old && !item.new)) return [];
  const { code } = cellChange(/** @type {any} */ ({ tool: item.tool, old: item.old, new: item.new }));
  const which = item.cell_id ? `Cell ${item.cell_id}` : "The cell";
  return [h("div", { class: "conch-tool-label", text: `${which}: the change` }), code];
}
