// @ts-check
/**
 * Continue a round stopped at its bound, in one click, with what it cost in sight: the end line
 * at the bottom of the chat ("4 replies · $0.84 · Continue (this chat: $2.10 of $5)") and the
 * same button on the round's folded card (round-card.js). A plain button, so Tab reaches it and
 * Enter or Space presses it; what it did, or why the server said no, is announced (the chat's
 * live region), and the refusal's words also show where the chat shows a problem.
 */

import { h } from "./dom.js";

/**
 * @typedef {{kind: "continue", id: string, head: string, line: string, button: string}} ContinueItem
 * @typedef {{announce(words: string): void, continue_?: () => Promise<string>, refocus?: () => void}} Context
 */

/**
 * The button that continues the round: pressed, it waits for the server; refused, it comes back
 * with the words said. Once the round goes on, the server's `continuable` turns null and the
 * view takes the button away, so the focus goes back to the composer.
 * @param {string} label @param {Context} ctx
 */
export function continueButton(label, ctx) {
  const button = h("button", {
    type: "button",
    class: "conch-button conch-continue",
    text: label,
    onclick: async () => {
      if (!ctx.continue_ || button.hasAttribute("disabled")) return;
      button.setAttribute("disabled", "");
      button.textContent = "Continuing…";
      const refused = await ctx.continue_();
      if (refused) {
        button.removeAttribute("disabled");
        button.textContent = label;
        ctx.announce(refused);
        return;
      }
      ctx.announce("The round goes on.");
      ctx.refocus?.();
    },
  });
  return button;
}

/** The round's end line at the bottom of the chat, offering Continue. @param {ContinueItem} item @param {Context} ctx */
export function continueLine(item, ctx) {
  const el = h(
    "li",
    { class: "conch-continue-line", "data-continue": item.id },
    h("span", { class: "conch-pearl-glyph", "aria-hidden": "true" }),
    h("span", { class: "conch-continue-words", text: `${item.head} · ${item.line}` }),
    continueButton(item.button, ctx),
  );
  return { el };
}
