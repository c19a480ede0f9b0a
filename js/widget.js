// @ts-check
/**
 * Conch's notebook view, bundled by esbuild into conch_jupyter/widget/static/widget.js (anywidget
 * loads it from a blob URL, so the wheel carries one self-contained module and no CDN is used).
 *
 * Python owns which chat (or which Settings section) a widget shows. Where the page was served by
 * the Jupyter server that runs Conch, the view then talks to that server itself (REST and the live
 * event stream, with the page's own Jupyter auth), so it stays live while the kernel is busy or
 * gone; elsewhere it falls back to relaying through the kernel.
 */

import { markCells } from "./cell-marker.js";
import { directChat, relayedChat } from "./chat-source.js";
import { chatView } from "./chat-view.js";
import { oneChat } from "./one-chat.js";
import { ServerApi, pageServer } from "./server.js";
import { settingsView } from "./settings.js";
import { directSettings, relayedSettings } from "./settings-source.js";

/**
 * The page's server, if it runs Conch and knows this chat (a server without Conch, or another
 * server than the kernel's, answers otherwise: then the kernel relays).
 * @param {string} probe a path under conch/api/ that must answer
 * @returns {Promise<ServerApi | null>}
 */
async function reachable(probe) {
  const server = pageServer();
  if (!server) return null;
  const api = new ServerApi(server);
  try {
    await api.request("GET", probe);
    return api;
  } catch {
    return null;
  }
}

/**
 * Keys typed in the view stay in the view: Lumino (JupyterLab's and Notebook 7's shortcuts) looks
 * for a binding from the key's target up to the page and stops at an element marked with this
 * attribute, as JupyterLab's own text boxes do (the shortcut editor's, for one). So Shift+Enter,
 * `a`, `b`, `y`, `m`, `dd`, `s` or Escape in the box never run, add, change or save a cell, and
 * Enter breaks the line in a multi-line box (`breakLine`).
 * @param {HTMLElement} el
 */
function keepKeys(el) {
  el.setAttribute("data-lm-suppress-shortcuts", "true");
  el.addEventListener("keydown", breakLine);
}

/**
 * Enter (and Shift+Enter) breaks the line in the view's multi-line boxes: Settings' persona,
 * instructions, environment and paste boxes, and Shift+Enter in the chat's box (whose own Enter
 * sends, handled before this). In a cell's output JupyterLab and Notebook 7 break no line for
 * Enter or Shift+Enter in a text box (the notebook keeps those keys for its own shortcuts), so
 * seven lines typed into a Settings box were saved as one ("A=1B=2…"): the view puts the line
 * break in itself.
 * Whatever handled the key already (the @ list, the chat's Enter) is left alone.
 * @param {KeyboardEvent} event
 */
function breakLine(event) {
  const box = event.target;
  if (!(box instanceof HTMLTextAreaElement) || box.readOnly || box.disabled) return;
  if (event.key !== "Enter" || event.ctrlKey || event.metaKey || event.altKey) return;
  if (event.isComposing || event.defaultPrevented) return;
  event.preventDefault();
  box.setRangeText("\n", box.selectionStart, box.selectionEnd, "end");
  box.dispatchEvent(new Event("input", { bubbles: true }));
}

/** The anywidget view: draws the chat or Settings into el, returns its cleanup. @type {import("@anywidget/types").Render} */
async function render({ model, el }) {
  keepKeys(el);
  if (model.get("view") === "settings") {
    const api = await reachable("agents");
    const source = api ? directSettings(api, model.get("section")) : relayedSettings(model);
    return settingsView(source, el);
  }
  const id = String(model.get("conversation_id") || "");
  // A page of no messages: enough to know the server has Conch and this chat, and small (the
  // stream brings the chat itself).
  const api = id ? await reachable(`conversations/${encodeURIComponent(id)}?limit=0`) : null;
  // One chat per page: drawn in full once; every other output of it is one line (one-chat.js).
  const connect = (/** @type {(text: string) => void} */ refused) => (api ? directChat(api, id, refused) : relayedChat(model));
  // Settings from the chat's header, drawn in place, where the page talks to the server itself.
  const openSettings = api ? (/** @type {HTMLElement} */ host) => settingsView(directSettings(api, "agents"), host) : undefined;
  const close = oneChat(id, el, () => chatView(model, el, connect, openSettings));
  // The cells agents wrote, marked in the notebook this output sits in (cell-marker.js).
  const unmark = api ? markCells(api, id, el) : () => {};
  return () => {
    unmark();
    close();
  };
}

export default { render };
