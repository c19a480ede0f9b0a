// @ts-check
/**
 * The chat view: its head, the log of items (keyed: an unchanged item keeps its element, a round
 * card is updated in place), the reply streaming now, the composer, a live region for screen
 * readers; and where its state comes from.
 *
 * Direct (the page was served by the Jupyter server that runs Conch: JupyterLab, Notebook 7):
 * the view follows the chat's event stream and sends and stops with the page's own Jupyter auth,
 * so it stays live while the kernel is busy, restarting or gone. The kernel only said which chat.
 * Relay (any other front end): the kernel follows the chat and keeps traits the view draws, and
 * the view's sends and stops go to it as custom messages.
 *
 * Agents that work in the notebook: the header's mode switch, the approval blocks and the
 * Interrupt again / Restart kernel block (an agent's code that Stop could not end) are drawn only
 * where the view talks to the server itself, because only the user's own Jupyter auth may change
 * the mode, say yes, or interrupt or restart the kernel (the kernel's key gets 403 for each).
 */

import { composer } from "./composer.js";
import { h } from "./dom.js";
import { StreamingReply, drawItem } from "./items.js";
import { reconcile } from "./reconcile.js";
import { ConchError, ServerApi } from "./server.js";
import { Store } from "./store.js";
import { ChatState, buildItems, liveItem } from "./timeline.js";
import { approvals, modeSwitch, stuckBlock } from "./tool-views.js";
import { stuckOf } from "./tools.js";

/**
 * @typedef {import("./store.js").Store} StateLike
 * @typedef {import("@anywidget/types").AnyModel} Model the widget's model, as anywidget gives it
 * @typedef {{
 *   state: {get(name: string): any, on(e: string, cb: () => void): void, off(e: string, cb: () => void): void},
 *   send(text: string): void, stop(): void, close(): void,
 * } & Partial<import("./tool-views.js").ToolActions>} Source
 */

const TRAITS = ["items", "live", "title", "problem", "notice", "round_running", "mentions", "tools"];

/** The tool state the header and the approvals draw. @param {ChatState} chat @returns {import("./tool-views.js").ToolView} */
function toolView(chat) {
  const { mode, tainted, switchable, stuck } = chat.tools;
  return { mode, tainted, switchable, approvals: chat.tools.approvals(), stuck };
}

/**
 * @typedef {{chat: ChatState, state: Store, stop: () => void, redraw: () => void, views: number}} Followed
 */

/**
 * The chats this page follows, one event stream each however many views show them: a browser
 * keeps at most six connections to a server open, and a notebook that shows its chat in five
 * cells must not use five of them (JupyterLab's own requests would wait behind them).
 * @type {Map<string, Followed>}
 */
const FOLLOWED = new Map();

/** @param {ServerApi} api @param {string} conversationId @returns {Followed} */
function followed(api, conversationId) {
  const key = `${api.base}${conversationId}`;
  const known = FOLLOWED.get(key);
  if (known) {
    known.views += 1;
    return known;
  }
  const chat = new ChatState();
  const state = new Store({ title: "", items: [], live: null, round_running: false, mentions: [], notice: "", problem: "" });
  let itemsChanged = false;
  let liveChanged = false;
  // Many stream items arrive in one read: draw once for all of them.
  const flush = () => {
    if (itemsChanged) {
      state.update({
        items: buildItems(chat),
        round_running: chat.round !== null,
        mentions: chat.names.mentions(),
        title: chat.title.split("/").pop() || "",
        tools: toolView(chat),
      });
    }
    if (itemsChanged || liveChanged) state.update({ live: liveItem(chat) });
    itemsChanged = liveChanged = false;
  };
  const stop = api.follow(conversationId, {
    item(item) {
      const changed = chat.take(item);
      if (item.type === "event" && item.event?.type === "round.ended") state.update({ notice: "" });
      if (!itemsChanged && !liveChanged && changed) queueMicrotask(flush);
      if (changed === "items") itemsChanged = true;
      if (changed === "live") liveChanged = true;
    },
    problem(words) {
      state.update({ problem: words });
    },
  });
  // After a change made here (a mode, an answered approval) rather than by the stream.
  const redraw = () => {
    itemsChanged = true;
    flush();
  };
  const entry = { chat, state, stop, redraw, views: 1 };
  FOLLOWED.set(key, entry);
  return entry;
}

/**
 * A chat followed straight from the server.
 * @param {ServerApi} api @param {string} conversationId @param {(text: string) => void} refused
 * @returns {Source}
 */
