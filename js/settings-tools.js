// @ts-check
/**
 * Settings → Tools: your MCP servers. Each row shows the server (its program or address, the
 * names of its environment or headers — never their values), its tools with what their
 * annotations claim and what that means under the chat's mode, and its last problem; Test starts
 * it afresh and lists its tools, Remove ends it (its whole process group) and gives it to no
 * agent any more. The form adds a stdio server (command, arguments, environment) or a Streamable
 * HTTP one (address, headers). Which agent gets which server is a checkbox on the agent's form
 * (`serverChoices`). Where the administrator's policy turns MCP servers off, the form is hidden
 * and the section's lock says why (policy.js).
 *
 * `toolWords` is pure (tested with node --test).
 */

import { confirmButton, field } from "./controls.js";
import { h } from "./dom.js";

/**
 * What a tool's annotations mean under the one rule: a short label and the longer words.
 * @param {Record<string, unknown> | null | undefined} annotations
 * @returns {{label: string, words: string}}
 */
export function toolWords(annotations) {
  const given = annotations || {};
  const reading = given.readOnlyHint === true;
  const outward = given.openWorldHint !== false;
  if (reading && !outward) return { label: "reads", words: "Reads only: runs in every mode." };
  if (reading) {
    return {
      label: "reads, reaches out",
      words:
        "Reads, and reaches outside: runs in every mode while the chat is untainted; once it holds someone else's words it asks (Read: refused). What it brings in taints the chat.",
    };
  }
  const said = Object.keys(given).length ? (given.destructiveHint === false ? "changes (not destructive)" : "changes") : "no annotations: a change";
  return {
    label: said,
    words: `A change: Read refuses it, Ask asks you, Auto runs it while the chat is untainted and asks once it is tainted.${outward ? " What it brings in taints the chat." : ""}`,
  };
}

/** `NAME=value` lines as a map ({} for none). @param {string} text */
export function namedValues(text) {
  /** @type {Record<string, string>} */
  const out = {};
  for (const line of text.split("\n")) {
    if (!line.trim()) continue;
    const at = line.indexOf("=");
    if (at <= 0) throw new Error(`“${line.trim().slice(0, 40)}” is not NAME=value.`);
    out[line.slice(0, at).trim()] = line.slice(at + 1);
  }
  return out;
}

/**
 * @param {import("./settings.js").SettingsSource} source @param {HTMLElement} list
 * @returns {{form: HTMLElement, draw(): void, onMessage(message: any): void}}
 */
