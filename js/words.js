// @ts-check
/**
 * The view's own words for a round: the folded card's line when the server has none (a round it
 * forgot when it restarted), and lists joined the way people write them. The server's words
 * (conch_jupyter/rounds/engine.py's end_words, carried by round.ended) are used wherever they exist.
 */

/** @param {string[]} items */
export function and(items) {
  return items.length > 1 ? `${items.slice(0, -1).join(", ")} and ${items[items.length - 1]}` : items.join("");
}

/**
 * "Researcher and Writer took turns · 4 replies" (a round that simply finished: no reason).
 * @param {string[]} speakers @param {number} replies
 */
export function foldedWords(speakers, replies) {
  if (replies <= 0) return "The round ended before anyone answered";
  const who = [...new Set(speakers)];
  const head = who.length === 1 ? `${who[0]} answered` : `${and(who) || "The agents"} took turns`;
  return `${head} · ${replies === 1 ? "1 reply" : `${replies} replies`}`;
}

/** Two letters for a face: "Data Bot" → "DB", "Writer" → "W". @param {string} name */
export function initials(name) {
  const words = name.replace(/[-_]/g, " ").split(/\s+/).filter(Boolean);
  const letters = words.length > 1 ? words[0][0] + words[1][0] : name.slice(0, 1);
  return letters.toUpperCase() || "?";
}

/**
 * Dollars as people read them: "$0.42", "$5.00", and an amount under a cent to its first
 * figure ("$0.004"), never "$0.00" for something that cost something.
 * @param {number} usd
 */
export function dollars(usd) {
  const value = Number(usd) || 0;
  if (value > 0 && value < 0.01) return `$${Number(value.toPrecision(1))}`;
  return `$${value.toLocaleString("en-US", { minimumFractionDigits: 2, maximumFractionDigits: 2 })}`;
}

/** "1.2k", "950", "2.4M" @param {number} n */
export function tokens(n) {
  const value = Number(n) || 0;
  if (value >= 1e6) return `${(value / 1e6).toFixed(1).replace(/\.0$/, "")}M`;
  if (value >= 1e3) return `${(value / 1e3).toFixed(1).replace(/\.0$/, "")}k`;
  return String(value);
}

/**
 * A metered reply's quiet line: "1.2k tokens in · 340 out · $0.004" ("about" when Conch counted
 * a cut-off reply itself).
 * @param {{usd: number, input_tokens: number, output_tokens: number, estimated?: boolean}} cost
 */
export function costWords(cost) {
  const money = (cost.estimated ? "about " : "") + dollars(cost.usd);
  return `${tokens(cost.input_tokens)} tokens in · ${tokens(cost.output_tokens)} out · ${money}`;
}

/**
 * Spend against its limit: "$0.42 of $5.00" ("$0.42 · no limit" when there is none).
 * @param {{spent: number, limit: number | null} | null | undefined} part
 */
export function spentWords(part) {
  if (!part) return "";
  return part.limit === null || part.limit === undefined ? `${dollars(part.spent)} · no limit` : `${dollars(part.spent)} of ${dollars(part.limit)}`;
}

/** "$5", "$2.10": whole dollars without their cents. @param {number} usd */
export function shortDollars(usd) {
  return dollars(usd).replace(/\.00$/, "");
}

/**
 * The offer to continue a round stopped at its bound, with what it cost in sight: the end line
 * "The round stopped at its bound · 4 replies · $0.84" and the button "Continue (this chat: $2.10
 * of $5)". A round the chat's limit or the month's budget stopped says so: it goes on once the
 * limit is raised.
 * @param {{turns?: number, spent?: number, reason?: string, limit?: string}} continuable what the server offers (its `continuable`)
 * @param {{spent: number, limit: number | null} | null | undefined} chat the chat's spend against its limit
 * @returns {{head: string, line: string, button: string}}
 */
export function continueWords(continuable, chat) {
  const turns = Number(continuable.turns) || 0;
  const spent = Number(continuable.spent) || 0;
  const count = turns === 1 ? "1 reply" : `${turns} replies`;
  const line = spent > 0 ? `${count} · ${dollars(spent)}` : count;
  const at = continuable.reason === "spend" ? LIMIT_WORDS[String(continuable.limit || "round")] : undefined;
  const head = at || "The round stopped at its bound";
  if (!chat) return { head, line, button: "Continue" };
  const limit = chat.limit === null || chat.limit === undefined ? "" : ` of ${shortDollars(chat.limit)}`;
  return { head, line, button: `Continue (this chat: ${dollars(chat.spent)}${limit})` };
}

/** @type {Record<string, string>} */
const LIMIT_WORDS = {
  chat: "The round stopped at this chat's limit: raise it, then",
  month: "The round stopped at this month's budget: raise it, then",
};
