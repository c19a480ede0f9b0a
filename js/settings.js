// @ts-check
/**
 * Settings: your agents (add, edit, remove), outside agents (settings-outside.js: add by paste,
 * with a name of your own where the card's clashes; rename, remove, repair), and the agents that
 * can talk to yours (pair, show the key once with Copy, remove, What it said).
 *
 * Its state and actions come from a source: straight from the server (settings-source.js's
 * directSettings) where the page was served by the Jupyter server running Conch, else the
 * kernel's traits and custom messages (relayedSettings). A pairing's key is shown once, in this
 * view only: it is never kept in a trait or a store.
 */

import { confirmButton, field } from "./controls.js";
import { monthSpend } from "./cost-views.js";
import { disc, h, uid } from "./dom.js";
import { drawItem } from "./items.js";
import { kindAllowed, sectionLocks } from "./policy.js";
import { CHOICES, addressFor, choice, choiceAllowed, choiceOf } from "./providers.js";
import { acpCardWords, acpFields } from "./settings-acp.js";
import { outsideSection } from "./settings-outside.js";
import { serverChoices, toolsSection } from "./settings-tools.js";
import { itemsOf } from "./timeline.js";

/**
 * @typedef {{
 *   state: {get(name: string): any, on(e: string, cb: () => void): void, off(e: string, cb: () => void): void},
 *   act(content: any): void,
 *   section(key: string): void,
 *   listen(callback: (message: any) => void): () => void,
 *   close(): void,
 * }} SettingsSource
 * @typedef {import("./items.js").Item} DrawnItem
 */

/** @type {WeakMap<object, DrawnItem[]>} */
const SAID = new WeakMap();

/**
 * A pairing's chat (the server's snapshot of it) as items, the other agent's words labelled as
 * its: built once per chat read, not at every redraw.
 * @param {any} conversation
 */
function saidItems(conversation) {
  if (!conversation || typeof conversation !== "object") return [];
  let items = SAID.get(conversation);
  if (!items) {
    items = /** @type {DrawnItem[]} */ (itemsOf(conversation, { userLabel: "The other agent" }));
    SAID.set(conversation, items);
  }
  return items;
}

const SECTIONS = [
  ["agents", "Your agents"],
  ["outside", "Outside agents"],
  ["pairings", "Agents that can talk to yours"],
  ["tools", "Tools"],
];

