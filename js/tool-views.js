// @ts-check
/**
 * What agents that work in the notebook look like in the chat (issue 14): the header's mode
 * switch (Ask / Auto / Read) with its words, an approval block for each run asking for the
 * user's yes (the code in full, monospace, with Run and Don't run), the words and the two
 * buttons (Interrupt again, Restart kernel) while an agent's code that Stop interrupted runs on,
 * and a tool message as a quiet block under the agent's reply, folded, holding what ran and what
 * came back.
 *
 * Code and output are only ever text here (textContent): an agent's code and what it printed
 * are shown, never turned into DOM.
 */

import { ACP, acpAnnouncement, acpHead, acpOutputParts } from "./acp.js";
import { cellChange, cellRecord, undoBar } from "./cell-views.js";
import { h, uid } from "./dom.js";
import { HINTS, hint } from "./hints.js";
import { modeLock } from "./policy.js";
import { CELL_TOOLS, CONTINUE, MODES, SEND_OUTSIDE, modeWords } from "./tools.js";
import { and } from "./words.js";

/**
 * @typedef {import("./tools.js").Asking} Asking
 * @typedef {import("./tools.js").Mode} Mode
 * @typedef {import("./tools.js").Stuck} Stuck
 * @typedef {{mode: Mode, tainted: boolean, taintKind?: string, switchable: boolean, approvals: Asking[], stuck: Stuck | null, locked?: import("./policy.js").Locked}} ToolView
 * @typedef {"interrupt" | "restart"} KernelAction
 * @typedef {{
 *   setMode(mode: Mode): Promise<void>,
 *   answer(callId: string, run: boolean): Promise<string>,
 *   kernel(action: KernelAction): Promise<string>,
 *   undo(callId: string): Promise<string>,
 * }} ToolActions
 */

/**
 * The header's mode switch and the words beside it. Only the user's own page changes the mode
 * (the server refuses the kernel's key), so where the view relays through the kernel it is
 * not drawn.
 * @param {ToolActions} actions
 */
export function modeSwitch(actions) {
  const id = `conch-mode-${uid()}`;
  /** @type {Map<Mode, HTMLElement>} */
  const buttons = new Map();
  const group = h("div", { class: "conch-modes", role: "group", "aria-label": "How agents run code", "aria-describedby": id });
  for (const { mode, label } of MODES) {
    const button = h("button", {
      type: "button",
      class: "conch-mode",
      "data-mode": mode,
      "aria-pressed": "false",
      text: label,
      onclick: () => {
        if (button.getAttribute("aria-pressed") !== "true") actions.setMode(mode);
      },
    });
    buttons.set(mode, button);
    group.append(button);
  }
  const words = h("span", { class: "conch-mode-words", id });
  // The modes the administrator's policy turns off, said once beside the switch.
  const locks = h("span", { class: "conch-mode-lock conch-locked", hidden: true });
  const el = h("div", { class: "conch-mode-bar" }, group, words, locks);
  el.hidden = true;
  /** @type {Map<Mode, {say: (words: string) => void}>} each button's tooltip, once explained */
  const hints = new Map();

  /** @param {ToolView | undefined} view */
  function draw(view) {
    el.hidden = !view;
    if (!view) return;
    /** @type {string[]} */
    const off = [];
    for (const [mode, button] of buttons) {
      button.setAttribute("aria-pressed", String(mode === view.mode));
      const lock = modeLock(view.locked || {}, mode);
      if (lock) off.push(lock);
      button.classList.toggle("is-locked", Boolean(lock));
      hints.get(mode)?.say(lock || HINTS[mode]);
      if (view.switchable && !lock) button.removeAttribute("disabled");
      else button.setAttribute("disabled", "");
    }
    locks.hidden = !off.length;
    locks.textContent = off.join(" ");
    const said = modeWords(view.mode, view.tainted, view.taintKind);
    words.textContent = said.words;
    el.classList.toggle("is-guarded", said.guarded);
    el.dataset.mode = view.mode;
  }
  /** Each button says what its mode does, on hover and focus (hints.js), in `host`. @param {HTMLElement} host */
  function explain(host) {
    for (const [mode, button] of buttons) hints.set(mode, hint(button, HINTS[mode], host));
  }
  return { el, draw, explain };
}

/**
 * The approval blocks: one per run asking for a yes, oldest first, each gone once answered,
 * skipped or ended. Nothing takes the focus from what the person is typing: a new block is
 * announced, and its buttons are next in the tab order after the log.
 * A block that goes while the focus is in it hands the focus on (to the text box), so a
 * keyboard user answering with Enter is not left on the page's body.
 * @param {ToolActions} actions @param {(words: string) => void} announce
 * @param {() => void} refocus
 */
