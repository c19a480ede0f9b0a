// @ts-check
/**
 * Settings → Outside agents: the list (each with its claim, key, its card's signature, last
 * problem, and the clash in words where its name clashes with one of your agents'), adding one by
 * paste, renaming, removing, accepting the new key of a card signed with another key than when it
 * was added (or no longer signed), and Repair everything.
 *
 * A card names its agent, but someone else's card must never decide where your words go (spec
 * 0112, issue 16): a card name that clashes with one of yours is refused in words (409
 * `name_taken`); the view shows those words and asks for a name of your own in the name field,
 * and Add tries again with it. An agent whose name clashes anyway (kept from before the rule, or
 * a hand-edited file) says so on its row, and Rename is how it gets a name of its own.
 */

import { confirmButton, field } from "./controls.js";
import { disc, h } from "./dom.js";

/**
 * Enter in a one-line field sends its form, as a browser would on its own: in JupyterLab the
 * notebook's own keys get there first, so the field says it itself. Escape calls `cancel`.
 * @param {HTMLInputElement} input @param {() => void} send @param {() => void} [cancel]
 */
function enterSends(input, send, cancel) {
  input.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.isComposing) {
      event.preventDefault();
      send();
    } else if (event.key === "Escape" && cancel) {
      event.preventDefault();
      cancel();
    }
  });
}

/** A key as the row shows it: the start of its RFC 7638 thumbprint. @param {any} key */
function keyWords(key) {
  return key?.thumbprint ? `key ${String(key.thumbprint).slice(0, 10)}…` : "not signed";
}

/**
 * The card's signature on the row: "signed · key …" or "not signed", and, when the card now shows
 * another key (or none), the old and the new with a button to accept the new.
 * @param {import("./settings.js").SettingsSource} source @param {any} agent
 * @returns {(HTMLElement | null)[]}
 */
function signatureParts(source, agent) {
  const signed = agent.signed;
  const line = h("span", {
    class: "conch-small conch-signed",
    text: signed ? `signed · ${keyWords(signed)}${signed.verified ? "" : " (not verified now)"}` : "not signed",
    title: signed ? `kid ${signed.kid}` : null,
  });
  if (!agent.key_change) return [line, agent.signature_problem ? h("span", { class: "conch-row-problem", text: agent.signature_problem }) : null];
  const change = h(
    "span",
    { class: "conch-key-change" },
    h("span", { class: "conch-small", text: `Key when added: ${keyWords(signed)} · its card now: ${keyWords(agent.key_change)}` }),
    h("button", {
      type: "button",
      class: "conch-button",
      text: agent.key_change.thumbprint ? "Accept the new key" : "Accept it unsigned",
      "aria-label": `Accept the key ${agent.name}'s card now shows`,
      onclick: () => source.act({ type: "outside.accept_key", id: agent.id, thumbprint: agent.key_change.thumbprint ?? null }),
    }),
  );
  return [line, h("span", { class: "conch-row-problem", text: agent.signature_problem || "" }), change];
}

/**
 * @param {import("./settings.js").SettingsSource} source @param {HTMLElement} list
 * @returns {{form: HTMLElement, repair: HTMLElement, draw(): void, onMessage(message: any): void}}
 */
