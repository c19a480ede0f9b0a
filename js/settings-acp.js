// @ts-check
/**
 * Settings for coding agents over ACP (issue 25): the form's part for an agent of kind `acp`
 * (choose one of the coding agents found on this machine, or type the command that starts it,
 * its arguments and its environment), and what its card says: that it is a coding agent, what
 * Conch runs, and whether it started.
 *
 * The environment's values are sealed on the server like a key and never come back: the form
 * shows the names kept, and sends values only when some are typed.
 */

import { field } from "./controls.js";
import { h } from "./dom.js";

/**
 * @typedef {{label: string, command: string, args: string[], about?: string, path?: string}} Found
 */

/** Arguments as typed: words split on spaces ("--experimental-acp", "acp"). @param {string} text */
export function argsOf(text) {
  return text.split(/\s+/).filter(Boolean);
}

// An environment variable's name as a shell takes it (the server refuses others too).
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/**
 * The environment as typed, one NAME=value a line (blank lines skipped), or the words that say
 * which line cannot be right: one without "=", or whose name is not one word.
 * @param {string} text @returns {{env: Record<string, string>} | {problem: string}}
 */
export function envOf(text) {
  /** @type {Record<string, string>} */
  const env = {};
  const lines = text.split("\n");
  for (const [i, line] of lines.entries()) {
    if (!line.trim()) continue;
    const at = line.indexOf("=");
    const name = at < 0 ? "" : line.slice(0, at).trim();
    if (!ENV_NAME.test(name)) {
      const shown = line.length > 40 ? `${line.slice(0, 39)}…` : line;
      const why = at < 0 ? "has no “=”" : "does not start with a NAME (letters, digits and _)";
      return { problem: `Environment line ${i + 1} (“${shown}”) ${why}: write NAME=value, one a line.` };
    }
    env[name] = line.slice(at + 1);
  }
  return { env };
}

/**
 * What a coding agent's card says: "coding agent (ACP) · goose acp · started".
 * @param {any} agent
 */
export function acpCardWords(agent) {
  const provider = agent?.provider || {};
  const run = [provider.command, ...(provider.args || [])].filter(Boolean).join(" ");
  const status = agent?.acp;
  const state = !status ? "not started yet" : status.started ? "started" : `could not start: ${status.problem || "no reason given"}`;
  const env = (provider.env_names || []).length ? ` · env: ${provider.env_names.join(", ")}` : "";
  // Seen changing something without asking where the chat wanted a question (issue 31).
  const unasked = status?.acts_unasked ? " · acts without asking" : "";
  return `coding agent (ACP) · ${run} · ${state}${saidWords(status)}${unasked}${env}`;
}

/**
 * What the agent said it is when it started (`initialize`'s agentInfo, issue 37): its name and
 * version, and, when that is not the agent Conch took its command for, that it is unknown.
 * @param {any} status
 */
export function saidWords(status) {
  const said = status?.said;
  if (!said?.name) return "";
  const named = [said.name, said.version].filter(Boolean).join(" ");
  return status.known_as ? ` · says it is ${named}` : ` · says it is ${named}: unknown to Conch, no turn in a Read chat`;
}

/**
 * One coding agent found on this machine, as the form offers it: what it is, what Conch runs,
 * and where it comes from (its npm package today, the Node it wants).
 * @param {Found} found
 */
export function foundWords(found) {
  const run = [found.command, ...found.args].join(" ");
  return found.about ? `${found.label} (${run}) · ${found.about}` : `${found.label} (${run})`;
}

/** The form's ACP part. */
export function acpFields() {
  const found = /** @type {HTMLSelectElement} */ (h("select", { name: "acp_found" }));
  const command = /** @type {HTMLInputElement} */ (h("input", { name: "command", placeholder: "claude-agent-acp" }));
  const args = /** @type {HTMLInputElement} */ (h("input", { name: "args", placeholder: "acp" }));
  const env = /** @type {HTMLTextAreaElement} */ (h("textarea", { name: "env", rows: 2, placeholder: "ANTHROPIC_API_KEY=… (one NAME=value a line)" }));
  // An alert only while it says something: a hidden one would still be the panel's alert.
  const problem = h("span", { class: "conch-problem", hidden: true });
  /** @type {Found[]} */
  let known = [];
  const el = h(
    "div",
    { class: "conch-acp-fields", hidden: true },
    field("Found on this machine", found),
    h("div", { class: "conch-field-row" }, field("Command", command), field("Arguments", args)),
    field("Environment (kept sealed, like a key)", env),
    problem,
  );
  found.addEventListener("change", () => {
    const chosen = known[Number(found.value)];
    if (!chosen) return;
    command.value = chosen.command;
    args.value = chosen.args.join(" ");
  });

  /** @param {Found[]} list */
  function setFound(list) {
    known = list;
    const none = list.length ? "Type a command below" : "None found on PATH: type a command below";
    found.replaceChildren(h("option", { value: "", text: none }), ...list.map((f, i) => h("option", { value: String(i), text: foundWords(f) })));
  }
  setFound([]);

  /** @param {any} agent */
  function fill(agent) {
    const provider = agent?.provider?.kind === "acp" ? agent.provider : {};
    command.value = provider.command || "";
    args.value = (provider.args || []).join(" ");
    env.value = "";
    const names = provider.env_names || [];
    env.placeholder = names.length ? `kept: ${names.join(", ")}; leave empty to keep them` : "ANTHROPIC_API_KEY=… (one NAME=value a line)";
    problem.hidden = true;
  }

  /** The provider to send, or null (with words shown) when the form cannot say one. */
  function provider() {
    /** @type {Record<string, any>} */
    const out = { kind: "acp", command: command.value.trim(), args: argsOf(args.value) };
    const typed = envOf(env.value);
    problem.hidden = !("problem" in typed);
    problem.removeAttribute("role");
    if ("problem" in typed) {
      problem.setAttribute("role", "alert");
      problem.textContent = typed.problem;
      return null;
    }
    if (Object.keys(typed.env).length) out.env = typed.env;
    return out;
  }

  /** @param {boolean} on */
  function show(on) {
    el.hidden = !on;
  }
  return { el, setFound, fill, provider, show };
}