export function approvals(actions, announce, refocus) {
  const el = h("div", { class: "conch-approvals" });
  /** @type {Map<string, HTMLElement>} */
  const shown = new Map();

  /** @param {Asking} asking */
  function block(asking) {
    const head = `conch-ask-${uid()}`;
    const who = asking.name || asking.agent || "An agent";
    const said = h("span", { class: "conch-approval-said", role: "status" });
    let pending = false;
    // aria-disabled, not disabled: a disabled button drops the focus before the block goes.
    /** @param {boolean} on */
    const busy = (on) => {
      pending = on;
      for (const button of [run_, no]) button.setAttribute("aria-disabled", String(on));
    };
    /** @param {boolean} run */
    const answer = async (run) => {
      if (pending) return;
      busy(true);
      if (asking.tool === ACP) said.textContent = run ? "Allowing…" : "Not allowing it…";
      else if (asking.tool === SEND_OUTSIDE) said.textContent = run ? "Sending…" : "Not sending it…";
      else if (asking.tool === CONTINUE) said.textContent = run ? "Continuing…" : "Not continuing it…";
      else if (mcp) said.textContent = run ? "Allowing…" : "Not allowing it…";
      else said.textContent = run ? "Running…" : "Not running it…";
      const words = await actions.answer(asking.call_id, run);
      if (words) {
        said.textContent = words;
        busy(false);
      }
    };
    const sending = asking.tool === SEND_OUTSIDE;
    const going = asking.tool === CONTINUE; // the kernel asks to continue the round
    const coding = asking.tool === ACP; // a coding agent's permission question
    // A tool of one of your MCP servers: its server, its tool and its arguments in full.
    const mcp = typeof asking.server === "string" && asking.server !== "";
    const cell = CELL_TOOLS.has(asking.tool) ? cellChange(asking) : null;
    const yes = coding || mcp ? "Allow" : sending ? "Send" : going ? "Continue" : cell ? cell.words.yes : "Run";
    const nope = coding || mcp ? "Don't allow" : sending ? "Don't send" : going ? "Don't continue" : cell ? cell.words.no : "Don't run";
    const run_ = h("button", { type: "button", class: "conch-button conch-run", text: yes, onclick: () => answer(true) });
    const no = h("button", { type: "button", class: "conch-button conch-quiet conch-dont-run", text: nope, onclick: () => answer(false) });
    // Exactly what would go out or run, in full, as text.
    const shownText = coding ? asking.detail || "" : sending ? asking.text || "" : asking.code || "";
    const label = coding ? "What it will do" : sending ? "The words" : mcp ? "The arguments" : "The code";
    const head_ = coding ? acpHead(asking) : null;
    const code = going ? null : cell ? cell.code : h("pre", { class: "conch-code", tabindex: "0", "aria-label": label }, h("code", { text: shownText }));
    const headWords = going
      ? [
          h("span", { class: "conch-kernel-mark", text: "From the notebook's kernel:" }),
          " continue the round, from ",
          h("span", { class: "conch-who", text: and(asking.names || []) || "the agent next on the floor" }),
          ", with fresh bounds?",
        ]
      : head_
        ? [h("span", { class: "conch-who", text: head_.who }), head_.wants, h("span", { class: "conch-acp-title", text: head_.title })]
        : cell
          ? [h("span", { class: "conch-who", text: who }), cell.words.head]
          : sending
            ? [
                h("span", { class: "conch-kernel-mark", text: "From the notebook's kernel:" }),
                " send these words to ",
                h("span", { class: "conch-who", text: who }),
                " (an outside agent)?",
              ]
            : mcp
              ? [
                  h("span", { class: "conch-who", text: who }),
                  " wants to use ",
                  h("code", { class: "conch-mcp-tool-name", text: String(asking.tool).slice(String(asking.server).length + 2) }),
                  " of your MCP server ",
                  h("strong", { text: String(asking.server) }),
                ]
              : [h("span", { class: "conch-who", text: who }), " wants to run this code in your notebook's kernel"];
    return h(
      "section",
      {
        class: "conch-approval" + (sending ? " is-send" : "") + (coding ? " is-acp" : "") + (mcp ? " is-mcp" : ""),
        "aria-labelledby": head,
        "data-call": asking.call_id,
        "data-tool": asking.tool,
      },
      h("div", { class: "conch-approval-head", id: head }, ...headWords),
      code,
      h("div", { class: "conch-approval-bar" }, run_, no, said),
    );
  }

  /** @param {ToolView | undefined} view */
  function draw(view) {
    const wanted = view ? view.approvals : [];
    const ids = new Set(wanted.map((a) => a.call_id));
    for (const [id, node] of shown) {
      if (!ids.has(id)) {
        const focused = node.contains(document.activeElement);
        node.remove();
        if (focused) refocus();
        shown.delete(id);
      }
    }
    for (const asking of wanted) {
      if (shown.has(asking.call_id)) continue;
      const node = block(asking);
      shown.set(asking.call_id, node);
      el.append(node);
      if (asking.tool === ACP) announce(acpAnnouncement(asking));
      else if (asking.tool === CONTINUE) announce("The notebook's kernel asks to continue the round. Continue or Don't continue are below the chat.");
      else if (asking.tool === SEND_OUTSIDE)
        announce(
          `A message from the notebook's kernel waits for your yes before it goes to ${asking.name || "an outside agent"}. Send or Don't send are below the chat.`,
        );
      else if (asking.server)
        announce(`${asking.name || "An agent"} asks to use ${asking.tool} of your MCP server ${asking.server}. Allow or Don't allow are below the chat.`);
      else announce(`${asking.name || "An agent"} asks to run code. Run or Don't run are below the chat.`);
    }
    el.hidden = shown.size === 0;
  }
  return { el, draw };
}

