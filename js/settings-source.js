// @ts-check
/**
 * Where Settings get their state and send their actions: straight to the server (directSettings,
 * with the page's own Jupyter auth, so Settings work while the kernel is busy or gone), or
 * through the kernel (relayedSettings: its traits and custom messages). Both speak the same
 * actions ({type: "agent.save", ...}) and the same answers ("done", "pairing.created").
 */

import { policyOf } from "./policy.js";
import { ConchError, ServerApi } from "./server.js";
import { Store } from "./store.js";

/**
 * @typedef {import("./settings.js").SettingsSource} SettingsSource
 * @typedef {import("./chat-source.js").Model} Model
 */

export const UNAVAILABLE = {
  outside: "Outside agents are not available on this server.",
  pairings: "Letting other agents in is not available on this server.",
};
const AGENT_FIELDS = ["name", "persona", "instructions", "provider", "price", "mcp"];

/** @param {Model} model @returns {SettingsSource} */
export function relayedSettings(model) {
  return {
    state: model,
    act: (content) => model.send(content),
    section(key) {
      model.set("section", key);
      model.save_changes();
    },
    listen(callback) {
      model.on("msg:custom", callback);
      return () => model.off("msg:custom", callback);
    },
    close: () => {},
  };
}

/**
 * @param {ServerApi} api @param {string} section the section the kernel asked for
 * @returns {SettingsSource}
 */
