// @ts-check
/**
 * The composer's `@` picker, its pure part: where a mention is being typed, which agents it
 * offers, and in what order. Your agents come first, then outside agents (marked as such).
 *
 * Two entries that would look alike in the list (names equal once Unicode-normalised (NFKC),
 * case-folded and stripped of invisible characters) are never both offered: your own agent is
 * kept, as a mention that could mean both goes to your agent (spec 0112, issue 16).
 */

/** @typedef {{name: string, outside: boolean}} Mention */

// Format characters (zero-width spaces and joiners, direction marks), line and paragraph
// separators, and the Hangul fillers that draw as nothing.
const INVISIBLE = /[\p{Cf}\p{Zl}\p{Zp}\u115F\u1160\u3164\uFFA0]/gu;

/** A name as it looks: what two entries must not share. @param {string} name */
export function lookalikeKey(name) {
  return name.normalize("NFKC").replace(INVISIBLE, "").toLowerCase().replace(/\s+/g, " ").trim();
}

/**
 * The mention being typed at the caret, or null: an @ at the start or after a space or an
 * opening bracket or quote, then up to 40 characters that are neither @ nor a line break.
 * @param {string} value @param {number} caret
 * @returns {{start: number, end: number, query: string} | null}
 */
export function mentionAt(value, caret) {
  const match = /(^|[\s([{"'])@([^@\n]{0,40})$/u.exec(value.slice(0, caret));
  if (!match) return null;
  return { start: caret - match[2].length - 1, end: caret, query: match[2].toLowerCase() };
}

/**
 * What the picker offers for a query: names that start with it, then (for a one-word query)
 * names that contain it; your agents before outside agents; no two entries alike.
 * @param {Mention[]} all @param {string} query @returns {Mention[]}
 */
export function offered(all, query) {
  const distinct = unalike(all);
  const prefix = distinct.filter((m) => m.name.toLowerCase().startsWith(query));
  const inside =
    query && !query.includes(" ")
      ? distinct.filter((m) => !prefix.includes(m) && m.name.toLowerCase().includes(query))
      : [];
  const ranked = [...prefix, ...inside];
  return [...ranked.filter((m) => !m.outside), ...ranked.filter((m) => m.outside)];
}

/** Each look once, your agent's entry first. @param {Mention[]} all @returns {Mention[]} */
export function unalike(all) {
  const seen = new Set();
  /** @type {Mention[]} */
  const kept = [];
  for (const mention of [...all.filter((m) => !m.outside), ...all.filter((m) => m.outside)]) {
    const key = lookalikeKey(mention.name);
    if (!key || seen.has(key)) continue;
    seen.add(key);
    kept.push(mention);
  }
  return kept;
}
