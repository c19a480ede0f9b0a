// @ts-check
/**
 * The chat's items as elements: your messages, agents' replies under their dividers, an outside
 * agent's answer in its own quieter frame, handover lines and Conch's notes, a tool call's folded
 * block (tool-views.js); and the reply that is still streaming, its Markdown drawn as it grows
 * (stream-md.js: nodes, never HTML; the server's sealed HTML once it settles).
 */

import { continueLine } from "./continue-view.js";
import { disc, h, reducedMotion } from "./dom.js";
import { paragraphPieces, textChange } from "./reconcile.js";
import { roundCard } from "./round-card.js";
import { drawParagraph } from "./stream-md.js";
import { toolBlock } from "./tool-views.js";

/**
 * @typedef {{kind: string, id: string, [key: string]: any}} Item
 * @typedef {{announce(words: string): void, stop(): void, undo?: (callId: string) => Promise<string>} & import("./continue-view.js").Context} Context
 * @typedef {{el: HTMLElement, update?: (item: any) => void, stop?: () => void}} Drawn
 */

/**
 * A message's body: sealed HTML once settled; while it streams, its Markdown drawn as nodes
 * (StreamingReply).
 * @param {Item} item
 */
function body(item) {
  if (item.streaming) return h("div", { class: "conch-md conch-streaming-text", text: item.text || "" });
  return h("div", { class: "conch-md", html: item.html });
}

/** @param {Item} item @returns {HTMLElement} */
export function messageItem(item) {
  if (item.kind === "user") {
    return h(
      "li",
      { class: "conch-msg conch-user" },
      h(
        "div",
        { class: "conch-divider" },
        h("span", { class: "conch-who", text: item.who }),
        // Sent with the kernel key: %conch, the Python API, or code an agent ran there.
        item.via === "kernel" ? h("span", { class: "conch-kernel-mark", text: "sent from the notebook's kernel" }) : null,
      ),
      body(item),
    );
  }
  if (item.kind === "outside") {
    return h(
      "li",
      { class: "conch-msg conch-outside" + (item.streaming ? " is-streaming" : "") },
      h(
        "div",
        { class: "conch-outside-head" },
        h("span", { class: "conch-outside-mark", text: "Outside agent" }),
        h("span", { class: "conch-who", text: item.name }),
        h("span", { class: "conch-outside-words", text: "someone else's words" }),
      ),
      body(item),
    );
  }
  return h(
    "li",
    { class: "conch-msg conch-agent" + (item.streaming ? " is-streaming" : "") },
    h(
      "div",
      { class: "conch-divider" },
      disc(item.name, (item.name || "?").slice(0, 1).toUpperCase()),
      h("span", { class: "conch-who", text: item.name }),
      item.place && h("span", { class: "conch-place", text: item.place }),
      item.streaming && h("span", { class: "conch-typing", text: item.doing || "answering…" }),
    ),
    body(item),
    // A metered reply's tokens and cost, quietly under it.
    item.cost && h("div", { class: "conch-cost", text: item.cost }),
  );
}

/**
 * A folded block that, opened, is brought into view: its code and output are not left hidden
 * below the log's scroll area (the log, and the page if need be, scroll as little as they can).
 * @param {HTMLElement} el @returns {HTMLElement}
 */
function shownWhenOpened(el) {
  const details = el.querySelector("details");
  details?.addEventListener("toggle", () => {
    if (details.open) requestAnimationFrame(() => el.scrollIntoView({ block: "nearest", behavior: reducedMotion() ? "auto" : "smooth" }));
  });
  return el;
}

/** @param {Item} item @param {Context} ctx @returns {Drawn} */
export function drawItem(item, ctx) {
  if (item.kind === "round") return roundCard(/** @type {any} */ (item), ctx);
  if (item.kind === "continue") return continueLine(/** @type {any} */ (item), ctx);
  if (item.kind === "tool") return { el: shownWhenOpened(toolBlock(item, ctx.undo)) };
  if (item.kind === "handover") {
    return { el: h("li", { class: "conch-handover" }, h("span", { text: item.text })) };
  }
  if (item.kind === "note") {
    return {
      el: h(
        "li",
        { class: "conch-note", role: "note" },
        h("span", { class: "conch-note-label", text: "Conch" }),
        h("span", { class: "conch-note-text", text: item.text }),
      ),
    };
  }
  return { el: messageItem(item) };
}

/**
 * The reply streaming now: drawn once, then each new chunk appended as text, a paragraph to a
 * block, so a long reply costs what its length does, not its square (issue 10): only the
 * paragraph that grows is laid out again.
 */
export class StreamingReply {
  constructor() {
    /** @type {HTMLElement | null} */
    this.el = null;
    this.key = "";
    this.shown = "";
    /** @type {HTMLElement | null} */
    this.text = null;
    /** @type {HTMLElement | null} */
    this.block = null;
    this.para = ""; // the growing paragraph's text
  }

  /** @param {Item} item @returns {HTMLElement} */
  show(item) {
    const text = String(item.text || "");
    const key = JSON.stringify([item.id, item.kind, item.name, item.place]);
    if (!this.el || key !== this.key) {
      const el = messageItem({ ...item, text: "" });
      this.el?.replaceWith(el);
      this.el = el;
      this.key = key;
      this.text = el.querySelector(".conch-streaming-text");
      this.block = null;
      this.shown = "";
    }
    // What the agent does with a tool now ("running code") changes in place.
    const typing = this.el.querySelector(".conch-typing");
    if (typing && typing.textContent !== (item.doing || "answering…")) typing.textContent = item.doing || "answering…";
    const change = textChange(this.shown, text);
    if ("replace" in change) {
      this.text?.replaceChildren();
      this.block = null;
      this.shown = "";
    }
    this.write("append" in change ? change.append : change.replace);
    return this.el;
  }

  /** @param {string} added */
  write(added) {
    for (const piece of paragraphPieces(this.shown, added)) {
      if (piece.fresh || !this.block) {
        this.block = h("div", { class: "conch-streaming-para" });
        this.para = "";
        this.text?.append(this.block);
      }
      // The growing paragraph's Markdown drawn again, as nodes (stream-md.js: sealed).
      this.para += piece.text;
      this.shown += piece.text;
    }
    if (this.block && added) drawParagraph(this.block, this.para);
  }

  clear() {
    this.el?.remove();
    this.el = null;
    this.key = this.shown = this.para = "";
    this.text = this.block = null;
  }
}
