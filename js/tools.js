// @ts-check
/**
 * Agents that work in the notebook, as the view follows them (issue 14): the chat's mode and
 * taint, the runs asking for the user's yes, the call at work now, a run Stop could not end
 * (the kernel still busy with it: `stuck`), and a tool message as a chat item. Pure: no DOM, no
 * network (tested with node --test); timeline.js folds it into the chat.
 */

import { ACP, acpAsking, acpSummary } from "./acp.js";

/**
 * @typedef {{[key: string]: any}} Item
 * @typedef {"ask" | "auto" | "read"} Mode
 * @typedef {{call_id: string, agent: string, name?: string, tool: string, code?: string, outside?: string, text?: string,
 *   cell_id?: string | null, old?: string, new?: string, after?: string | null, cell_type?: string, kind?: string, title?: string, detail?: string,
 *   names?: string[], server?: string}} Asking
 * @typedef {Asking & {state: "asking" | "waiting" | "running"}} Working
 * @typedef {{call_id: string, agent: string, name?: string, words: string}} Stuck
 */

/** @type {{mode: Mode, label: string}[]} the header's switch, in its order */
export const MODES = [
  { mode: "ask", label: "Ask" },
  { mode: "auto", label: "Auto" },
  { mode: "read", label: "Read" },
];

/**
 * What the chat's header says about running code (the server's notebook/rules.py header_words
 * says the same to other clients). Once someone else's words are in the chat, Auto asks again.
 * @param {string} mode @param {boolean} tainted @param {string} [by] the taint's kind ("tool": an MCP tool's result)
 * @returns {{words: string, guarded: boolean}}
 */
export function modeWords(mode, tainted, by = "") {
  if (mode === "read") return { words: "Read: agents can read the notebook but not run code.", guarded: false };
  if (mode === "auto" && tainted && by === "tool") return { words: "Asking again: what one of your tools brought in is in this chat.", guarded: true };
  if (mode === "auto" && tainted) return { words: "Asking again: an outside agent's words are in this chat.", guarded: true };
  if (mode === "auto") return { words: "Auto: agents run code without asking.", guarded: false };
  return { words: "Ask: every run waits for your yes.", guarded: false };
}

/** The chat's tool state as followed: mode, taint, what asks, what works. */
export class ToolState {
  constructor() {
    /** @type {Mode} */
    this.mode = "ask";
    this.tainted = false;
    this.taintKind = ""; // "tool" once an MCP tool's result tainted the chat
    // A door chat's mode is not the user's to change (the server answers 404).
    this.switchable = true;
    /** @type {Map<string, Asking>} call_id → the run waiting for a yes, oldest first */
    this.asking = new Map();
    /** @type {Working | null} */
    this.working = null;
    /** @type {Stuck | null} the run Stop could not end, while the kernel is busy with it */
    this.stuck = null;
    /** @type {import("./policy.js").Locked} what the administrator's policy locks (policy.js) */
    this.locked = {};
  }

