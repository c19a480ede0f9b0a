// @ts-check
/**
 * Where the chat view's state comes from, and the one path from what the server said to what the
 * view draws: a ChatState fed the event stream's raw items (snapshot, message, event, delta,
 * round, working, stuck), folded into items by timeline.js, kept in a Store the view draws.
 *
 * Direct (directChat: the page was served by the Jupyter server that runs Conch): the view
 * follows the chat's event stream itself and sends and stops with the page's own Jupyter auth,
 * so it stays live while the kernel is busy, restarting or gone.
 * Relay (relayedChat: any other front end): the kernel follows the stream and passes its raw
 * items on — its `stream` trait holds the latest snapshot and every item since (a run of one
 * reply's chunks joined into one), and each chunk of a streaming reply comes as a custom
 * message {type: "item", item} — and the view feeds them into the same ChatState. Sends and
 * stops go to the kernel as custom messages; what a send did (`notice`) and a problem the kernel
 * met (`problem`) are the kernel's words, in its traits.
 *
 * The header's mode switch, the approvals and the stuck block (`tools`) are kept only where the
 * view talks to the server itself: only the user's own Jupyter auth may change the mode, say yes,
 * or interrupt or restart the kernel (the kernel's key gets 403 for each).
 * Pure: no DOM (tested with node --test, with a model made of a few lines).
 */

import { policyOf } from "./policy.js";
import { ConchError, ServerApi } from "./server.js";
import { Store } from "./store.js";
import { ChatState, buildItems, liveItem } from "./timeline.js";
import { stuckOf } from "./tools.js";
import { EARLIER_PAGE, VIEW_PAGE } from "./window.js";

/**
 * @typedef {import("./timeline.js").Item} Item
 * @typedef {import("@anywidget/types").AnyModel} Model
 * @typedef {{
 *   state: Store, via: "server" | "kernel",
 *   send(text: string): void, stop(): void, close(): void,
 *   earlier?: () => Promise<boolean>,
 *   setLimit?: import("./cost-views.js").SetLimit,
 *   continue_?: () => Promise<string>,
 * } & Partial<import("./tool-views.js").ToolActions>} Source
 * @typedef {{chat: ChatState, state: Store, take(item: Item): void, redraw(): void}} Fed
 */

/** The tool state the header and the approvals draw. @param {ChatState} chat @returns {import("./tool-views.js").ToolView} */
function toolView(chat) {
  const { mode, tainted, taintKind, switchable, stuck, locked } = chat.tools;
  return { mode, tainted, taintKind, switchable, approvals: chat.tools.approvals(), stuck, locked };
}

/**
 * A chat state fed raw stream items, and the Store the view draws from it: the same for both
 * sources. Many items arrive at once (one read of the stream, one trait sync): drawn once.
 * @param {{tools: boolean}} options whether the tool state is kept for the view to draw
 * @returns {Fed}
 */
export function fedChat({ tools }) {
  const chat = new ChatState();
  const state = new Store({ title: "", items: [], live: null, round_running: false, mentions: [], notice: "", problem: "", budget: null });
  let itemsChanged = false;
  let liveChanged = false;
  const flush = () => {
    if (itemsChanged) {
      state.update({
        items: buildItems(chat, { offerContinue: tools }),
        round_running: chat.round !== null,
        mentions: chat.names.mentions(),
        title: chat.title.split("/").pop() || "",
        budget: chat.budget,
        ...(tools ? { tools: toolView(chat) } : {}),
      });
    }
    if (itemsChanged || liveChanged) state.update({ live: liveItem(chat) });
    itemsChanged = liveChanged = false;
  };
  return {
    chat,
    state,
    take(item) {
      const changed = chat.take(item);
      if (!itemsChanged && !liveChanged && changed) queueMicrotask(flush);
      if (changed === "items") itemsChanged = true;
      if (changed === "live") liveChanged = true;
    },
    // Now, not later; and after a change made here (a mode, an answered approval).
    redraw() {
      itemsChanged = true;
      flush();
    },
  };
}

/**
 * @typedef {Fed & {stop: () => void, views: number}} Followed
 */

/**
 * The chats this page follows, one event stream each however many views show them: a browser
 * keeps at most six connections to a server open, and a notebook that shows its chat in five
 * cells must not use five of them (JupyterLab's own requests would wait behind them).
 * @type {Map<string, Followed>}
 */
const FOLLOWED = new Map();

/**
 * Who else hears a followed chat's items (the cell marks: cell-marker.js), by chat.
 * @type {Map<string, Set<(item: Item) => void>>}
 */
const LISTENERS = new Map();

/**
 * Hear the items of a chat this page follows from the server; returns the unsubscribe.
 * @param {ServerApi} api @param {string} conversationId @param {(item: Item) => void} listener
 */
export function onChatItem(api, conversationId, listener) {
  const key = `${api.base}${conversationId}`;
  const listeners = LISTENERS.get(key) || new Set();
  LISTENERS.set(key, listeners);
  listeners.add(listener);
  return () => {
    listeners.delete(listener);
    if (listeners.size === 0) LISTENERS.delete(key);
  };
}

