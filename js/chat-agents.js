// Conch's agents in Jupyter Chat's @ list: a JupyterLab extension of one plugin, which adds a
// command provider to @jupyter/chat's IChatCommandRegistry (as jupyterlab-chat offers its own
// mentions). jupyterlab-chat 0.25's own list skips bot users (jupyter-chat #466), and Conch's
// agents are bot users of every chat (conch_jupyter/chat_rooms/): this offers them by name.
//
// It is built by esbuild alone (no @jupyterlab/builder): this file is the extension's whole
// remote entry. JupyterLab loads it, calls `init` with the page's shared modules, then `get`;
// the plugin needs @jupyter/chat's very token, so it takes @jupyter/chat from those shared
// modules (jupyterlab-chat shares it as a singleton) rather than bundling a copy of its own.
// Where jupyterlab-chat is not installed, the extension holds no plugin and does nothing.

/** The chat command provider's id. */
export const PROVIDER_ID = "conch:agents";
/** The chat's usernames of Conch's agents (chat_rooms/words.py `agent_user`). */
export const AGENT_USER = "conch-";
const NAME = "conch-jupyter";

/** @typedef {{username: string, name?: string, display_name?: string, bot?: boolean}} ChatUser */
/** @typedef {{name: string, providerId: string, description?: string, spaceOnAccept?: boolean}} ChatCommand */
/** @typedef {{currentWord?: string | null, chatContext?: {users?: ChatUser[]}}} InputModel */
/** @typedef {{get: () => unknown, loaded?: unknown}} SharedEntry */
/** @typedef {Record<string, Record<string, SharedEntry>>} ShareScope */

/**
 * The mention completions for the word being typed: Conch's agents among the chat's users
 * (bot users named `conch-<agent id>`) whose names start with what follows the at sign.
 * @param {string | null | undefined} currentWord
 * @param {ChatUser[]} users
 * @returns {ChatCommand[]}
 */
export function agentCompletions(currentWord, users) {
  const typed = /^@([^@\s]*)$/.exec(currentWord ?? "");
  if (typed === null) return [];
  const start = typed[1].toLowerCase();
  const names = users
    .filter((u) => u.bot === true && u.username.startsWith(AGENT_USER))
    .map((u) => u.display_name || u.name || u.username)
    .filter((name) => name.toLowerCase().startsWith(start));
  return [...new Set(names)].sort().map((name) => ({
    name: `@${name}`,
    providerId: PROVIDER_ID,
    description: "Conch's agent",
    spaceOnAccept: true,
  }));
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

/**
 * The plugin, given @jupyter/chat as the page has it.
 * @param {Record<string, unknown>} chat
 */
function agentsPlugin(chat) {
  return {
    id: `${NAME}:agents-in-chat`,
    description: "Offers Conch's agents in Jupyter Chat's @ list.",
    autoStart: true,
    requires: [chat.IChatCommandRegistry],
    /**
     * @param {unknown} _app
     * @param {{addProvider: (provider: object) => void}} registry
     */
    activate: (_app, registry) => {
      registry.addProvider({
        id: PROVIDER_ID,
        /** @param {InputModel} input */
        listCommandCompletions: async (input) => agentCompletions(input.currentWord, input.chatContext?.users ?? []),
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