  /**
   * Take one item of the event stream; say whether the tool state changed.
   * @param {Item} item
   */
  take(item) {
    switch (item?.type) {
      case "snapshot":
      case "resumed": {
        // A snapshot, or the live parts of a stream that resumed (its missed messages came first).
        const chat = item.conversation || {};
        this.mode = modeOf(chat.mode);
        const heard = (chat.messages || []).some((/** @type {Item} */ m) => m.role === "outside");
        this.tainted = Boolean(chat.tainted) || heard || (item.type === "resumed" && this.tainted);
        this.taintKind = String(chat.tainted?.kind || (item.type === "resumed" ? this.taintKind : ""));
        this.switchable = (chat.origin || "user") === "user";
        this.asking = new Map((chat.asking || []).map((/** @type {Asking} */ a) => [String(a.call_id), a]));
        this.working = chat.working || null;
        this.stuck = stuckOf(chat.stuck);
        return true;
      }
      case "message":
        // An outside agent's answer taints the chat: from here Auto asks again.
        if (item.message?.role !== "outside" || this.tainted) return false;
        this.tainted = true;
        return true;
      case "event": {
        const event = item.event || {};
        if (event.type === "mode.changed") this.mode = modeOf(event.mode);
        else if (event.type === "chat.tainted") {
          // What one of your MCP tools brought in: from here Auto asks again.
          this.tainted = true;
          this.taintKind = this.taintKind || String(event.kind || "");
        } else if (event.type === "tool.asking" || event.type === "send.asking" || event.type === "continue.asking")
          this.asking.set(String(event.call_id), askingOf(event));
        else if (event.type === "tool.ended") this.asking.delete(String(event.call_id));
        else if (event.type === "kernel.idle" && this.stuck?.call_id === String(event.call_id)) this.stuck = null;
        else return false;
        return true;
      }
      case "working": {
        this.working = item.working || null;
        // A call that works on is no longer asking: it was answered, here or on another page.
        if (this.working && this.working.state !== "asking") this.asking.delete(String(this.working.call_id));
        return true;
      }
      case "stuck": // the server's words change (Interrupt again did not end it), or it ended
        this.stuck = stuckOf(item.stuck);
        return true;
      default:
        return false;
    }
  }

  /**
   * What to show an approval for, oldest first: runs, and messages from the kernel waiting to
   * go to an outside agent (`send_outside`), and the kernel's request to continue a round
   * (`continue`). @returns {Asking[]}
   */
  approvals() {
    return [...this.asking.values()].filter(
      (a) => a.tool === "run_code" || a.tool === SEND_OUTSIDE || a.tool === CONTINUE || a.tool === ACP || CELL_TOOLS.has(a.tool) || Boolean(a.server),
    );
  }
}

/** The notebook's kernel asks to continue a round stopped at its bound (%conch continue). */
export const CONTINUE = "continue";

/** A message from the notebook's kernel waiting for the user's yes before it goes outside. */
export const SEND_OUTSIDE = "send_outside";
/** The tools that write the user's cells (run_cell writes its outputs): each asks in Ask. */
export const CELL_TOOLS = new Set(["add_cell", "edit_cell", "delete_cell", "run_cell"]);

/** @param {unknown} mode @returns {Mode} */
function modeOf(mode) {
  return mode === "auto" || mode === "read" ? mode : "ask";
}

/** @param {unknown} stuck @returns {Stuck | null} */
export function stuckOf(stuck) {
  if (!stuck || typeof stuck !== "object") return null;
  const { call_id, agent, name, words } = /** @type {Item} */ (stuck);
  const who = typeof name === "string" && name ? name : "An agent";
  return { call_id: String(call_id), agent: String(agent || ""), name, words: String(words || `${who}'s code did not stop: the kernel is still busy.`) };
}

/** @param {Item} event @returns {Asking} */
function askingOf(event) {
  const { call_id, agent, name, code, outside, text } = event;
  // A message from the kernel waiting to go to an outside agent: who it goes to, the words.
  if (event.type === "send.asking") return { call_id: String(call_id), agent: "", name, tool: SEND_OUTSIDE, outside, text };
  // The kernel asks to continue the last round: who would have the floor.
  if (event.tool === CONTINUE) return { call_id: String(call_id), agent: "", tool: CONTINUE, names: (event.names || []).map(String) };
  if (event.tool === ACP) return acpAsking(event); // a coding agent's permission question
  const tool = String(event.tool || "");
  if (CELL_TOOLS.has(tool)) {
    // The change the yes is asked for: the cell, its text before and after (DESIGN.md).
    const { cell_id, old, after, cell_type } = event;
    return { call_id: String(call_id), agent: String(agent || ""), name, tool, code, cell_id, old, new: event.new, after, cell_type };
  }
  // A tool of one of your MCP servers: its server, and its arguments (as JSON) as the code.
  if (typeof event.server === "string" && event.server) return { call_id: String(call_id), agent: String(agent || ""), name, tool, code, server: event.server };
  return { call_id: String(call_id), agent: String(agent || ""), name, tool, code };
}

