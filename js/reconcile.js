// @ts-check
/**
 * Keyed reconciling, pure: given what is drawn (id → signature) and the items to draw, say which
 * to keep as they are, which to update in place (a round card keeps its element, so its running
 * animation goes on), which to draw anew, and which to remove. The view applies the plan.
 */

/**
 * @typedef {{id: string, kind: string, [key: string]: any}} Item
 * @typedef {{id: string, item: Item, sig: string, how: "keep" | "update" | "draw"}} Step
 */

/**
 * @param {Map<string, string>} drawn what is on the page: id → the signature it was drawn from
 * @param {Item[]} items what should be, in order
 * @returns {{steps: Step[], remove: string[]}}
 */
export function reconcile(drawn, items) {
  const wanted = new Set();
  /** @type {Step[]} */
  const steps = items.map((item) => {
    wanted.add(item.id);
    const sig = JSON.stringify(item);
    const before = drawn.get(item.id);
    if (before === sig) return { id: item.id, item, sig, how: "keep" };
    if (before !== undefined && item.kind === "round") return { id: item.id, item, sig, how: "update" };
    return { id: item.id, item, sig, how: "draw" };
  });
  const remove = [...drawn.keys()].filter((id) => !wanted.has(id));
  return { steps, remove };
}

/**
 * How a streaming reply's text changes: append only the new words when the text grew at its
 * end (the usual case: linear in the reply's length), else replace it all.
 * @param {string} shown @param {string} text
 * @returns {{append: string} | {replace: string}}
 */
export function textChange(shown, text) {
  return text.startsWith(shown) ? { append: text.slice(shown.length) } : { replace: text };
}

/**
 * Appended text cut where paragraphs end (a blank line), so each paragraph can be its own block
 * and the browser lays out only the paragraph that grows, not the whole reply.
 * @param {string} shown what is drawn already @param {string} added the new words
 * @returns {{fresh: boolean, text: string}[]} each piece, and whether it starts a new block
 */
export function paragraphPieces(shown, added) {
  if (!added) return [];
  const pieces = added.split(/(?<=\n\n)/);
  return pieces.map((text, i) => ({ fresh: i > 0 || shown === "" || shown.endsWith("\n\n"), text })).filter((piece) => piece.text !== "");
}
