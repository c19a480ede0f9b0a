// Conch's agents in Jupyter Chat's @ list, and Conch's commands in its / list: a JupyterLab
// extension of one plugin, which adds a command provider to @jupyter/chat's IChatCommandRegistry
// (as jupyterlab-chat offers its own mentions). A `/` at the start of an empty message offers
// `/stop`, `/continue`, `/allow` and `/deny` (what conch_jupyter/chat_rooms/words.py's command_in reads), each
// with what it does. It also keeps each chat panel following its newest messages while the
// person reads at the end (`follow`: jupyter-chat 0.25's own following lets go under a growing
// reply, and a chat being read is left with unread marks). jupyterlab-chat 0.25's own list skips bot users (jupyter-chat #466), and Conch's
// agents are bot users of every chat (conch_jupyter/chat_rooms/): this offers them by name, as
// Conch's `GET conch/api/roster` names them now (an agent added, renamed or removed is offered
// so at once; an outside agent whose name clashes with one of yours is held back, as the
// notebook view's @ picker holds it back).
//
// It is built by esbuild alone (no @jupyterlab/builder): this file is the extension's whole
// remote entry. JupyterLab loads it, calls `init` with the page's shared modules, then `get`;
// the plugin needs @jupyter/chat's very token, so it takes @jupyter/chat from those shared
// modules (jupyterlab-chat shares it as a singleton) rather than bundling a copy of its own.
// Where jupyterlab-chat is not installed, the extension holds no plugin and does nothing.

/** The chat command provider's id. */
export const PROVIDER_ID = "conch:agents";
/** How long a roster read from the server is used again (ms): one read while a name is typed. */
export const ROSTER_MS = 2000;
const NAME = "conch-jupyter";

/** @typedef {{name: string, providerId: string, description?: string, spaceOnAccept?: boolean}} ChatCommand */
/** @typedef {{currentWord?: string | null, value?: string}} InputModel */
/** @typedef {{get: () => unknown, loaded?: unknown}} SharedEntry */
/** @typedef {Record<string, Record<string, SharedEntry>>} ShareScope */
/** @typedef {{agents?: {name: string}[], outside?: {name: string, clashes_with?: string | null}[]}} Roster */

/**
 * The names the list offers: your agents, and outside agents whose names clash with none of
 * yours.
 * @param {Roster} roster
 * @returns {string[]}
 */
export function rosterNames(roster) {
  const ours = (roster.agents ?? []).map((a) => a.name);
  const outside = (roster.outside ?? []).filter((o) => !o.clashes_with).map((o) => o.name);
  return [...ours, ...outside];
}

/**
 * The mention completions for the word being typed: the names that start with what follows
 * the at sign, in order.
 * @param {string | null | undefined} currentWord
 * @param {string[]} names
 * @returns {ChatCommand[]}
 */
export function agentCompletions(currentWord, names) {
  const typed = /^@([^@\s]*)$/.exec(currentWord ?? "");
  if (typed === null) return [];
  const start = typed[1].toLowerCase();
  const offered = names.filter((name) => name.toLowerCase().startsWith(start));
  return [...new Set(offered)].sort().map((name) => ({
    name: `@${name}`,
    providerId: PROVIDER_ID,
    description: "Conch's agent",
    spaceOnAccept: true,
  }));
}

/** Conch's commands in a chat, with what each does (a command is a whole message). */
export const COMMANDS = [
  { name: "/stop", description: "Conch: stop the running round at once" },
  { name: "/continue", description: "Conch: continue the round stopped at its bound, with fresh bounds" },
  { name: "/allow", description: "Conch: yes to the question waiting (its id, if several wait)" },
  { name: "/deny", description: "Conch: no to the question waiting (its id, if several wait)" },
];

/**
 * The command completions for what is typed: Conch's commands that start with it (and are not
 * it), when it is a `/` word and the whole message so far (a command is a message on its own).
 * @param {string | null | undefined} currentWord
 * @param {string | null | undefined} [value] the whole input, when the chat gives it
 * @returns {ChatCommand[]}
 */
export function commandCompletions(currentWord, value) {
  const typed = /^\/([a-z]*)$/i.exec(currentWord ?? "");
  if (typed === null) return [];
  if (typeof value === "string" && value.trim() !== currentWord) return [];
  const start = `/${typed[1].toLowerCase()}`;
  // A command typed whole is offered no more: Enter then sends it, rather than taking the list.
  return COMMANDS.filter((c) => c.name.startsWith(start) && c.name !== start).map((c) => ({
    name: c.name,
    providerId: PROVIDER_ID,
    description: c.description,
    spaceOnAccept: c.name !== "/stop" && c.name !== "/continue",
  }));
}

/**
 * What the chat's lists offer for the word being typed: agents after `@`, commands after `/`.
 * @param {InputModel} input
 * @param {() => Promise<string[]>} names
 * @returns {Promise<ChatCommand[]>}
 */
export async function completionsFor(input, names) {
  const word = input.currentWord ?? "";
  if (word.startsWith("/")) return commandCompletions(word, input.value);
  return word.startsWith("@") ? agentCompletions(word, await names()) : [];
}

/** How near the end (px) a chat panel counts as at its end: jupyter-chat's own measure. */
export const AT_END_PX = 40;

/**
 * Whether a chat panel goes on following its newest messages after a scroll: at the end it
 * follows; a person scrolling up stops it; anything else (the content growing under a reply as
 * it streams, a rename redrawing the panel) leaves it as it was.
 * @param {boolean} following @param {number} lastTop where the panel was scrolled to before
 * @param {{top: number, height: number, client: number}} now
 */