/**
 * What the agent with the floor is doing, for the round card's line and the streaming reply:
 * "Analyst is running code", "Analyst is waiting for the kernel"; "" when no call works.
 * @param {Working | null} working @param {string} name the agent's name as people see it
 */
export function workingWords(working, name) {
  if (!working) return "";
  if (working.state === "asking") return `${name} is waiting for your yes`;
  if (working.state === "waiting") return `${name} is waiting for the kernel`;
  if (working.tool === "run_code") return `${name} is running code`;
  if (working.tool === "read_notebook") return `${name} is reading the notebook`;
  if (working.tool === "add_cell") return `${name} is adding a cell`;
  if (working.tool === "edit_cell") return `${name} is editing a cell`;
  if (working.tool === "delete_cell") return `${name} is deleting a cell`;
  if (working.tool === "run_cell") return `${name} is running a cell`;
  if (working.tool === "list_variables") return `${name} is looking at the variables`;
  if (working.server) return `${name} is using ${working.tool} of your MCP server ${working.server}`;
  return `${name} is using a tool`;
}

/** @type {Record<string, string>} how a call ended, in words */
const ENDINGS = {
  ran: "ran",
  failed: "failed",
  skipped: "not run",
  refused: "refused",
  timeout: "stopped after 60 s",
};

/** @type {Record<string, string>} */
const DOING = {
  run_code: "code",
  read_notebook: "read the notebook",
  list_variables: "listed the variables",
  add_cell: "add a cell",
  edit_cell: "edit a cell",
  delete_cell: "delete a cell",
  run_cell: "run a cell",
};

/**
 * A tool message as a chat item: what ran, what came back, how it ended (drawn folded).
 * @param {Item} message @param {string} name the agent's name
 * @returns {Item}
 */
export function toolItem(message, name) {
  const tool = String(message.tool || "");
  const state = String(message.state || "");
  const what = DOING[tool] || tool;
  return {
    kind: "tool",
    id: String(message.id),
    agent: String(message.agent || ""),
    name,
    tool,
    call_id: String(message.call_id || ""),
    state,
    summary: tool === ACP ? acpSummary(message, name, ENDINGS[state] || state) : `${name} · ${what} · ${ENDINGS[state] || state}`,
    code: typeof message.code === "string" ? message.code : "",
    output: String(message.output ?? message.text ?? ""),
    // A write to a cell: which, its text before and after, and whether Undo is offered now.
    ...(CELL_TOOLS.has(tool)
      ? {
          cell_id: typeof message.cell_id === "string" ? message.cell_id : "",
          old: typeof message.old === "string" ? message.old : "",
          new: typeof message.new === "string" ? message.new : "",
          undo: message.undo === true,
        }
      : {}),
  };
}

/**
 * Tool items moved under the reply they belong to: a turn's calls are logged before its reply
 * is stored, so each run of tool items goes after the next reply of the same agent (while that
 * reply still streams, they stay where they are, above it).
 * @param {Item[]} items @returns {Item[]}
 */
export function underReplies(items) {
  /** @type {Item[]} */
  const out = [];
  /** @type {Item[]} */
  const held = [];
  for (const item of items) {
    if (item.kind === "tool") {
      if (held.length && held[0].agent !== item.agent) out.push(...held.splice(0));
      held.push(item);
      continue;
    }
    if (held.length && item.kind === "agent" && item.agent === held[0].agent) {
      out.push(item, ...held.splice(0));
      continue;
    }
    // Anything else first means the reply never came (a turn stopped before it said a word).
    out.push(...held.splice(0));
    out.push(item);
  }
  return [...out, ...held];
}
