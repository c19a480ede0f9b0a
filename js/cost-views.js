// @ts-check
/**
 * Cost in sight, in the chat's header: what the chat has spent against its limit ("$0.42 of
 * $5.00 this chat"), and this month's against the budget; where the view talks to the server
 * itself, **Limit** opens a small form that sets the chat's own limit (only the user's own Jupyter
 * auth may: the kernel's key gets 403). A limit the server refuses is said in its words, and the
 * form keeps what was typed.
 */

import { h } from "./dom.js";
import { spentWords } from "./words.js";

/**
 * @typedef {{spent: number, limit: number | null}} Part
 * @typedef {{round?: Part | null, chat?: Part, month?: Part} | null} Budget
 * @typedef {(usd: number | null) => Promise<string>} SetLimit resolves to "" or the words of a refusal
 */

/** @param {SetLimit | undefined} setLimit */
export function chatSpend(setLimit) {
  const words = h("span", { class: "conch-spend-words" });
  const said = h("span", { class: "conch-spend-said", role: "status" });
  const input = /** @type {HTMLInputElement} */ (
    h("input", { type: "number", step: "any", class: "conch-limit-input", "aria-label": "This chat's limit in dollars" })
  );
  const form = /** @type {HTMLFormElement} */ (
    h(
      "form",
      { class: "conch-limit-form", hidden: true, novalidate: true },
      h("label", { text: "Limit $" }, input),
      h("button", { type: "submit", class: "conch-button", text: "Set" }),
      h("button", { type: "button", class: "conch-button conch-quiet", text: "Cancel", onclick: () => close() }),
      said,
    )
  );
  const open = h("button", {
    type: "button",
    class: "conch-button conch-quiet conch-limit-open",
    text: "Limit",
    "aria-expanded": "false",
    onclick: () => {
      form.hidden = false;
      open.setAttribute("aria-expanded", "true");
      input.focus();
      input.select();
    },
  });
  if (!setLimit) open.hidden = true;
  const el = h("div", { class: "conch-spend" }, words, open, form);
  el.hidden = true;

  function close() {
    form.hidden = true;
    said.textContent = "";
    open.setAttribute("aria-expanded", "false");
    open.focus();
  }

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    if (!setLimit) return;
    const text = input.value.trim();
    const usd = text === "" ? null : Number(text);
    if (usd !== null && !Number.isFinite(usd)) {
      said.textContent = "Write the limit in dollars, like 2.50 (empty: the server's default).";
      return;
    }
    said.textContent = "";
    const refused = await setLimit(usd);
    if (refused) said.textContent = refused;
    else close();
  });
  input.addEventListener("keydown", (event) => {
    // Enter sends the form, said here: in JupyterLab the page does not do it for a cell's output.
    if (event.key === "Enter" && !event.isComposing) {
      event.preventDefault();
      form.requestSubmit();
    } else if (event.key === "Escape") {
      event.preventDefault();
      close();
    }
  });

  /** @param {Budget} budget */
  function draw(budget) {
    el.hidden = !budget?.chat;
    if (!budget?.chat) return;
    let line = `${spentWords(budget.chat)} this chat`;
    if (budget.month) line += ` · ${spentWords(budget.month)} this month`;
    if (words.textContent !== line) words.textContent = line;
    if (form.hidden) input.value = budget.chat.limit === null ? "" : String(budget.chat.limit);
  }
  return { el, draw };
}
