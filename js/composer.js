// @ts-check
/**
 * The text box: Enter sends, Shift+Enter breaks the line, and typing @ lists your agents and
 * then outside agents, filtered as you type, chosen with the arrow keys and Enter (or Tab), or
 * with the mouse. What it offers is mentions.js's (pure, tested on its own): never two entries
 * that read as one, and no outside agent whose name clashes with one of yours; when the query
 * matches such an agent, a line under the list says so (naming only your agent).
 */

import { disc, h, uid } from "./dom.js";
import { heldBack, mentionAt, offered } from "./mentions.js";
import { and } from "./words.js";

/**
 * @typedef {import("./mentions.js").Mention} Mention
 * @typedef {{get(name: string): any}} State
 */

/**
 * @param {State} state what the chat shows: mentions, round_running, notice
 * @param {(text: string) => void} send
 */
export function composer(state, send) {
  const listId = `conch-mentions-${uid()}`;
  const input = /** @type {HTMLTextAreaElement} */ (
    h("textarea", {
      class: "conch-input",
      rows: 1,
      role: "combobox",
      "aria-autocomplete": "list",
      "aria-expanded": "false",
      "aria-controls": listId,
      "aria-label": "Message",
    })
  );
  const list = h("ul", { class: "conch-mentions", role: "listbox", id: listId, "aria-label": "Agents", hidden: true });
  const hint = h("div", { class: "conch-hint", "aria-live": "polite" });
  const form = h(
    "form",
    { class: "conch-composer" },
    h("div", { class: "conch-composer-row" }, input, h("button", { type: "submit", class: "conch-button conch-send", text: "Send" })),
    list, // in the flow, under the box: no output area can clip it
    hint,
  );
  /** @type {Mention[]} */
  let options = [];
  /** @type {string[]} your agents an outside agent matching the query clashes with */
  let held = [];
  let active = 0;
  /** @type {{start: number, end: number} | null} */
  let token = null;

  function refresh() {
    const found = input.selectionStart === input.selectionEnd ? mentionAt(input.value, input.selectionStart) : null;
    const all = state.get("mentions") || [];
    options = found ? offered(all, found.query) : [];
    held = found ? heldBack(all, found.query) : [];
    token = options.length && found ? { start: found.start, end: found.end } : null;
    active = Math.min(active, Math.max(0, options.length - 1));
    drawList();
  }

  function drawList() {
    const open = options.length > 0 || held.length > 0;
    list.hidden = !open;
    input.setAttribute("aria-expanded", String(open));
    if (!open) {
      input.removeAttribute("aria-activedescendant");
      list.replaceChildren();
      return;
    }
    /** @type {HTMLElement[]} */
    const rows = [];
    let group = "";
    options.forEach((option, i) => {
      const label = option.outside ? "Outside agents" : "Your agents";
      if (label !== group) {
        group = label;
        rows.push(h("li", { class: "conch-mention-group", role: "presentation", text: label }));
      }
      rows.push(
        h(
          "li",
          {
            class: "conch-mention" + (i === active ? " is-active" : ""),
            role: "option",
            id: `${listId}-${i}`,
            "aria-selected": String(i === active),
            onmousedown: (/** @type {MouseEvent} */ event) => {
              event.preventDefault(); // keep the focus in the text box
              choose(i);
            },
          },
          disc(option.name, option.name.slice(0, 1).toUpperCase(), option.outside),
          h("span", { class: "conch-mention-name", text: option.name }),
          option.outside && h("span", { class: "conch-mention-tag", text: "outside" }),
        ),
      );
    });
    if (held.length) {
      const yours = and(held.map((name) => `“${name}”`));
      rows.push(
        h("li", {
          class: "conch-mention-held",
          role: "presentation",
          text: `Not offered here: outside agents whose names clash with your ${yours}. Rename them in Settings → Outside agents.`,
        }),
      );
    }
    list.replaceChildren(...rows);
    if (options.length) input.setAttribute("aria-activedescendant", `${listId}-${active}`);
    else input.removeAttribute("aria-activedescendant");
  }

  /** @param {number} i */
  function choose(i) {
    const option = options[i];
    if (!option || !token) return;
    const text = `@${option.name} `;
    input.value = input.value.slice(0, token.start) + text + input.value.slice(token.end);
    const caret = token.start + text.length;
    input.setSelectionRange(caret, caret);
    options = [];
    held = [];
    token = null;
    drawList();
    grow();
  }

  function grow() {
    input.style.height = "auto";
    input.style.height = `${Math.min(input.scrollHeight, 200)}px`;
  }

  function submit() {
    const text = input.value;
    if (!text.trim()) return;
    send(text);
    input.value = "";
    grow();
  }

  input.addEventListener("keydown", (event) => {
    if (options.length) {
      if (event.key === "ArrowDown" || event.key === "ArrowUp") {
        event.preventDefault();
        active = (active + (event.key === "ArrowDown" ? 1 : options.length - 1)) % options.length;
        drawList();
        return;
      }
      if (event.key === "Enter" || event.key === "Tab") {
        event.preventDefault();
        choose(active);
        return;
      }
    }
    if ((options.length || held.length) && event.key === "Escape") {
      event.preventDefault();
      options = [];
      held = [];
      drawList();
      return;
    }
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      submit();
    }
  });
  input.addEventListener("input", () => {
    active = 0;
    refresh();
    grow();
  });
  input.addEventListener("click", refresh);
  input.addEventListener("blur", () => {
    options = [];
    held = [];
    drawList();
  });
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    submit();
  });

  /** Who could be offered when the list was last drawn, to redraw it when that changes. */
  let offeredFrom = "";

  function draw() {
    // Names that arrive (or change) while the list is open are offered at once, not on the
    // next key: a chat's names come with its first snapshot, which may follow the first "@".
    const from = JSON.stringify(state.get("mentions") || []);
    if (from !== offeredFrom) {
      offeredFrom = from;
      if (document.activeElement === input) refresh();
    }
    const running = Boolean(state.get("round_running"));
    // Short enough to be read whole in the narrowest chat (600 px with the file browser open).
    input.placeholder = running ? "Send to end the round" : "Message (@ mentions)";
    const notice = state.get("notice") || "";
    const words = notice || (running ? "Sending now ends the round." : "Enter sends · Shift+Enter breaks the line");
    if (hint.textContent !== words) hint.textContent = words; // a live region: say each thing once
    hint.classList.toggle("is-notice", Boolean(notice || running));
  }

  /** Put back a message the server refused, unless something new was typed. @param {string} text */
  function restore(text) {
    if (!input.value) {
      input.value = text;
      grow();
    }
  }

  return { el: form, draw, restore, input };
}
