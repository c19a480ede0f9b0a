// @ts-check
/**
 * Coding agents over ACP in the chat (issue 25): what a coding agent's permission question says
 * (the kind of action, its title, and the command, diff or path in full) and how its tool
 * lines, plan and thoughts read once folded. The approval block and the tool line themselves
 * are tool-views.js's; this module only gives them an ACP call's words.
 *
 * Pure (words only, no DOM; tested with node --test): a coding agent's commands and diffs are
 * shown as text by tool-views.js, never turned into DOM.
 */

/** The tool name of every question and line a coding agent's work leaves in the chat. */
export const ACP = "acp";

/** @type {Record<string, string>} what each ACP kind of action is, in words */
const KINDS = {
  read: "read",
  edit: "edit a file",
  delete: "delete",
  move: "move",
  search: "search",
  execute: "run a command",
  think: "think",
  fetch: "fetch from the web",
  switch_mode: "switch its mode",
  other: "act",
  plan: "plan",
};

/** @param {string} kind */
export function kindWords(kind) {
  return KINDS[kind] || kind || "act";
}

/**
 * A `tool.asking` event (or an `asking` entry) of a coding agent, as the view keeps it.
 * @param {{[key: string]: any}} event
 */
export function acpAsking(event) {
  const { call_id, agent, name, kind, title, detail } = event;
  return {
    call_id: String(call_id),
    agent: String(agent || ""),
    name,
    tool: ACP,
    kind: String(kind || "other"),
    title: String(title || ""),
    detail: String(detail || ""),
  };
}

/**
 * The approval's head in its three parts: who, "wants to run a command", and the title.
 * @param {{name?: string, agent?: string, kind?: string, title?: string}} asking
 * @returns {{who: string, wants: string, title: string}}
 */
export function acpHead(asking) {
  const who = asking.name || asking.agent || "A coding agent";
  return { who, wants: ` wants to ${kindWords(asking.kind || "")}${asking.title ? ": " : ""}`, title: asking.title || "" };
}

/** @param {{name?: string, kind?: string}} asking */
export function acpAnnouncement(asking) {
  return `${asking.name || "A coding agent"} asks to ${kindWords(asking.kind || "")}. Allow or Don't allow are below the chat.`;
}

/**
 * A coding agent's line, folded: "Coder · Edit analysis.py · ran".
 * @param {{[key: string]: any}} message @param {string} name @param {string} ending
 */
export function acpSummary(message, name, ending) {
  const title = String(message.title || kindWords(String(message.kind || "")));
  return `${name} · ${title} · ${ending}`;
}

/**
 * What came back of a coding agent's tool call, as it reads (issue 32): its text, and the code
 * blocks its Markdown fences hold ("```console … ```", as the adapters write a command's output)
 * drawn as code without their fence marks; a text part that only repeats a block (the call's raw
 * output after its fenced copy) is left out, so the output shows once.
 * Pure: tool-views.js makes the parts into text nodes, never HTML.
 * @param {string} text @returns {{kind: "text" | "code", text: string}[]}
 */
export function acpOutputParts(text) {
  /** @type {{kind: "text" | "code", text: string}[]} */
  const parts = [];
  /** @type {string[]} */
  let lines = [];
  /** @type {string | null} the open fence's marks */
  let fence = null;
  const flush = (/** @type {"text" | "code"} */ kind) => {
    const said = kind === "text" ? lines.join("\n").trim() : lines.join("\n");
    if (said) parts.push({ kind, text: said });
    lines = [];
  };
  for (const line of text.split("\n")) {
    const marks = /^\s*(`{3,}|~{3,})/.exec(line)?.[1] ?? null;
    if (fence === null && marks) {
      flush("text");
      fence = marks;
    } else if (fence !== null && marks && marks[0] === fence[0] && marks.length >= fence.length && !line.trim().slice(marks.length)) {
      flush("code");
      fence = null;
    } else lines.push(line);
  }
  flush(fence === null ? "text" : "code");
  const blocks = parts.filter((p) => p.kind === "code").map((p) => p.text.trim().split("\n"));
  return parts.map((p) => (p.kind === "code" ? p : { kind: p.kind, text: withoutRepeats(p.text, blocks) })).filter((p) => p.text);
}

/**
 * Text without the runs of lines that repeat a code block's lines (the raw copy of an output).
 * @param {string} text @param {string[][]} blocks
 */
function withoutRepeats(text, blocks) {
  const lines = text.split("\n");
  for (const block of blocks) {
    for (let i = 0; i + block.length <= lines.length; i++) {
      if (block.every((line, k) => lines[i + k].trim() === line.trim())) {
        lines.splice(i, block.length);
        i -= 1;
      }
    }
  }
  return lines.join("\n").trim();
}