/**
 * While an agent's code that Stop interrupted runs on (it caught the interrupt), the server's
 * words for it and the user's two ways out: Interrupt again, and Restart kernel. Drawn where the
 * approvals are, for the same reason (only the user's own Jupyter auth may do either; the
 * kernel's key gets 403), and gone once the kernel is done with the run (the chat's note says
 * how). Words are text only.
 * @param {ToolActions} actions @param {(words: string) => void} announce
 * @param {() => void} refocus
 */
export function stuckBlock(actions, announce, refocus) {
  const head = `conch-stuck-${uid()}`;
  const words = h("div", { class: "conch-stuck-words", id: head });
  // A status region only while the block shows: a hidden one would still be the chat's first.
  const said = h("span", { class: "conch-stuck-said" });
  let pending = false;
  /** @type {string | null} */
  let shownFor = null;
  /** @param {KernelAction} action @param {string} doing */
  const act = async (action, doing) => {
    if (pending) return;
    pending = true;
    for (const button of [again, restart]) button.setAttribute("aria-disabled", "true");
    said.textContent = doing;
    const problem = await actions.kernel(action);
    said.textContent = problem;
    pending = false;
    for (const button of [again, restart]) button.setAttribute("aria-disabled", "false");
  };
  const again = h("button", {
    type: "button",
    class: "conch-button conch-interrupt",
    text: "Interrupt again",
    onclick: () => act("interrupt", "Interrupting…"),
  });
  const restart = h("button", {
    type: "button",
    class: "conch-button conch-quiet conch-restart",
    text: "Restart kernel",
    title: "Restarting ends the code, and the kernel's variables are lost.",
    onclick: () => act("restart", "Restarting the kernel…"),
  });
  const el = h("section", { class: "conch-stuck", "aria-labelledby": head }, words, h("div", { class: "conch-stuck-bar" }, again, restart, said));
  el.hidden = true;

  /** @param {ToolView | undefined} view */
  function draw(view) {
    const stuck = view ? view.stuck : null;
    if (!stuck) {
      if (!el.hidden && el.contains(document.activeElement)) refocus();
      el.hidden = true;
      shownFor = null;
      said.textContent = "";
      said.removeAttribute("role");
      return;
    }
    el.hidden = false;
    said.setAttribute("role", "status");
    el.dataset.call = stuck.call_id;
    if (words.textContent !== stuck.words) words.textContent = stuck.words;
    if (shownFor !== stuck.call_id) {
      shownFor = stuck.call_id;
      announce(`${stuck.words} Interrupt again or Restart kernel are below the chat.`);
    }
  }
  return { el, draw };
}

/**
 * What came back, as text. A coding agent's is read as it writes it: its fenced blocks drawn as
 * code, the rest as text, the output once (acp.js's acpOutputParts).
 * @param {{[key: string]: any}} item
 */
function toolOutput(item) {
  const output = String(item.output || "");
  if (item.tool !== ACP || !/^\s*(```|~~~)/m.test(output)) {
    return h("pre", { class: "conch-code conch-tool-output", tabindex: "0", text: output || "(nothing)" });
  }
  const drawn = acpOutputParts(output).map((part) =>
    part.kind === "code"
      ? h("pre", { class: "conch-code", tabindex: "0" }, h("code", { text: part.text }))
      : h("p", { class: "conch-tool-text", text: part.text }),
  );
  return h("div", { class: "conch-tool-output is-drawn" }, ...drawn);
}

/**
 * A tool message: a quiet, folded block under the agent's reply — what ran, what came back,
 * how it ended; a write to a cell offers Undo while the server does.
 * @param {{[key: string]: any}} item
 * @param {((callId: string) => Promise<string>) | undefined} [undo]
 */
export function toolBlock(item, undo = undefined) {
  const parts = [...cellRecord(item)];
  if (item.code)
    parts.push(h("div", { class: "conch-tool-label", text: "Code" }), h("pre", { class: "conch-code", tabindex: "0" }, h("code", { text: item.code })));
  parts.push(h("div", { class: "conch-tool-label", text: "What came back" }), toolOutput(item));
  return h(
    "li",
    { class: "conch-tool", "data-state": item.state, "data-tool": item.tool },
    h(
      "details",
      {},
      h("summary", { class: "conch-tool-summary" }, h("span", { class: "conch-tool-mark", "aria-hidden": "true" }), h("span", { text: item.summary })),
      h("div", { class: "conch-tool-body" }, ...parts),
    ),
    undoBar(/** @type {any} */ (item), undo),
  );
}