export function directSettings(api, section) {
  const state = new Store({
    section: section || "agents",
    agents: [],
    outside: [],
    pairings: [],
    mcp_servers: [], // your MCP servers (Settings → Tools)
    unavailable: {},
    said: null,
    problem: {},
    working: "",
    read_only: "", // the page's own Jupyter auth may change everything
    locked: {}, // what the administrator's policy locks (policy.js)
    budget: null, // this month's spend against its budget, by agent (GET budget)
  });
  /** @type {Set<(message: any) => void>} */
  const listeners = new Set();
  /** @param {any} message */
  const tell = (message) => {
    for (const callback of listeners) callback(message);
  };
  /** @param {string} key @param {string} words */
  const problem = (key, words) => state.update({ problem: { ...state.get("problem"), [key]: words } });

  /** A list this server may not have (yet): then the section says so. @param {"outside" | "pairings"} key */
  async function load(key) {
    let rows = null;
    let words = "";
    try {
      rows = (await api.request("GET", key))[key];
    } catch (error) {
      if (!(error instanceof ConchError) || ![404, 405, 501].includes(error.status)) throw error;
      words = UNAVAILABLE[key];
    }
    state.update({ [key]: rows, unavailable: { ...state.get("unavailable"), [key]: words } });
  }

  /** Your MCP servers; an older server without them offers none. */
  async function servers() {
    try {
      state.update({ mcp_servers: (await api.request("GET", "mcp-servers")).servers });
    } catch (error) {
      if (!(error instanceof ConchError) || ![404, 405, 501].includes(error.status)) throw error;
      state.update({ mcp_servers: null, unavailable: { ...state.get("unavailable"), tools: "MCP servers are not available on this server." } });
    }
  }

  async function agents() {
    state.update({ agents: (await api.request("GET", "agents")).agents });
    try {
      state.update({ budget: await api.request("GET", "budget") });
    } catch (error) {
      if (!(error instanceof ConchError) || error.status !== 404) throw error; // an older server
    }
    // The coding agents found on this machine's PATH, for the form (none where not offered).
    try {
      state.update({ acp_found: (await api.request("GET", "acp/found")).found });
    } catch (error) {
      if (!(error instanceof ConchError)) throw error;
    }
  }

  /**
   * Run one action: say it is running, then done or its problem in words.
   * @param {string} name @param {string} key @param {() => Promise<void>} work
   */
  async function act(name, key, work) {
    state.update({ working: name });
    problem(key, "");
    try {
      await work();
      tell({ type: "done", action: name, ok: true, words: "" });
    } catch (error) {
      problem(key, error instanceof ConchError ? error.message : String(error));
      tell({ type: "done", action: name, ok: false, code: error instanceof ConchError ? error.code : "" });
    } finally {
      state.update({ working: "" });
    }
  }

  /** @type {Record<string, (content: any) => Promise<void>>} */
  const actions = {
    refresh: () =>
      act("refresh", state.get("section"), async () => {
        state.update({ locked: await policyOf(api) });
        await agents();
        await load("outside");
        await load("pairings");
        await servers();
      }),
    "agent.save": (content) =>
      act("agent.save", "agents", async () => {
        const fields = content.agent || {};
        const body = Object.fromEntries(Object.entries(fields).filter(([k]) => AGENT_FIELDS.includes(k)));
        if (content.id) await api.request("PATCH", `agents/${encodeURIComponent(content.id)}`, body);
        else await api.request("POST", "agents", body);
        await agents();
      }),
    "agent.remove": (content) =>
      act("agent.remove", "agents", async () => {
        await api.request("DELETE", `agents/${encodeURIComponent(content.id)}`);
        await agents();
      }),
    "outside.add": async (content) => {
      const paste = String(content.paste || "").trim();
      if (!paste) return problem("outside", "Paste the agent's address first.");
      // A name of your own, else the card's (refused in words if it clashes with one of yours).
      const name = String(content.name || "").trim() || null;
      await act("outside.add", "outside", async () => {
        await api.request("POST", "outside", { paste, name });
        await load("outside");
      });
    },
    "outside.rename": (content) =>
      act("outside.rename", "outside", async () => {
        await api.request("PATCH", `outside/${encodeURIComponent(content.id)}`, { name: String(content.name || "") });
        await load("outside");
      }),
    "outside.remove": (content) =>
      act("outside.remove", "outside", async () => {
        await api.request("DELETE", `outside/${encodeURIComponent(content.id)}`);
        await load("outside");
      }),
    "outside.accept_key": (content) =>
      act("outside.accept_key", "outside", async () => {
        // Only the key the user was shown (null: "not signed"); another is 409 `key_changed`.
        const body = { accept_key: true, thumbprint: content.thumbprint ?? null };
        await api.request("POST", `outside/${encodeURIComponent(content.id)}/repair`, body);
        await load("outside");
      }),
    "outside.repair": () =>
      act("outside.repair", "outside", async () => {
        state.update({ outside: (await api.request("POST", "outside/repair")).outside });
      }),
    "pairing.add": async (content) => {
      const chosen = (content.agents || []).map(String);
      if (!chosen.length) return problem("pairings", "Choose at least one of your agents.");
      await act("pairing.add", "pairings", async () => {
        const made = await api.request("POST", "pairings", { agents: chosen, remote: Boolean(content.remote) });
        const keys = ["id", "agents", "remote", "address", "key", "paste", "note"];
        // Shown once, in the view only: never put in the store.
        tell({ type: "pairing.created", ...Object.fromEntries(keys.map((k) => [k, made[k] ?? null])) });
        await load("pairings");
      });
    },
    "pairing.remove": (content) =>
      act("pairing.remove", "pairings", async () => {
        await api.request("DELETE", `pairings/${encodeURIComponent(content.id)}`);
        if (state.get("said")?.pairing === content.id) state.update({ said: null });
        await load("pairings");
      }),
    "pairing.said": (content) =>
      act("pairing.said", "pairings", async () => {
        const pairing = String(content.id);
        const listed = (await api.request("GET", `pairings/${encodeURIComponent(pairing)}/chats`)).chats;
        const chats = [];
        for (const chat of listed) {
          // Raw, as the kernel passes it in the relay: the view draws both the same way.
          const conversation = await api.request("GET", `conversations/${encodeURIComponent(chat.id)}`);
          chats.push({ id: chat.id, created: chat.created, conversation });
        }
        state.update({ said: { pairing, chats, note: chats.length ? "" : "It has not said anything yet." } });
      }),
    "mcp.add": (content) =>
      act("mcp.add", "tools", async () => {
        await api.request("POST", "mcp-servers", content.server || {});
        await servers();
      }),
    "mcp.test": (content) =>
      act("mcp.test", "tools", async () => {
        await api.request("POST", `mcp-servers/${encodeURIComponent(content.id)}/test`);
        await servers();
      }),
    "mcp.remove": (content) =>
      act("mcp.remove", "tools", async () => {
        await api.request("DELETE", `mcp-servers/${encodeURIComponent(content.id)}`);
        await servers();
        await agents();
      }),
    "said.close": async () => state.update({ said: null }),
    "budget.set": (content) =>
      act("budget.set", "agents", async () => {
        state.update({ budget: await api.request("PATCH", "budget", { monthly_usd: content.usd ?? null }) });
      }),
  };

  actions.refresh({});
  return {
    state,
    act(content) {
      actions[String(content?.type)]?.(content);
    },
    section(key) {
      state.update({ section: key });
    },
    listen(callback) {
      listeners.add(callback);
      return () => listeners.delete(callback);
    },
    close: () => listeners.clear(),
  };
}
