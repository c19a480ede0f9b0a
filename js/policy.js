// @ts-check
/**
 * An administrator's policy, as the view draws it (issue 26): what `GET /policy` says is locked
 * (`{"locked": {modes, max_chat_usd, max_monthly_usd, door, door_remote, outside_hosts,
 * providers, acp}}`), turned into the sentences that stand by the controls it locks — the mode
 * switch, Settings' sections, the budget fields — each ending "set by your administrator.".
 *
 * The server refuses every locked change itself (403 `policy`); the view only says so first, so
 * nobody is offered what will be refused. A server without /policy (older) locks nothing.
 * Pure, except `policyOf` (one request per page and server).
 */

/**
 * @typedef {{
 *   modes?: string[], max_chat_usd?: number, max_monthly_usd?: number, door?: false,
 *   door_remote?: false, outside_hosts?: string[] | false,
 *   providers?: {kinds?: string[], base_urls?: string[]}, acp?: string[] | false,
 *   mcp?: {commands: string[], urls: string[]} | false,
 * }} Locked
 * @typedef {{agents: string[], outside: string[], pairings: string[], tools: string[]}} SectionLocks
 */

export const BY_ADMIN = "set by your administrator.";
const MODE_NAMES = /** @type {Record<string, string>} */ ({ ask: "Ask", auto: "Auto", read: "Read" });

/** @param {number} usd */
const dollars = (usd) => `$${usd.toFixed(2)}`;

/** @param {unknown} value @returns {Locked} */
export function lockedOf(value) {
  const locked = /** @type {any} */ (value)?.locked;
  return locked && typeof locked === "object" && !Array.isArray(locked) ? locked : {};
}

/**
 * The sentence by a mode the policy turns off; "" for a mode it allows.
 * @param {Locked} locked @param {string} mode
 */
export function modeLock(locked, mode) {
  if (!Array.isArray(locked.modes) || locked.modes.includes(mode)) return "";
  return `${MODE_NAMES[mode] || mode} is off on this server: ${BY_ADMIN}`;
}

/**
 * Whether a provider kind may be chosen for an agent.
 * @param {Locked} locked @param {string} kind
 */
export function kindAllowed(locked, kind) {
  const kinds = locked.providers?.kinds;
  if (kind === "acp" && locked.acp === false) return false;
  return !Array.isArray(kinds) || kinds.includes(kind);
}

/**
 * The sentences each of Settings' sections shows for what is locked there.
 * @param {Locked} locked @returns {SectionLocks}
 */
export function sectionLocks(locked) {
  /** @type {SectionLocks} */
  const out = { agents: [], outside: [], pairings: [], tools: [] };
  const { kinds, base_urls: urls } = locked.providers || {};
  if (Array.isArray(kinds)) out.agents.push(`Providers allowed on this server: ${kinds.join(", ")}: ${BY_ADMIN}`);
  if (Array.isArray(urls)) out.agents.push(`Model addresses allowed on this server: ${urls.join(", ")}: ${BY_ADMIN}`);
  if (locked.acp === false) out.agents.push(`Coding agents over ACP are off on this server: ${BY_ADMIN}`);
  else if (Array.isArray(locked.acp)) out.agents.push(`Coding agents allowed on this server: ${locked.acp.join(", ")}: ${BY_ADMIN}`);
  if (locked.outside_hosts === false) out.outside.push(`Outside agents are off on this server: ${BY_ADMIN}`);
  else if (Array.isArray(locked.outside_hosts)) {
    out.outside.push(`Outside agents only at ${locked.outside_hosts.join(", ")} on this server: ${BY_ADMIN}`);
  }
  if (locked.mcp === false) out.tools.push(`Your own MCP servers are off on this server: ${BY_ADMIN}`);
  else if (locked.mcp && typeof locked.mcp === "object") {
    const allowed = [...(locked.mcp.commands || []), ...(locked.mcp.urls || [])];
    out.tools.push(`MCP servers allowed on this server: ${allowed.join(", ") || "none"}: ${BY_ADMIN}`);
  }
  if (locked.door === false) out.pairings.push(`The door is closed on this server, so no agent can be let in: ${BY_ADMIN}`);
  else if (locked.door_remote === false) out.pairings.push(`The door is closed to other computers on this server: ${BY_ADMIN}`);
  return out;
}

/**
 * The sentences by the budget fields: a chat's limit and the month's, each "" when not locked.
 * @param {Locked} locked @returns {{chat: string, month: string}}
 */
export function budgetLock(locked) {
  const chat = typeof locked.max_chat_usd === "number" ? `A chat's limit can be at most ${dollars(locked.max_chat_usd)} on this server: ${BY_ADMIN}` : "";
  const month =
    typeof locked.max_monthly_usd === "number" ? `The monthly budget can be at most ${dollars(locked.max_monthly_usd)} on this server: ${BY_ADMIN}` : "";
  return { chat, month };
}

/** @type {Map<string, Promise<Locked>>} */
const ASKED = new Map();

/**
 * What the page's server locks, asked once per server: {} where it has no policy, or no
 * /policy at all.
 * @param {{base: string, request(method: string, path: string): Promise<any>}} api
 * @returns {Promise<Locked>}
 */
export function policyOf(api) {
  let asked = ASKED.get(api.base);
  if (!asked) {
    asked = api.request("GET", "policy").then(lockedOf, () => ({}));
    ASKED.set(api.base, asked);
  }
  return asked;
}