/** @param {ServerApi} api @param {string} conversationId @returns {Followed} */
function followed(api, conversationId) {
  const key = `${api.base}${conversationId}`;
  const known = FOLLOWED.get(key);
  if (known) {
    known.views += 1;
    return known;
  }
  const fed = fedChat({ tools: true });
  // The modes the administrator turned off are drawn locked in the switch (policy.js).
  policyOf(api).then((locked) => {
    fed.chat.tools.locked = locked;
    fed.redraw();
  });
  const stop = api.follow(
    conversationId,
    {
      item(item) {
        if (item.type === "event" && item.event?.type === "round.ended") fed.state.update({ notice: "" });
        fed.take(item);
        for (const listener of LISTENERS.get(key) || []) listener(item);
      },
      problem(words) {
        fed.state.update({ problem: words });
      },
    },
    { limit: VIEW_PAGE },
  );
  const entry = { ...fed, stop, views: 1 };
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
  const { chat, state, redraw } = entry;
  const path = `conversations/${encodeURIComponent(conversationId)}`;
  /** @param {unknown} error */
  const say = (error) => state.update({ problem: error instanceof ConchError ? error.message : String(error) });
  let closed = false;
  /** @type {Promise<boolean> | null} */
  let loading = null;
  return {
    state,
    via: "server",
    // The page before the oldest message here, as the person scrolls up (window.js); one at a time.
    earlier() {
      if (loading) return loading;
      if (!chat.earlier || !chat.first) return Promise.resolve(false);
      const before = encodeURIComponent(chat.first);
      loading = api
        .request("GET", `${path}?limit=${EARLIER_PAGE}&before=${before}`)
        .then((page) => {
          entry.take({ type: "earlier", conversation: page });
          return true;
        })
        .catch((error) => {
          say(error);
          return false;
        })
        .finally(() => {
          loading = null;
        });
      return loading;
    },
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
    // Continue the last round, stopped at its bound: "" once it goes on, else the server's words.
    async continue_() {
      try {
        await api.request("POST", `${path}/round/continue`);
        state.update({ problem: "" });
        return "";
      } catch (error) {
        say(error);
        return error instanceof ConchError ? error.message : String(error);
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
    async setLimit(usd) {
      try {
        const answer = await api.request("PATCH", path, { limit_usd: usd });
        chat.spend(answer?.budget);
        redraw();
        return "";
      } catch (error) {
        return error instanceof ConchError ? error.message : String(error);
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
    async undo(callId) {
      // The user's Undo of an agent's write; the server sends the tool message again, undo off.
      try {
        await api.request("POST", `${path}/tools/${encodeURIComponent(callId)}/undo`);
        state.update({ problem: "" });
        return "";
      } catch (error) {
        return error instanceof ConchError ? error.message : String(error);
      }
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
 * A chat the kernel follows for the view (no Jupyter server behind this page): its raw items,
 * fed into the same state as a stream read here.
 * @param {Model} model @returns {Source}
 */
export function relayedChat(model) {
  const { chat, state, take, redraw } = fedChat({ tools: false });
  /** @type {Item[]} the earlier pages the kernel read for this view, kept across syncs */
  const earlierPages = [];
  /** @type {((came: boolean) => void) | null} */
  let waiting = null;
  // The trait begins with a snapshot, which replaces everything: taking it all again after each
  // sync loses nothing and doubles nothing (a chunk already taken from a message is in it); the
  // earlier pages this view loaded go in again after it.
  const replay = () => {
    for (const item of model.get("stream") || []) take(item);
    for (const page of earlierPages) take(page);
    redraw();
  };
  const notice = () => state.update({ notice: String(model.get("notice") || "") });
  /** @param {any} message */
  const chunk = (message) => {
    if (message?.type !== "item" || !message.item) return;
    if (message.item.type === "earlier") {
      earlierPages.push(message.item);
      take(message.item);
      waiting?.(true);
      waiting = null;
      return;
    }
    take(message.item);
  };
  model.on("change:stream", replay);
  model.on("change:notice", notice);
  model.on("msg:custom", chunk);
  replay();
  notice();
  // Ask the kernel for every chunk of a streaming reply: it sends them only to relayed views
  // (and syncs its trait again, with the chunks this view has not seen).
  model.send({ type: "relay" });
  return {
    state,
    via: "kernel",
    send: (text) => model.send({ type: "send", text }),
    stop: () => model.send({ type: "stop" }),
    // The page before the oldest message here, read by the kernel (window.js asks, scrolling up).
    earlier() {
      if (waiting || !chat.earlier || !chat.first) return Promise.resolve(false);
      model.send({ type: "earlier", before: chat.first, limit: EARLIER_PAGE });
      return new Promise((resolve) => {
        waiting = resolve;
        setTimeout(() => {
          if (waiting === resolve) {
            waiting = null;
            resolve(false);
          }
        }, 30_000);
      });
    },
    close() {
      model.off("change:stream", replay);
      model.off("change:notice", notice);
      model.off("msg:custom", chunk);
      waiting?.(false);
      waiting = null;
    },
  };
}