export function toolsSection(source, list) {
  /** @param {string} name @param {Record<string, any>} [props] */
  const input = (name, props = {}) => /** @type {HTMLInputElement} */ (h("input", { name, autocomplete: "off", ...props }));
  const name = input("mcp-name", { maxlength: 40, required: true, placeholder: "web, db …" });
  const transport = /** @type {HTMLSelectElement} */ (
    h(
      "select",
      { name: "mcp-transport" },
      h("option", { value: "stdio", text: "a program (stdio)" }),
      h("option", { value: "http", text: "an address (Streamable HTTP)" }),
    )
  );
  const command = input("mcp-command", { placeholder: "uvx, npx, /path/to/server …" });
  const args = /** @type {HTMLTextAreaElement} */ (h("textarea", { name: "mcp-args", rows: 2, placeholder: "one argument a line" }));
  const url = input("mcp-url", { placeholder: "the server's address (most end in /mcp)" });
  const values = /** @type {HTMLTextAreaElement} */ (
    h("textarea", { name: "mcp-values", rows: 2, placeholder: "NAME=value, one a line (sealed, never shown again)" })
  );
  const stdioRows = [field("Command", command), field("Arguments", args)];
  const httpRows = [field("Address", url)];
  const valuesRow = field("Environment", values);
  const show = () => {
    const stdio = transport.value === "stdio";
    for (const row of stdioRows) row.hidden = !stdio;
    for (const row of httpRows) row.hidden = stdio;
    const label = valuesRow.querySelector("span, label");
    if (label) label.textContent = stdio ? "Environment" : "Headers";
  };
  transport.addEventListener("change", show);
  const said = h("p", { class: "conch-row-problem", hidden: true });
  const form = h(
    "form",
    {
      class: "conch-form conch-mcp-add",
      onsubmit: (/** @type {Event} */ e) => {
        e.preventDefault();
        let named;
        try {
          named = namedValues(values.value);
        } catch (error) {
          said.hidden = false;
          said.textContent = String(/** @type {Error} */ (error).message);
          return;
        }
        said.hidden = true;
        const stdio = transport.value === "stdio";
        /** @type {Record<string, any>} */
        const server = { name: name.value.trim(), transport: transport.value };
        if (stdio) {
          server.command = command.value.trim();
          server.args = args.value.split("\n").filter((a) => a.trim() !== "");
          server.env = named;
        } else {
          server.url = url.value.trim();
          server.headers = named;
        }
        source.act({ type: "mcp.add", server });
      },
    },
    h("h4", { class: "conch-form-title", text: "Add an MCP server" }),
    h("div", { class: "conch-field-row" }, field("Name", name), field("It is", transport)),
    ...stdioRows,
    ...httpRows,
    valuesRow,
    said,
    h("div", { class: "conch-actions" }, h("button", { type: "submit", class: "conch-button", text: "Add" })),
  );
  show();

  /** @param {any} tool */
  function toolItem(tool) {
    const meaning = toolWords(tool.annotations);
    return h(
      "li",
      { class: "conch-mcp-tool", title: meaning.words },
      h("code", { text: tool.name }),
      h("span", { class: "conch-small conch-mcp-hint", text: ` ${meaning.label}` }),
      tool.description && h("span", { class: "conch-muted", text: ` — ${String(tool.description).slice(0, 160)}` }),
    );
  }

  function draw() {
    /** @type {any[] | null | undefined} */
    const servers = source.state.get("mcp_servers");
    const locked = source.state.get("locked") || {};
    form.hidden = !Array.isArray(servers) || locked.mcp === false;
    list.replaceChildren(
      ...(servers || []).map((server) =>
        h(
          "li",
          { class: "conch-row conch-mcp-server", "data-id": server.id },
          h(
            "div",
            { class: "conch-row-main" },
            h("strong", { text: server.name }),
            h("code", { class: "conch-small", text: server.transport === "http" ? server.url : [server.command, ...(server.args || [])].join(" ") }),
            Boolean(server.env_names?.length || server.header_names?.length) &&
              h("span", { class: "conch-small", text: `Sealed: ${[...(server.env_names || []), ...(server.header_names || [])].join(", ")}` }),
            h("span", { class: "conch-small", text: server.running ? "running" : server.started ? "not running now" : "not started yet" }),
            server.tools?.length ? h("ul", { class: "conch-mcp-tools", "aria-label": `Tools of ${server.name}` }, ...server.tools.map(toolItem)) : null,
            server.problem && h("span", { class: "conch-row-problem", text: `Last problem: ${server.problem}` }),
          ),
          h(
            "div",
            { class: "conch-row-actions" },
            h("button", {
              type: "button",
              class: "conch-button conch-quiet",
              text: "Test",
              "aria-label": `Test ${server.name}`,
              onclick: () => source.act({ type: "mcp.test", id: server.id }),
            }),
            confirmButton("Remove", `Remove ${server.name}?`, () => source.act({ type: "mcp.remove", id: server.id })),
          ),
        ),
      ),
    );
  }

  /** @param {any} message */
  function onMessage(message) {
    if (message?.type === "done" && message.ok && message.action === "mcp.add") {
      name.value = command.value = args.value = url.value = values.value = "";
    }
  }

  return { form, draw, onMessage };
}

/**
 * The agent form's checkboxes, one per server: which servers' tools an agent's turns are offered.
 * @returns {{el: HTMLElement, set(servers: any[], chosen: string[]): void, chosen(): string[]}}
 */
export function serverChoices() {
  const boxes = h("div", { class: "conch-choices conch-mcp-choices", role: "group", "aria-label": "Tools from your MCP servers" });
  const el = h("div", { class: "conch-field" }, h("span", { class: "conch-label", text: "Tools from your MCP servers" }), boxes);
  return {
    el,
    set(servers, chosen) {
      el.hidden = !servers.length;
      boxes.replaceChildren(
        ...servers.map((server) =>
          h(
            "label",
            { class: "conch-check" },
            h("input", { type: "checkbox", value: server.id, checked: chosen.includes(server.id) }),
            h("span", { text: server.name }),
          ),
        ),
      );
    },
    chosen: () => [...boxes.querySelectorAll("input:checked")].map((box) => /** @type {HTMLInputElement} */ (box).value),
  };
}