export function directChat(api, conversationId, refused) {
  const entry = followed(api, conversationId);
  const { chat, state } = entry;
  const path = `conversations/${encodeURIComponent(conversationId)}`;
  /** @param {unknown} error */
  const say = (error) => state.update({ problem: error instanceof ConchError ? error.message : String(error) });
  const { redraw } = entry;
  let closed = false;
  return {
    state,
    async send(text) {
      const speaker = chat.round?.speaker;
      try {
        await api.request("POST", `${path}/messages`, { text });
      } catch (error) {
        say(error);
        refused(text);
        return;
      }
      const who = speaker ? chat.names.name(String(speaker)) : "";
      state.update({ problem: "", notice: who ? `Your message ends the round once ${who}'s reply is in.` : "" });
    },
    async stop() {
      try {
        const answer = await api.request("POST", `${path}/round/stop`);
        state.update({ notice: answer?.stopped ? "" : "No round is running." });
      } catch (error) {
        say(error);
      }
    },
    close() {
      if (closed) return;
      closed = true;
      entry.views -= 1;
      if (entry.views === 0) {
        entry.stop();
        FOLLOWED.delete(`${api.base}${conversationId}`);
      }
    },
    async setMode(mode) {
      try {
        const answer = await api.request("PATCH", path, { mode });
        chat.tools.mode = answer?.mode || mode;
        state.update({ problem: "" });
        redraw();
      } catch (error) {
        say(error);
      }
    },
    async answer(callId, run) {
      try {
        await api.request("POST", `${path}/tools/${encodeURIComponent(callId)}`, { run });
      } catch (error) {
        if (!(error instanceof ConchError && error.status === 409)) {
          return error instanceof ConchError ? error.message : String(error);
        }
        // Answered on another page, skipped by a message or Stop, or ended: said, not thrown.
        state.update({ problem: `${error.message} (It was answered elsewhere, skipped, or its round ended.)` });
      }
      chat.tools.asking.delete(callId);
      redraw();
      return "";
    },
    async kernel(action) {
      try {
        const answer = await api.request("POST", `${path}/kernel/${action}`);
        chat.tools.stuck = stuckOf(answer?.stuck);
        state.update({ problem: "" });
      } catch (error) {
        if (!(error instanceof ConchError && error.status === 409)) {
          return error instanceof ConchError ? error.message : String(error);
        }
        // Nothing is stuck any more (it ended, or another page acted first): said, not thrown.
        chat.tools.stuck = null;
        state.update({ problem: error.message });
      }
      redraw();
      return "";
    },
  };
}

/**
 * A chat the kernel follows for the view (no Jupyter server behind this page).
 * @param {Model} model @returns {Source}
 */
export function relayedChat(model) {
  // Ask the kernel for every chunk of a streaming reply: it sends them only to relayed views.
  model.send({ type: "relay" });
  return {
    state: model,
    send: (text) => model.send({ type: "send", text }),
    stop: () => model.send({ type: "stop" }),
    close: () => {},
  };
}

/**
 * @param {Model} model @param {HTMLElement} el
 * @param {(refused: (text: string) => void) => Source} connect
 */
export function chatView(model, el, connect) {
  const title = h("span", { class: "conch-title" });
  const problem = h("div", { class: "conch-problem", role: "alert", hidden: true });
  const log = h("ol", { class: "conch-log", "aria-label": "Chat" });
  const status = h("div", { class: "conch-sr-only", role: "status", "aria-live": "polite" });
  /** @type {Source} */
  let source;
  const box = composer({ get: (name) => source.state.get(name) }, (text) => source.send(text));
  source = connect((text) => box.restore(text));
  const state = source.state;
  /** @type {import("./tool-views.js").ToolActions} */
  const actions = {
    setMode: async (mode) => source.setMode?.(mode),
    answer: async (callId, run) => (source.answer ? source.answer(callId, run) : "Answer from JupyterLab or Notebook 7."),
    kernel: async (action) => (source.kernel ? source.kernel(action) : "Do this from JupyterLab or Notebook 7."),
  };
  const modes = modeSwitch(actions);
  const ctx = {
    /** @param {string} words */
    announce: (words) => {
      if (words && status.textContent !== words) status.textContent = words;
    },
    stop: () => source.stop(),
  };
  const refocus = () => /** @type {HTMLElement | null} */ (box.el.querySelector(".conch-input"))?.focus();
  const asks = approvals(actions, ctx.announce, refocus);
  const stuckRun = stuckBlock(actions, ctx.announce, refocus);
  const root = h(
    "div",
    { class: "conch conch-chat", "data-source": state === model ? "kernel" : "server" },
    h("div", { class: "conch-head" }, h("span", { class: "conch-mark", "aria-hidden": "true" }), title, modes.el),
    problem,
    log,
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
  // The log stays at its newest line unless the person has scrolled up to read.
  let stuck = true;
  log.addEventListener("scroll", () => {
    stuck = log.scrollHeight - log.scrollTop - log.clientHeight < 48;
  });
  const toBottom = () => {
    if (stuck) log.scrollTop = log.scrollHeight;
  };

  function draw() {
    queued = false;
    title.textContent = state.get("title") || "Conch";
    // A problem the kernel met (a Python `post` the server refused) shows here too.
    const words = state.get("problem") || (state === model ? "" : model.get("problem")) || "";
    problem.hidden = !words;
    problem.textContent = words;
    const plan = reconcile(sigs, state.get("items") || []);
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
    if (live) order.push(streaming.show(live));
    else streaming.clear();
    // Move only what is out of place: moving a node would restart its animations.
    order.forEach((node, i) => {
      if (log.children[i] !== node) log.insertBefore(node, log.children[i] || null);
    });
    modes.draw(state.get("tools"));
    asks.draw(state.get("tools"));
    stuckRun.draw(state.get("tools"));
    box.draw();
    toBottom();
    requestAnimationFrame(toBottom); // the first draw may happen before the view is attached
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
  if (state !== model) model.on("change:problem", schedule);
  model.on("msg:custom", onMessage);
  draw();
  return () => {
    source.close();
    for (const name of TRAITS) state.off(`change:${name}`, schedule);
    model.off("change:problem", schedule);
    model.off("msg:custom", onMessage);
    for (const entry of drawn.values()) entry.stop?.();
    root.remove();
  };
}