export function stillFollowing(following, lastTop, now) {
  if (now.height - now.top - now.client < AT_END_PX) return true;
  if (now.top < lastTop - 1) return false;
  return following;
}

/**
 * Keep one chat panel at its newest message while it follows. jupyter-chat 0.25 decides at each
 * scroll event whether it is at the end; a reply that grows between its own scroll and that
 * event (a streaming reply, a chat renamed and redrawn) makes it stop following, and the
 * messages that then come below the fold stay unread (the tab's mark) on a chat being read.
 * @param {HTMLElement} scroller @param {HTMLElement} box the messages inside it
 */
function follow(scroller, box) {
  let following = true;
  let lastTop = scroller.scrollTop;
  scroller.addEventListener("scroll", () => {
    const now = { top: scroller.scrollTop, height: scroller.scrollHeight, client: scroller.clientHeight };
    following = stillFollowing(following, lastTop, now);
    lastTop = scroller.scrollTop;
  });
  new ResizeObserver(() => {
    if (following && scroller.scrollHeight - scroller.scrollTop - scroller.clientHeight >= 1) {
      scroller.scrollTop = scroller.scrollHeight;
      lastTop = scroller.scrollTop;
    }
  }).observe(box);
}

/** @type {WeakSet<Element>} */
const followed = new WeakSet();

/**
 * Every chat panel on the page follows its newest messages (those drawn later too: a panel's
 * messages are drawn by React after its widget is added, so the page is looked over again,
 * once a frame at most, as it changes).
 * @param {HTMLElement} root
 */
function followChats(root) {
  let pending = false;
  const scan = () => {
    pending = false;
    for (const box of root.querySelectorAll(".jp-chat-messages-container")) {
      const scroller = box.parentElement;
      if (scroller === null || followed.has(box)) continue;
      followed.add(box);
      follow(scroller, /** @type {HTMLElement} */ (box));
    }
  };
  new MutationObserver(() => {
    if (!pending) {
      pending = true;
      requestAnimationFrame(scan);
    }
  }).observe(root, { childList: true, subtree: true });
  scan();
}

/**
 * Which shared copy of a module the page uses: the highest version (webpack's singleton rule),
 * the one already loaded among equals.
 * @param {Record<string, SharedEntry>} versions
 * @returns {SharedEntry | undefined}
 */
export function chosenVersion(versions) {
  /** @param {string} v */
  const parts = (v) => v.split(/[.+-]/).map((p) => Number.parseInt(p, 10) || 0);
  /** @param {[string, SharedEntry]} a @param {[string, SharedEntry]} b */
  const order = (a, b) => {
    const [x, y] = [parts(a[0]), parts(b[0])];
    for (let i = 0; i < Math.max(x.length, y.length); i += 1) {
      if ((x[i] ?? 0) !== (y[i] ?? 0)) return (x[i] ?? 0) - (y[i] ?? 0);
    }
    return Number(Boolean(a[1].loaded)) - Number(Boolean(b[1].loaded));
  };
  return Object.entries(versions).sort(order).at(-1)?.[1];
}

/** @type {ShareScope} */
let shared = {};

/**
 * @param {string} name
 * @returns {Promise<Record<string, unknown> | null>}
 */
async function sharedModule(name) {
  const entry = chosenVersion(shared[name] ?? {});
  if (entry === undefined) return null;
  const factory = /** @type {() => Record<string, unknown>} */ (await entry.get());
  return factory();
}

/** @type {{at: number, names: Promise<string[]>} | null} */
let known = null;

/**
 * Who can be named now, from Conch's API on this page's server (read again after ROSTER_MS).
 * @returns {Promise<string[]>}
 */
function namesNow() {
  const now = Date.now();
  if (known === null || now - known.at > ROSTER_MS) {
    const element = document.getElementById("jupyter-config-data");
    const config = JSON.parse(element?.textContent || "{}");
    /** @type {Record<string, string>} */
    const headers = config.token ? { Authorization: `token ${config.token}` } : {};
    const names = fetch(`${config.baseUrl || "/"}conch/api/roster`, { headers })
      .then((answer) => (answer.ok ? answer.json() : {}))
      .then((roster) => rosterNames(roster))
      .catch(() => []);
    known = { at: now, names };
  }
  return known.names;
}

/**
 * The plugin, given @jupyter/chat as the page has it.

 * @param {Record<string, unknown>} chat
 */
function agentsPlugin(chat) {
  return {
    id: `${NAME}:agents-in-chat`,
    description: "Offers Conch's agents in Jupyter Chat's @ list and Conch's commands in its / list.",
    autoStart: true,
    requires: [chat.IChatCommandRegistry],
    /**
     * @param {unknown} _app
     * @param {{addProvider: (provider: object) => void}} registry
     */
    activate: (_app, registry) => {
      followChats(document.body);
      registry.addProvider({
        id: PROVIDER_ID,
        /** @param {InputModel} input */
        listCommandCompletions: (input) => completionsFor(input, namesNow),
        onSubmit: async () => {},
      });
    },
  };
}

const page = /** @type {{_JUPYTERLAB?: Record<string, object>}} */ (globalThis);
if (typeof window !== "undefined") {
  page._JUPYTERLAB = page._JUPYTERLAB ?? {};
  page._JUPYTERLAB[NAME] = {
    /** @param {ShareScope | undefined} scope */
    init: (scope) => {
      shared = scope ?? {};
    },
    /** @param {string} module */
    get: async (module) => {
      const chat = module === "./extension" ? await sharedModule("@jupyter/chat") : null;
      const plugins = chat?.IChatCommandRegistry ? [agentsPlugin(chat)] : [];
      return () => ({ __esModule: true, default: plugins });
    },
  };
}