export function outsideSection(source, list) {
  const paste = /** @type {HTMLTextAreaElement} */ (
    h("textarea", {
      class: "conch-paste",
      rows: 2,
      "aria-label": "Outside agent's address and key",
      placeholder: "Paste the agent's address (and its key, if you were given one)",
    })
  );
  const outsideName = /** @type {HTMLInputElement} */ (
    h("input", { name: "outside-name", maxlength: 40, autocomplete: "off", placeholder: "the name on its card" })
  );
  const askName = h("p", { class: "conch-small conch-ask-name", hidden: true, text: "Type a name of your own in Name, then Add again." });
  const add = () => source.act({ type: "outside.add", paste: paste.value, name: outsideName.value.trim() || null });
  enterSends(outsideName, add);
  const outsideForm = h(
    "form",
    {
      class: "conch-form conch-outside-add",
      onsubmit: (/** @type {Event} */ e) => {
        e.preventDefault();
        add();
      },
    },
    h(
      "div",
      { class: "conch-field-row conch-outside-row" },
      paste,
      field("Your name for it (optional)", outsideName),
      h("button", { type: "submit", class: "conch-button", text: "Add" }),
    ),
    askName,
  );
  /** The outside agent being renamed, and its editor (kept across redraws, typing and all). */
  /** @type {{id: string, el: HTMLElement, input: HTMLInputElement} | null} */
  let renaming = null;
  /** @param {any} agent */
  function startRename(agent) {
    const input = /** @type {HTMLInputElement} */ (
      h("input", { class: "conch-rename-input", maxlength: 40, autocomplete: "off", "aria-label": `New name for ${agent.name}`, value: agent.name })
    );
    const rename = () => source.act({ type: "outside.rename", id: agent.id, name: input.value.trim() });
    enterSends(input, rename, () => stopRename());
    const el = h(
      "form",
      {
        class: "conch-rename",
        onsubmit: (/** @type {Event} */ e) => {
          e.preventDefault();
          rename();
        },
      },
      input,
      h("button", { type: "submit", class: "conch-button", text: "Save" }),
      h("button", { type: "button", class: "conch-button conch-quiet", text: "Cancel", onclick: () => stopRename() }),
    );
    renaming = { id: agent.id, el, input };
    draw();
    input.focus();
    input.select();
  }
  function stopRename() {
    renaming = null;
    draw();
  }
  const repair = h("button", {
    type: "button",
    class: "conch-button conch-quiet",
    text: "Repair everything",
    onclick: () => source.act({ type: "outside.repair" }),
  });

  function draw() {
    /** @type {any[] | null} */
    const rows = source.state.get("outside");
    const off = rows === null;
    // No adding where the administrator turned outside agents off (policy.js).
    outsideForm.hidden = off || source.state.get("locked")?.outside_hosts === false;
    repair.hidden = off || !rows.length;
    const editor = renaming && (rows || []).some((agent) => agent.id === renaming?.id) ? renaming : null;
    renaming = editor; // an agent removed meanwhile is renamed no more
    list.replaceChildren(
      ...(rows || []).map((agent) => {
        const editing = editor && editor.id === agent.id ? editor.el : null;
        const clash = agent.clashes_with
          ? `Its name clashes with your agent “${agent.clashes_with}”: a mention of it goes to ${agent.clashes_with}, and it is sent nothing until you rename it.`
          : "";
        return h(
          "li",
          { class: "conch-row" + (clash ? " is-clashing" : ""), "data-id": agent.id },
          disc(agent.name, agent.name.slice(0, 1).toUpperCase(), true),
          h(
            "div",
            { class: "conch-row-main" },
            editing || h("strong", { text: agent.name }),
            clash && h("span", { class: "conch-row-problem conch-clash", text: clash }),
            h("code", { class: "conch-small", text: agent.address }),
            agent.claim && h("span", { class: "conch-claim", text: agent.claim }), // the server's words: "It says it's run by …"
            h("span", { class: "conch-small", text: agent.has_key ? "Key kept, sealed" : "No key" }),
            ...signatureParts(source, agent),
            agent.last_problem && h("span", { class: "conch-row-problem", text: `Last problem: ${agent.last_problem}` }),
          ),
          h(
            "div",
            { class: "conch-row-actions" },
            !editing &&
              h("button", {
                type: "button",
                class: clash ? "conch-button" : "conch-button conch-quiet",
                text: "Rename",
                "aria-label": `Rename ${agent.name}`,
                onclick: () => startRename(agent),
              }),
            confirmButton("Remove", `Remove ${agent.name}?`, () => source.act({ type: "outside.remove", id: agent.id })),
          ),
        );
      }),
    );
  }

  /** @param {any} message */
  function onMessage(message) {
    if (message?.type !== "done") return;
    if (!message.ok) {
      // The card's name (or the one typed) clashes: its words are shown; ask for a name.
      if (message.action === "outside.add" && message.code === "name_taken") {
        askName.hidden = false;
        outsideName.focus();
        outsideName.select();
      }
      if (message.action === "outside.rename") renaming?.input.focus();
      return;
    }
    if (message.action === "outside.add") {
      paste.value = outsideName.value = "";
      askName.hidden = true;
    }
    if (message.action === "outside.rename") stopRename();
  }

  return { form: outsideForm, repair, draw, onMessage };
}
