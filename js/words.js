// @ts-check
/**
 * The view's own words for a round: the folded card's line when the server has none (a round it
 * forgot when it restarted), and lists joined the way people write them. The server's words
 * (conch_jupyter/rounds/prompts.py's end_words, carried by round.ended) are used wherever they exist.
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
