// @ts-check
/**
 * The chat view: its head, the log of items (keyed: an unchanged item keeps its element, a round
 * card is updated in place), the reply streaming now, the composer, a live region for screen
 * readers. What it draws comes from a source (chat-source.js): the chat's stream read here
 * (direct) or passed on raw by the kernel (relay), folded into items the same way for both.
 *
 * Agents that work in the notebook: the header's mode switch, the approval blocks and the
 * Interrupt again / Restart kernel block (an agent's code that Stop could not end) are drawn only
 * where the view talks to the server itself, because only the user's own Jupyter auth may change
 * the mode, say yes, or interrupt or restart the kernel (the kernel's key gets 403 for each).
 */

import { composer } from "./composer.js";
import { chatSpend } from "./cost-views.js";
import { h } from "./dom.js";
import { StreamingReply, drawItem } from "./items.js";
import { reconcile } from "./reconcile.js";
import { approvals, modeSwitch, stuckBlock } from "./tool-views.js";
import { windowed } from "./window.js";

/**
 * @typedef {import("./chat-source.js").Model} Model
 * @typedef {import("./chat-source.js").Source} Source
 */

const TRAITS = ["items", "live", "title", "problem", "notice", "round_running", "mentions", "tools", "budget"];

/**
 * "Nothing here yet. Write a message below: type @ to choose who answers (Researcher or Writer),
 * or just write and one of them answers."
 * @param {import("./mentions.js").Mention[]} mentions
 */
export function emptyWords(mentions) {
  const ours = mentions.filter((m) => !m.outside).map((m) => m.name);
  if (!ours.length) return "Nothing here yet. Add an agent in Settings (in this chat's header, or %conch agents), then write to it here.";
  const who = ours.length === 1 ? ours[0] : `${ours.slice(0, -1).join(", ")} or ${ours[ours.length - 1]}`;
  return `Nothing here yet. Write a message below: type @ to choose who answers (${who}), or just write and ${ours.length === 1 ? "it answers" : "one of them answers"}. Enter sends.`;
}

/**
 * The header's **Settings**: one click draws Settings (your agents, outside agents, pairings, the
 * month's budget) in place under the header, as `%conch agents` draws them in a cell; again,
 * and they close. Only where the view talks to the server itself (`open` given): through the
 * kernel, Settings are read-only and `%conch agents` shows them.
 * @param {((host: HTMLElement) => () => void) | undefined} open draws Settings into host, returns their cleanup
 */
function settingsPlace(open) {
  const host = h("div", { class: "conch-settings-place", hidden: true, role: "region", "aria-label": "Settings" });
  /** @type {(() => void) | null} */
  let close = null;
  const button = h("button", {
    type: "button",
    class: "conch-button conch-quiet conch-settings-open",
    text: "Settings",
    "aria-expanded": "false",
    onclick: () => {
      if (close) {
        close();
        close = null;
        host.hidden = true;
      } else if (open) {
        close = open(host);
        host.hidden = false;
      }
      button.setAttribute("aria-expanded", String(close !== null));
    },
  });
  button.hidden = !open;
  return { button, host, stop: () => close?.() };
}

/**
 * @param {Model} model @param {HTMLElement} el
 * @param {(refused: (text: string) => void) => Source} connect
 * @param {(host: HTMLElement) => () => void} [openSettings] Settings drawn in place (settingsPlace)
 */
