// @ts-check
/**
 * The Jupyter server that served this page, reached the way JupyterLab's own services reach it:
 * the base URL (and a token, if the page has one) from the page's config, the `_xsrf` cookie
 * sent back as `X-XSRFToken`. Conch's REST API and live event stream live under
 * {base_url}conch/api/. Every failure comes back in words (ConchError), never as a stack.
 */

import { EventReader } from "./sse.js";

/** @typedef {{baseUrl: string, token: string}} PageServer */

/**
 * The page's server, or null where the page was not served by a Jupyter server (then the view
 * relays through the kernel).
 * @param {Document} [doc] @returns {PageServer | null}
 */
export function pageServer(doc = document) {
  const el = doc.getElementById("jupyter-config-data");
  if (!el) return null;
  try {
    const config = JSON.parse(el.textContent || "{}");
    const base = typeof config.baseUrl === "string" ? config.baseUrl : "";
    if (!base.startsWith("/")) return null;
    return { baseUrl: base.endsWith("/") ? base : `${base}/`, token: String(config.token || "") };
  } catch {
    return null;
  }
}

/** A cookie's value, as JupyterLab reads `_xsrf`. @param {string} cookies @param {string} name */
export function cookie(cookies, name) {
  const found = cookies
    .split(";")
    .map((c) => c.trim())
    .find((c) => c.startsWith(`${name}=`));
  return found ? decodeURIComponent(found.slice(name.length + 1)) : "";
}

export class ConchError extends Error {
  /** @param {string} message words for the person @param {number} status @param {string} code */
  constructor(message, status = 0, code = "") {
    super(message);
    this.status = status;
    this.code = code;
  }
}

/** The words of an answer that was not ok. @param {Response} answer */
async function failure(answer) {
  try {
    const body = await answer.json();
    if (body?.error?.message) return new ConchError(String(body.error.message), answer.status, String(body.error.code || ""));
  } catch {
    // not JSON: a proxy's page, or a server without Conch
  }
  if (answer.status === 403) return new ConchError("The Jupyter server refused this page (signed out?). Reload the page.", 403, "forbidden");
  return new ConchError(`The Jupyter server answered ${answer.status} ${answer.statusText}`.trim() + ".", answer.status, "http");
}

const UNREACHABLE = "The Jupyter server cannot be reached.";

export class ServerApi {
  /** @param {PageServer} server */
  constructor(server) {
    this.base = `${server.baseUrl}conch/api/`;
    this.token = server.token;
  }

  /** @param {boolean} json */
  headers(json) {
    /** @type {Record<string, string>} */
    const headers = { Accept: "application/json" };
    if (json) headers["Content-Type"] = "application/json";
    const xsrf = cookie(document.cookie, "_xsrf");
    if (xsrf) headers["X-XSRFToken"] = xsrf;
    if (this.token) headers.Authorization = `token ${this.token}`;
    return headers;
  }

  /**
   * One call: its JSON answer (null for 204), or a ConchError in words.
   * @param {string} method @param {string} path under conch/api/ @param {any} [body]
   */
  async request(method, path, body) {
    let answer;
    try {
      answer = await fetch(this.base + path, {
        method,
        credentials: "same-origin",
        cache: "no-store",
        headers: this.headers(body !== undefined),
        body: body === undefined ? undefined : JSON.stringify(body),
      });
    } catch {
      throw new ConchError(UNREACHABLE);
    }
    if (!answer.ok) throw await failure(answer);
    if (answer.status === 204) return null;
    try {
      return await answer.json();
    } catch {
      throw new ConchError("The Jupyter server's answer was not Conch's (not JSON).", answer.status, "not_json");
    }
  }

  /**
   * Follow a chat's live stream: a snapshot first (with `limit`, of the chat's last messages),
   * then everything as it happens. A stream that drops is followed again from the last event it
   * delivered (Last-Event-ID): the server sends what it missed and the chat's live parts
   * (`resumed`), not the chat again, so nothing is lost or doubled. Returns a function that
   * stops following.
   * @param {string} conversationId
   * @param {{item(item: any): void, problem(words: string): void}} to
   * @param {{limit?: number}} [options]
   */
  follow(conversationId, to, { limit } = {}) {
    let stopped = false;
    /** @type {AbortController | null} */
    let controller = null;
    const query = limit === undefined ? "" : `?limit=${limit}`;
    const url = `${this.base}conversations/${encodeURIComponent(conversationId)}/events${query}`;
    let place = "";
    const run = async () => {
      let delay = 250;
      while (!stopped) {
        controller = new AbortController();
        let words = "";
        try {
          /** @type {Record<string, string>} */
          const headers = this.headers(false);
          if (place) headers["Last-Event-ID"] = place;
          const answer = await fetch(url, {
            credentials: "same-origin",
            cache: "no-store",
            headers,
            signal: controller.signal,
          });
          if (!answer.ok) {
            const error = await failure(answer);
            if (error.status === 404) return to.problem("This chat is no longer on the server.");
            if (error.status >= 400 && error.status < 500 && error.status !== 429) return to.problem(error.message);
            throw error;
          }
          if (!answer.body) throw new ConchError("This browser cannot read a live stream.");
          const reader = answer.body.pipeThrough(new TextDecoderStream()).getReader();
          const events = new EventReader();
          for (;;) {
            const { value, done } = await reader.read();
            if (done) break;
            for (const event of events.push(value)) {
              const item = JSON.parse(event.data);
              place = events.id || place;
              if (item.type === "snapshot" || item.type === "resumed") {
                delay = 250;
                to.problem("");
              }
              to.item(item);
            }
          }
          // The server ended the stream (it is stopping, or this follower fell behind).
        } catch (error) {
          if (stopped) return;
          words = error instanceof ConchError ? error.message : UNREACHABLE;
        }
        if (stopped) return;
        if (words) to.problem(`${words} Trying again…`);
        await new Promise((resolve) => setTimeout(resolve, delay));
        delay = Math.min(delay * 2, 10_000);
      }
    };
    run();
    return () => {
      stopped = true;
      controller?.abort();
    };
  }
}
