// @ts-check
/**
 * The composer's `@` picker, its pure part: where a mention is being typed, which agents it
 * offers, and in what order. Your agents come first, then outside agents (marked as such).
 *
 * Someone else's card must never decide where your words go (spec 0112, issue 16): the picker
 * never offers two entries that read as one. Names are compared as the server compares them
 * (conch_jupyter/core/names.py's name_key: accents and invisible characters removed, NFKC, case
 * folded; tests/server/test_view_names.py checks both give the same keys), and your agent always wins:
 * - an outside agent the server marks `clashes_with` one of yours (equal, a start of one another,
 *   or alike to the eye by Unicode's confusables) is not offered: a mention of it would go to
 *   your agent anyway (rounds/mentions.py), so offering it would mislead;
 * - an outside agent whose key is equal to, starts with, or is the start of one of yours is not
 *   offered either, even where the server said nothing (the same rule, by key, on this side);
 * - of entries with the same key only the first is kept, yours before outside agents'.
 */

/** @typedef {{name: string, outside: boolean, clashes_with?: string | null}} Mention */

/** What may follow a name that another name starts with: core/names.py's NAME_MARKS. */
const NAME_MARKS = " -_.";

// Characters drawn as nothing (Default_Ignorable_Code_Point, as core/names.py lists them), and
// nonspacing and enclosing marks (accents, once a name is decomposed).
const INVISIBLE = /\p{Default_Ignorable_Code_Point}/gu;
const MARKS = /[\p{Mn}\p{Me}]/gu;
// What Python's str.split() splits at: JavaScript's \s and the separators \x1c-\x1f and \x85.
const SPACES = /[\s\x1c-\x1f\x85]+/u;

/**
 * Full case folding as Python's str.casefold does it (Unicode's CaseFolding.txt, C and F),
 * a character at a time: lower, upper, lower folds "ß" and "ẞ" to "ss", "ς" to "σ", "ϐ" to "β"
 * as casefold does; the dotless "ı" has no folding and stays; Cherokee folds to its capitals.
 * @param {string} text
 */
function casefold(text) {
  let folded = "";
  for (const ch of text) {
    if (ch === "ı") folded += ch;
    else folded += ch.toLowerCase().toUpperCase().toLowerCase();
  }
  return folded.replace(CHEROKEE_SMALL, (ch) => String.fromCodePoint(cherokeeCapital(ch.codePointAt(0) || 0)));
}

const CHEROKEE_SMALL = /[\uAB70-\uABBF\u13F8-\u13FD]/gu;
/** @param {number} code */
function cherokeeCapital(code) {
  return code >= 0xab70 ? code - 0xab70 + 0x13a0 : code - 8;
}

/**
 * The key names are compared by, as core/names.py's name_key makes it: without invisible characters
 * or accents, spaces collapsed, NFKC, case folded, NFKC again.
 * @param {string} name
 */
export function nameKey(name) {
  const plain = name.normalize("NFKD").replace(INVISIBLE, "").replace(MARKS, "");
  const spaced = plain.split(SPACES).filter(Boolean).join(" ");
  return casefold(spaced.normalize("NFKC")).normalize("NFKC");
}

/** @param {string} longer @param {string} shorter */
function startsWith(longer, shorter) {
  const after = longer.slice(shorter.length, shorter.length + 1);
  return Boolean(shorter && after) && longer.startsWith(shorter) && NAME_MARKS.includes(after);
}

/**
 * Whether two names clash by key (core/names.py's clash rule without the look-alike half, which needs
 * Unicode's confusables table and comes from the server as `clashes_with`): equal, or one the
 * start of the other followed by a space, "-", "_" or ".".
 * @param {string} name @param {string} other
 */
export function clashes(name, other) {
  const a = nameKey(name);
  const b = nameKey(other);
  return a === b || startsWith(a, b) || startsWith(b, a);
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
 * Who the picker may offer, and who it holds back: each key once, your agents first, and no
 * outside agent whose name clashes with one of yours. `withheld` pairs each outside agent held
 * back for a clash with the agent of yours it clashes with.
 * @param {Mention[]} all
 * @returns {{kept: Mention[], withheld: {mention: Mention, yours: string}[]}}
 */
export function sift(all) {
  const ours = all.filter((m) => !m.outside);
  const seen = new Set();
  /** @type {Mention[]} */
  const kept = [];
  /** @type {{mention: Mention, yours: string}[]} */
  const withheld = [];
  for (const mention of [...ours, ...all.filter((m) => m.outside)]) {
    if (mention.outside) {
      const yours = mention.clashes_with || ours.find((m) => clashes(mention.name, m.name))?.name;
      if (yours) {
        withheld.push({ mention, yours });
        continue;
      }
    }
    const key = nameKey(mention.name);
    if (!key || seen.has(key)) continue;
    seen.add(key);
    kept.push(mention);
  }
  return { kept, withheld };
}

/** Each entry once, your agent's first, no outside agent clashing with yours. @param {Mention[]} all */
export function unalike(all) {
  return sift(all).kept;
}

/**
 * A query as a key, or null when it can match no name. Spaces are kept at its ends: "@ " is not
 * a mention begun, and "@Helper " is a name typed whole (it still matches "Helper Two").
 * @param {string} query
 */
function queryKey(query) {
  if (/^\s/u.test(query)) return null;
  const key = nameKey(query);
  return key && /\s$/u.test(query) ? `${key} ` : key;
}

/** @param {Mention} mention @param {string} query a key */
function matches(mention, query) {
  return nameKey(mention.name).startsWith(query);
}

/** @param {Mention} mention @param {string} query a key */
function contains(mention, query) {
  return Boolean(query) && !query.includes(" ") && nameKey(mention.name).includes(query);
}

/**
 * What the picker offers for a query: names that start with it, then (for a one-word query)
 * names that contain it; your agents before outside agents; no two entries alike. Matching is
 * by key too, so "resea" finds "Reséarcher" and a full-width "ｗ" finds "Writer".
 * @param {Mention[]} all @param {string} query @returns {Mention[]}
 */
export function offered(all, query) {
  const q = queryKey(query);
  if (q === null) return [];
  const distinct = unalike(all);
  const prefix = distinct.filter((m) => matches(m, q));
  const inside = distinct.filter((m) => !prefix.includes(m) && contains(m, q));
  const ranked = [...prefix, ...inside];
  return [...ranked.filter((m) => !m.outside), ...ranked.filter((m) => m.outside)];
}

/**
 * Your agents whose name an outside agent matching the query clashes with (so it is not
 * offered): the picker says so, naming only your agent, and where to rename the other.
 * @param {Mention[]} all @param {string} query @returns {string[]}
 */
export function heldBack(all, query) {
  const q = queryKey(query);
  if (q === null) return [];
  const held = new Set(
    sift(all)
      .withheld.filter(({ mention }) => matches(mention, q) || contains(mention, q))
      .map(({ yours }) => yours),
  );
  // In your agents' order; a name the server gave that is not in the list (yet) comes last.
  const ours = all.filter((m) => !m.outside && held.has(m.name)).map((m) => m.name);
  return [...new Set([...ours, ...held])];
}