export function chatView(model, el, connect, openSettings) {
  const title = h("span", { class: "conch-title" });
  const problem = h("div", { class: "conch-problem", role: "alert", hidden: true });
  const log = h("ol", { class: "conch-log", "aria-label": "Chat" });
  // An empty chat's first-use hint: who can answer, and how to ask them.
  const empty = h("p", { class: "conch-empty", hidden: true });
  const status = h("div", { class: "conch-sr-only", role: "status", "aria-live": "polite" });
  /** @type {Source} */
  let source;
  // What is drawn of a long chat: the span near where the person reads (window.js); the log
  // stays at its newest line unless the person has scrolled up to read.
  const win = windowed(log, {
    loadEarlier: () => (source.earlier ? source.earlier() : Promise.resolve(false)),
    redraw: () => schedule(),
  });
  const newest = h("button", { type: "button", class: "conch-button conch-quiet conch-newest", hidden: true }, "Newest messages ↓");
  newest.addEventListener("click", () => win.newest());
  // Sending goes to the newest messages, where the reply will be (the span drawn, window.js).
  const box = composer({ get: (name) => source.state.get(name) }, (text) => {
    win.newest();
    source.send(text);
  });
  source = connect((text) => box.restore(text));
  const state = source.state;
  /** @type {import("./tool-views.js").ToolActions} */
  const actions = {
    setMode: async (mode) => source.setMode?.(mode),
    answer: async (callId, run) => (source.answer ? source.answer(callId, run) : "Answer from JupyterLab or Notebook 7."),
    kernel: async (action) => (source.kernel ? source.kernel(action) : "Do this from JupyterLab or Notebook 7."),
    undo: async (callId) => (source.undo ? source.undo(callId) : "Undo from JupyterLab or Notebook 7."),
  };
  const modes = modeSwitch(actions);
  const spend = chatSpend(source.setLimit);
  const refocus = () => /** @type {HTMLElement | null} */ (box.el.querySelector(".conch-input"))?.focus();
  const ctx = {
    /** @param {string} words */
    announce: (words) => {
      if (words && status.textContent !== words) status.textContent = words;
    },
    stop: () => source.stop(),
    undo: actions.undo,
    // Continue a round stopped at its bound: only where the view talks to the server itself.
    continue_: source.continue_,
    refocus,
  };
  const asks = approvals(actions, ctx.announce, refocus);
  const settings = settingsPlace(openSettings);
  const stuckRun = stuckBlock(actions, ctx.announce, refocus);
  // Whole groups that wrap as groups (widget.css): the title, Settings, the mode and its
  // words, the spend and Limit; each control of them explains itself (hints.js).
  const head = h(
    "div",
    { class: "conch-head" },
    h("span", { class: "conch-head-title" }, h("span", { class: "conch-mark", "aria-hidden": "true" }), title),
    settings.button,
    modes.el,
    spend.el,
  );
  modes.explain(head);
  spend.explain(head);
  const root = h(
    "div",
    { class: "conch conch-chat", "data-source": source.via },
    head,
    settings.host,
    problem,
    empty,
    log,
    newest,
    asks.el,
    stuckRun.el,
    box.el,
    status,
  );
  el.append(root);

  /** @type {Map<string, import("./items.js").Drawn>} */
  const drawn = new Map();
  /** @type {Map<string, string>} */
  const sigs = new Map();
  const streaming = new StreamingReply();
  let queued = false;
  function draw() {
    queued = false;
    title.textContent = state.get("title") || "Conch";
    // A problem the kernel met (a Python `post` the server refused) shows here too.
    const words = state.get("problem") || model.get("problem") || "";
    problem.hidden = !words;
    problem.textContent = words;
    const plan = reconcile(sigs, win.pick(state.get("items") || []));
    for (const id of plan.remove) {
      drawn.get(id)?.stop?.();
      drawn.get(id)?.el.remove();
      drawn.delete(id);
      sigs.delete(id);
    }
    /** @type {HTMLElement[]} */
    const order = plan.steps.map((step) => {
      let entry = drawn.get(step.id);
      if (step.how === "update" && entry?.update) {
        entry.update(step.item);
      } else if (step.how !== "keep" || !entry) {
        entry?.stop?.();
        entry?.el.remove();
        entry = drawItem(step.item, ctx);
        drawn.set(step.id, entry);
      }
      sigs.set(step.id, step.sig);
      return entry.el;
    });
    const live = state.get("live");
    empty.hidden = order.length > 0 || Boolean(live);
    if (!empty.hidden) empty.textContent = emptyWords(state.get("mentions") || []);
    // The reply streaming now goes on (off the page) while the person reads far above it.
    if (live && win.follow) order.push(streaming.show(live));
    else if (live) streaming.show(live).remove();
    else streaming.clear();
    // Move only what is out of place: moving a node would restart its animations.
    order.forEach((node, i) => {
      if (log.children[i] !== node) log.insertBefore(node, log.children[i] || null);
    });
    modes.draw(state.get("tools"));
    spend.draw(state.get("budget"), state.get("tools")?.locked);
    asks.draw(state.get("tools"));
    stuckRun.draw(state.get("tools"));
    box.draw();
    win.placed();
    newest.hidden = win.follow;
    requestAnimationFrame(() => win.placed()); // the first draw may happen before the view is attached
  }

  function schedule() {
    if (!queued) {
      queued = true;
      queueMicrotask(draw);
    }
  }

  /** @param {any} message */
  function onMessage(message) {
    if (message?.type === "send.failed") box.restore(String(message.text || ""));
  }

  for (const name of TRAITS) state.on(`change:${name}`, schedule);
  model.on("change:problem", schedule);
  model.on("msg:custom", onMessage);
  draw();
  return () => {
    source.close();
    settings.stop();
    win.stop();
    for (const name of TRAITS) state.off(`change:${name}`, schedule);
    model.off("change:problem", schedule);
    model.off("msg:custom", onMessage);
    for (const entry of drawn.values()) entry.stop?.();
    root.remove();
  };
}