/** @param {(content: any) => void} act */
function agentForm(act) {
  /** @param {string} name @param {Record<string, any>} [props] */
  const input = (name, props = {}) => /** @type {HTMLInputElement} */ (h("input", { name, ...props }));
  const name = input("name", { required: true, maxlength: 40 });
  const persona = /** @type {HTMLTextAreaElement} */ (h("textarea", { name: "persona", rows: 2 }));
  const instructions = /** @type {HTMLTextAreaElement} */ (h("textarea", { name: "instructions", rows: 3 }));
  const kind = /** @type {HTMLSelectElement} */ (h("select", { name: "kind" }, ...CHOICES.map((c) => h("option", { value: c.value, text: c.label }))));
  // A coding agent (ACP) is a command Conch runs, not a model: its own fields (settings-acp.js).
  const acp = acpFields();
  const tools = serverChoices(); // which of your MCP servers' tools its turns are offered
  /** @type {any[]} */
  let servers = [];
  const modelName = input("model");
  const baseUrl = input("base_url", { placeholder: "https://… (leave empty for the provider's own)" });
  const key = input("api_key", { type: "password", autocomplete: "off" });
  const priceIn = input("input_per_mtok", { type: "number", min: 0, step: "any", placeholder: "in" });
  const priceOut = input("output_per_mtok", { type: "number", min: 0, step: "any", placeholder: "out" });
  const heading = h("h4", { class: "conch-form-title" });
  const modelRow = field("Model", modelName);
  const addressRow = field("Address", baseUrl);
  const keyRow = field("Key", key);
  const showKind = () => {
    const coding = kind.value === "acp";
    for (const row of [modelRow, addressRow, keyRow]) row.hidden = coding;
    keyRow.hidden = coding || Boolean(choice(kind.value).keyless);
    // Each provider's Model box says what a model name looks like there.
    modelName.placeholder = choice(kind.value).example;
    acp.show(coding);
  };
  kind.addEventListener("change", () => {
    baseUrl.value = addressFor(kind.value, baseUrl.value);
    showKind();
  });
  /** @type {string | null} */
  let editing = null;
  const form = h(
    "form",
    { class: "conch-form", hidden: true },
    heading,
    field("Name", name),
    field("Persona (what others see)", persona),
    field("Instructions (only for this agent)", instructions),
    h("div", { class: "conch-field-row" }, field("Provider", kind), modelRow),
    addressRow,
    keyRow,
    acp.el,
    h("div", { class: "conch-field-row" }, field("$ per million tokens in", priceIn), field("out", priceOut)),
    tools.el,
    h(
      "div",
      { class: "conch-actions" },
      h("button", { type: "submit", class: "conch-button", text: "Save" }),
      h("button", { type: "button", class: "conch-button conch-quiet", text: "Cancel", onclick: () => close() }),
    ),
  );
  // Enter in a one-line field saves, as a browser's form would on its own: in JupyterLab the
  // notebook's keys get there first. (A multi-line box breaks the line: widget.js.)
  form.addEventListener("keydown", (event) => {
    if (event.key !== "Enter" || event.isComposing || event.defaultPrevented || !(event.target instanceof HTMLInputElement)) return;
    event.preventDefault();
    /** @type {HTMLFormElement} */ (form).requestSubmit();
  });
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    /** @type {Record<string, any>} */
    let provider = { kind: choice(kind.value).kind, model: modelName.value.trim(), base_url: baseUrl.value.trim() || null };
    if (key.value) provider.api_key = key.value;
    if (kind.value === "acp") {
      const coding = acp.provider();
      if (!coding) return;
      provider = coding;
    }
    const priced = priceIn.value !== "" || priceOut.value !== "";
    const agent = {
      name: name.value.trim(),
      persona: persona.value,
      instructions: instructions.value,
      provider,
      price: priced ? { input_per_mtok: Number(priceIn.value || 0), output_per_mtok: Number(priceOut.value || 0) } : null,
      mcp: tools.chosen(),
    };
    act({ type: "agent.save", id: editing, agent });
  });

  /** @param {any} agent */
  function open(agent) {
    editing = agent ? agent.id : null;
    heading.textContent = agent ? `Edit ${agent.name}` : "Add an agent";
    name.value = agent?.name || "";
    persona.value = agent?.persona || "";
    instructions.value = agent?.instructions || "";
    kind.value = choiceOf(agent?.provider);
    // A new agent starts on a provider the administrator allows.
    if (!agent && kind.selectedOptions[0]?.disabled) kind.value = [...kind.options].find((o) => !o.disabled)?.value || kind.value;
    modelName.value = agent?.provider?.model || "";
    baseUrl.value = agent?.provider?.base_url || "";
    acp.fill(agent);
    tools.set(servers, agent?.mcp || []);
    showKind();
    key.value = "";
    key.placeholder = agent?.has_key ? "a key is kept; leave empty to keep it" : "leave empty to use the environment's";
    priceIn.value = agent?.price ? String(agent.price.input_per_mtok) : "";
    priceOut.value = agent?.price ? String(agent.price.output_per_mtok) : "";
    form.hidden = false;
    name.focus();
  }

  function close() {
    form.hidden = true;
    editing = null;
  }

  /** The providers the administrator's policy does not allow cannot be chosen. @param {import("./policy.js").Locked} locked */
  function lock(locked) {
    for (const option of kind.options) option.disabled = !choiceAllowed(locked, option.value, kindAllowed);
  }

  /** Your MCP servers, for the checkboxes (kept while the form is open). @param {any[]} list */
  function setServers(list) {
    const changed = list.map((s) => s.id).join() !== servers.map((s) => s.id).join();
    servers = list;
    if (changed && !form.hidden) tools.set(servers, tools.chosen());
    else if (form.hidden) tools.set(servers, []);
  }

  return { el: form, open, close, lock, setFound: acp.setFound, setServers };
}

