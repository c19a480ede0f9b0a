// @ts-check
/**
 * Cost in sight, in the chat's header: what the chat has spent against its limit ("$0.42 of
 * $5.00 this chat"), and this month's against the budget; where the view talks to the server
 * itself, **Limit** opens a small form that sets the chat's own limit (only the user's own Jupyter
 * auth may: the kernel's key gets 403). A limit the server refuses is said in its words, and the
 * form keeps what was typed.
 */

import { h } from "./dom.js";
import { HINTS, hint } from "./hints.js";
import { budgetLock } from "./policy.js";
import { dollars, spentWords } from "./words.js";

/**
 * @typedef {{spent: number, limit: number | null}} Part
 * @typedef {{round?: Part | null, chat?: Part, month?: Part} | null} Budget
 * @typedef {(usd: number | null) => Promise<string>} SetLimit resolves to "" or the words of a refusal
 */

/** @param {SetLimit | undefined} setLimit */
export function chatSpend(setLimit) {
  const words = h("span", { class: "conch-spend-words" });
  const said = h("span", { class: "conch-spend-said", "aria-live": "polite" });
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
  // The administrator's cap on a chat's limit (policy.js), said by the form and kept as its max.
  const capped = h("span", { class: "conch-spend-lock", role: "note", hidden: true });
  form.append(capped);
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

  /** @param {Budget} budget @param {import("./policy.js").Locked} [locked] */
  function draw(budget, locked = {}) {
    el.hidden = !budget?.chat;
    if (!budget?.chat) return;
    lockField(input, capped, budgetLock(locked).chat, locked.max_chat_usd);
    const parts = [`${spentWords(budget.chat)} this chat`];
    if (budget.month) parts.push(`${spentWords(budget.month)} this month`);
    if (words.textContent !== parts.join(" · ")) {
      // Each part whole (it wraps between the parts, never inside one: widget.css).
      words.replaceChildren(...parts.flatMap((part, i) => [i ? " · " : "", h("span", { class: "conch-spend-part", text: part })]));
    }
    if (form.hidden) input.value = budget.chat.limit === null ? "" : String(budget.chat.limit);
  }
  /** The spend line and Limit say what they are, on hover and focus (hints.js), in `host`. @param {HTMLElement} host */
  function explain(host) {
    words.tabIndex = 0; // reachable by the keyboard, so its words can be had there too
    hint(words, HINTS.spend, host);
    hint(open, HINTS.limit, host);
  }
  return { el, draw, explain };
}

/**
 * Settings → Your agents: this month's spend against its budget, by agent, and the form that
 * sets the budget (where Settings talk to the server themselves; through the kernel, the
 * section is not drawn: the kernel's key may not change it).
 * @param {(content: any) => void} act Settings' one way to act ({type: "budget.set", usd})
 */
export function monthSpend(act) {
  const words = h("p", { class: "conch-month-words" });
  const byAgent = h("ul", { class: "conch-month-agents", "aria-label": "This month by agent" });
  const input = /** @type {HTMLInputElement} */ (
    h("input", { type: "number", step: "any", class: "conch-limit-input", name: "monthly-usd", "aria-label": "This month's budget in dollars" })
  );
  const said = h("span", { class: "conch-spend-said", "aria-live": "polite" });
  const send = () => {
    const text = input.value.trim();
    const usd = text === "" ? null : Number(text);
    if (usd !== null && !Number.isFinite(usd)) {
      said.textContent = "Write the budget in dollars, like 20 (empty: the server's default).";
      return;
    }
    said.textContent = "";
    act({ type: "budget.set", usd });
  };
  const form = /** @type {HTMLFormElement} */ (
    h(
      "form",
      {
        class: "conch-limit-form conch-month-form",
        novalidate: true,
        onsubmit: (/** @type {Event} */ event) => {
          event.preventDefault();
          send();
        },
      },
      h("label", { text: "Monthly budget $" }, input),
      h("button", { type: "submit", class: "conch-button", text: "Set budget" }),
      said,
    )
  );
  // The administrator's cap on the month's budget (policy.js), said by the form.
  const capped = h("p", { class: "conch-spend-lock", role: "note", hidden: true });
  form.append(capped);
  input.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.isComposing) {
      event.preventDefault();
      send();
    }
  });
  const el = h(
    "section",
    { class: "conch-month", "aria-label": "This month's spend" },
    h("h4", { class: "conch-form-title", text: "This month" }),
    words,
    byAgent,
    form,
  );
  el.hidden = true;

  /**
   * @param {{month: Part, by_agent: {agent: string | null, name?: string | null, spent: number}[]} | null} budget
   * @param {boolean} editing @param {import("./policy.js").Locked} [locked]
   */
  function draw(budget, editing, locked = {}) {
    el.hidden = !budget;
    if (!budget) return;
    lockField(input, capped, budgetLock(locked).month, locked.max_monthly_usd);
    const line = `${spentWords(budget.month)} spent on metered agents this month (UTC), in every chat.`;
    if (words.textContent !== line) words.textContent = line;
    byAgent.replaceChildren(
      ...budget.by_agent.map((row) =>
        h(
          "li",
          { class: "conch-small" },
          h("span", { text: row.name || row.agent || "an agent removed since" }),
          h("span", { text: ` ${dollars(row.spent)}` }),
        ),
      ),
    );
    form.hidden = !editing;
    if (document.activeElement !== input) input.value = budget.month.limit === null ? "" : String(budget.month.limit);
  }
  return { el, draw };
}

/**
 * A limit's field under the administrator's cap: its sentence shown (or hidden when none) and the
 * cap as the field's max, so the page says it before the server refuses more.
 * @param {HTMLInputElement} input @param {HTMLElement} note @param {string} sentence @param {unknown} most
 */
function lockField(input, note, sentence, most) {
  note.hidden = !sentence;
  if (note.textContent !== sentence) note.textContent = sentence;
  if (typeof most === "number") input.max = String(most);
  else input.removeAttribute("max");
}