/** @param {SettingsSource} source @param {HTMLElement} el */
export function settingsView(source, el) {
  const tabs = h("div", { class: "conch-tabs", role: "tablist", "aria-label": "Settings" });
  const panels = /** @type {Record<string, HTMLElement>} */ ({});
  const problems = /** @type {Record<string, HTMLElement>} */ ({});
  const lists = /** @type {Record<string, HTMLElement>} */ ({});
  const notes = /** @type {Record<string, HTMLElement>} */ ({});
  const locks = /** @type {Record<string, HTMLElement>} */ ({}); // the administrator's sentences
  const tabButtons = SECTIONS.map(([key, label]) => {
    const button = h("button", {
      type: "button",
      role: "tab",
      class: "conch-tab",
      id: `conch-tab-${key}-${uid()}`,
      text: label,
      onclick: () => {
        source.section(key);
      },
    });
    problems[key] = h("div", { class: "conch-problem", role: "alert", hidden: true });
    notes[key] = h("p", { class: "conch-muted", hidden: true });
    locks[key] = h("p", { class: "conch-locked", role: "note", hidden: true });
    lists[key] = h("ul", { class: "conch-rows" });
    panels[key] = h("section", { class: "conch-panel", role: "tabpanel", "aria-labelledby": button.id });
    return button;
  });
  tabs.append(...tabButtons);
  // Arrow keys move between the tabs, as a tab list's do.
  tabs.addEventListener("keydown", (event) => {
    const step = { ArrowRight: 1, ArrowLeft: -1 }[event.key];
    if (!step) return;
    event.preventDefault();
    const now = SECTIONS.findIndex(([key]) => key === (source.state.get("section") || "agents"));
    const next = (now + step + SECTIONS.length) % SECTIONS.length;
    source.section(SECTIONS[next][0]);
    tabButtons[next].focus();
  });

  // Your agents, and what the metered ones cost this month (cost-views.js).
  const form = agentForm(source.act);
  const month = monthSpend(source.act);
  panels.agents.append(
    h("p", { class: "conch-muted", text: "Mention an agent with @ and its name to start a round." }),
    locks.agents,
    problems.agents,
    lists.agents,
    h("button", { type: "button", class: "conch-button conch-add", text: "Add an agent", onclick: () => form.open(null) }),
    form.el,
    month.el,
  );

  // Outside agents (settings-outside.js).
  const outside = outsideSection(source, lists.outside);
  panels.outside.append(
    h("p", {
      class: "conch-muted",
      text: "An outside agent lives elsewhere. It is sent only the words of a message that mentions it, and its answers are someone else's words.",
    }),
    notes.outside,
    locks.outside,
    problems.outside,
    lists.outside,
    h("div", { class: "conch-actions" }, outside.repair),
    outside.form,
  );

  // Your MCP servers (settings-tools.js).
  const toolsPart = toolsSection(source, lists.tools);
  panels.tools.append(
    h("p", {
      class: "conch-muted",
      text: "Your MCP servers lend your agents their tools, under the chat's mode: what only reads runs, a change asks (Read refuses it), and what a tool brings in from outside taints the chat. Give an agent a server on its form.",
    }),
    notes.tools,
    locks.tools,
    problems.tools,
    lists.tools,
    toolsPart.form,
  );

  // Agents that can talk to yours.
  const choices = h("div", { class: "conch-choices" });
  const remote = /** @type {HTMLInputElement} */ (h("input", { type: "checkbox" }));
  const once = h("div", { class: "conch-once", hidden: true, role: "region", "aria-label": "Shown once" });
  const said = h("div", { class: "conch-said", hidden: true });
  const pairForm = h(
    "form",
    {
      class: "conch-form",
      onsubmit: (/** @type {Event} */ e) => {
        e.preventDefault();
        const agents = [...choices.querySelectorAll("input:checked")].map((box) => /** @type {HTMLInputElement} */ (box).value);
        source.act({ type: "pairing.add", agents, remote: remote.checked });
      },
    },
    h("h4", { class: "conch-form-title", text: "Pair an agent" }),
    choices,
    h(
      "label",
      { class: "conch-check" },
      remote,
      h("span", { text: "The other agent runs on another computer (it comes in over HTTPS, once the server lets remote agents in)" }),
    ),
    h("div", { class: "conch-actions" }, h("button", { type: "submit", class: "conch-button", text: "Pair" })),
  );
  panels.pairings.append(
    h("p", { class: "conch-muted", text: "Off until you pair one: another agent reaches yours only with the key a pairing gives it, and gets words only." }),
    notes.pairings,
    locks.pairings,
    problems.pairings,
    once,
    lists.pairings,
    said,
    pairForm,
  );

  // Drawn through the kernel (no Jupyter server of this page's own): the kernel key only reads,
  // so nothing here offers a change, and this line says where to make one.
  const readOnly = h("p", { class: "conch-read-only", role: "note", hidden: true });
  const root = h("div", { class: "conch conch-settings" }, readOnly, tabs, ...Object.values(panels));
  el.append(root);

  function drawAgents() {
    /** @type {any[]} */
    const agents = source.state.get("agents") || [];
    form.setFound(source.state.get("acp_found") || []);
    form.setServers(source.state.get("mcp_servers") || []);
    lists.agents.replaceChildren(
      ...agents.map((agent) =>
        h(
          "li",
          { class: "conch-row" },
          disc(agent.name, agent.name.slice(0, 1).toUpperCase()),
          h(
            "div",
            { class: "conch-row-main" },
            h("strong", { text: agent.name }),
            agent.persona && h("span", { class: "conch-muted conch-persona", text: agent.persona }),
            h(
              "span",
              { class: "conch-small" },
              agent.provider?.kind === "acp"
                ? acpCardWords(agent) +
                    (agent.price ? ` · $${agent.price.input_per_mtok}/$${agent.price.output_per_mtok} per M tokens` : " · not metered by Conch")
                : [...new Set([choiceOf(agent.provider), agent.provider?.model].filter(Boolean))].join(" · ") +
                    (agent.price ? ` · $${agent.price.input_per_mtok}/$${agent.price.output_per_mtok} per M tokens` : " · not metered") +
                    (agent.has_key ? " · key kept" : ""),
            ),
          ),
          h(
            "div",
            { class: "conch-row-actions" },
            h("button", { type: "button", class: "conch-button conch-quiet", text: "Edit", onclick: () => form.open(agent) }),
            confirmButton("Remove", `Remove ${agent.name}?`, () => source.act({ type: "agent.remove", id: agent.id })),
          ),
        ),
      ),
    );
    choices.replaceChildren(
      ...agents.map((agent) => h("label", { class: "conch-check" }, h("input", { type: "checkbox", value: agent.id }), h("span", { text: agent.name }))),
    );
  }

  function drawPairings() {
    /** @type {any[] | null} */
    const rows = source.state.get("pairings");
    /** @type {any[]} */
    const agents = source.state.get("agents") || [];
    const nameOf = (/** @type {string} */ id) => agents.find((a) => a.id === id)?.name || id;
    const locked = source.state.get("locked") || {};
    pairForm.hidden = rows === null || locked.door === false;
    remote.disabled = locked.door_remote === false;
    if (remote.disabled) remote.checked = false;
    lists.pairings.replaceChildren(
      ...(rows || []).map((pairing) =>
        h(
          "li",
          { class: "conch-row" },
          h(
            "div",
            { class: "conch-row-main" },
            h("strong", { text: (pairing.agents || []).map(nameOf).join(", ") }),
            h("span", { class: "conch-small", text: pairing.remote ? "On another computer" : "On this computer" }),
            pairing.address && h("code", { class: "conch-small", text: pairing.address }),
            pairing.created && h("span", { class: "conch-small", text: `Paired ${new Date(pairing.created * 1000).toLocaleString()}` }),
          ),
          h(
            "div",
            { class: "conch-row-actions" },
            h("button", {
              type: "button",
              class: "conch-button conch-quiet conch-reads",
              text: "What it said",
              onclick: () => source.act({ type: "pairing.said", id: pairing.id }),
            }),
            confirmButton("Remove", "Remove: it can no longer reach you", () => source.act({ type: "pairing.remove", id: pairing.id })),
          ),
        ),
      ),
    );
    const what = source.state.get("said");
    said.hidden = !what;
    if (what) {
      const quiet = { announce: () => {}, stop: () => {} };
      said.replaceChildren(
        h(
          "div",
          { class: "conch-said-head" },
          h("h4", { class: "conch-form-title", text: "What it said" }),
          h("button", { type: "button", class: "conch-button conch-quiet", text: "Close", onclick: () => source.act({ type: "said.close" }) }),
        ),
        ...(what.note ? [h("p", { class: "conch-muted", text: what.note })] : []),
        ...(what.chats || []).map((/** @type {any} */ chat) =>
          h("ol", { class: "conch-log conch-said-chat" }, ...saidItems(chat.conversation).map((item) => drawItem(item, quiet).el)),
        ),
      );
    }
  }

  /** The address and key, shown once: kept in this view only, never in the saved state. */
  /** @param {any} made */
  function showOnce(made) {
    const text = made.paste || `${made.address}\n${made.key}`;
    const copy = h("button", { type: "button", class: "conch-button", text: "Copy" });
    const block = h("pre", { class: "conch-secret", tabindex: 0, text });
    copy.addEventListener("click", async () => {
      try {
        await navigator.clipboard.writeText(text);
        copy.textContent = "Copied";
      } catch {
        const range = document.createRange();
        range.selectNodeContents(block);
        window.getSelection()?.removeAllRanges();
        window.getSelection()?.addRange(range);
        copy.textContent = "Selected: press Ctrl+C";
      }
    });
    once.replaceChildren(
      h("strong", { text: "Give this to the other agent. It is shown only this once." }),
      block,
      // The paste holds the address already: said again only when there is no paste.
      ...(made.paste ? [] : [h("div", { class: "conch-small" }, h("span", { text: "Address: " }), h("code", { text: made.address || "" }))]),
      ...(made.note ? [h("p", { class: "conch-small", text: made.note })] : []),
      h(
        "div",
        { class: "conch-actions" },
        copy,
        h("button", {
          type: "button",
          class: "conch-button conch-quiet",
          text: "Done",
          onclick: () => {
            once.hidden = true;
            once.replaceChildren();
          },
        }),
      ),
    );
    once.hidden = false;
  }

  function draw() {
    const section = source.state.get("section") || "agents";
    const working = source.state.get("working") || "";
    const unavailable = source.state.get("unavailable") || {};
    const problem = source.state.get("problem") || {};
    const locked = sectionLocks(source.state.get("locked") || {});
    form.lock(source.state.get("locked") || {});
    SECTIONS.forEach(([key], i) => {
      const said = locked[/** @type {keyof typeof locked} */ (key)];
      locks[key].hidden = !said.length;
      locks[key].textContent = said.join(" ");
      tabButtons[i].setAttribute("aria-selected", String(key === section));
      tabButtons[i].tabIndex = key === section ? 0 : -1;
      panels[key].hidden = key !== section;
      problems[key].hidden = !problem[key];
      problems[key].textContent = problem[key] || "";
      notes[key].hidden = !unavailable[key];
      notes[key].textContent = unavailable[key] || "";
    });
    root.classList.toggle("is-working", Boolean(working));
    const readOnlyWords = source.state.get("read_only") || "";
    readOnly.hidden = !readOnlyWords;
    readOnly.textContent = readOnlyWords;
    root.classList.toggle("is-read-only", Boolean(readOnlyWords));
    drawAgents();
    month.draw(source.state.get("budget") || null, !readOnlyWords, source.state.get("locked") || {});
    outside.draw();
    toolsPart.draw();
    drawPairings();
  }

  /** @param {any} message */
  function onMessage(message) {
    if (message?.type === "pairing.created") showOnce(message);
    outside.onMessage(message);
    toolsPart.onMessage(message);
    if (message?.type === "done" && message.ok) {
      if (message.action === "agent.save") form.close();
      if (message.action === "pairing.add") {
        remote.checked = false;
        for (const box of choices.querySelectorAll("input")) /** @type {HTMLInputElement} */ (box).checked = false;
      }
    }
  }

  const traits = ["section", "agents", "outside", "pairings", "mcp_servers", "unavailable", "said", "problem", "working", "read_only", "locked", "budget"];
  for (const name of traits) source.state.on(`change:${name}`, draw);
  const unlisten = source.listen(onMessage);
  draw();
  return () => {
    for (const name of traits) source.state.off(`change:${name}`, draw);
    unlisten();
    source.close();
    root.remove();
  };
}
