// The @ picker: when it opens, what it offers, in what order, and never two entries that read as
// one: your agent always wins, and an outside agent whose name clashes with yours is held back.
import assert from "node:assert/strict";
import { test } from "node:test";

import { clashes, heldBack, mentionAt, nameKey, offered, unalike } from "../mentions.js";

const ours = (name) => ({ name, outside: false });
const outside = (name, clashes_with = null) => ({ name, outside: true, clashes_with });
const names = (list) => list.map((m) => `${m.name}${m.outside ? " (outside)" : ""}`);

test("an @ opens the picker at the start, after a space or an opening bracket or quote", () => {
  assert.deepEqual(mentionAt("@Re", 3), { start: 0, end: 3, query: "re" });
  assert.deepEqual(mentionAt("hi @wri", 7), { start: 3, end: 7, query: "wri" });
  assert.deepEqual(mentionAt('("@', 3), { start: 2, end: 3, query: "" });
  assert.equal(mentionAt("mail me@home", 12), null); // inside a word: an address, not a mention
  assert.equal(mentionAt("@Writer\nthen", 12), null); // a line break ends it
  assert.equal(mentionAt("@" + "x".repeat(41), 42), null); // too long to be a name
  assert.deepEqual(mentionAt("@Data Bot and", 9), { start: 0, end: 9, query: "data bot" });
});

test("names that start with the query come first, then names that contain it; yours before outside", () => {
  const all = [ours("Researcher"), ours("Writer"), outside("Desk Research"), ours("Data Bot")];
  assert.deepEqual(names(offered(all, "")), ["Researcher", "Writer", "Data Bot", "Desk Research (outside)"]);
  assert.deepEqual(names(offered(all, "res")), ["Researcher", "Desk Research (outside)"]);
  assert.deepEqual(names(offered(all, "t")), ["Writer", "Data Bot"]);
  assert.deepEqual(names(offered(all, "a b")), []); // inside matches only for one word
  assert.deepEqual(names(offered(all, "zzz")), []);
});

test("the query matches by the same key: width, accents and case do not hide a name", () => {
  const all = [ours("Reséarcher"), ours("Writer"), ours("Helper"), ours("Helper Two")];
  assert.deepEqual(names(offered(all, "resea")), ["Reséarcher"]);
  assert.deepEqual(names(offered(all, "ｗｒ")), ["Writer"]);
  // A space typed after a whole name: only longer names go on; a space first is no mention.
  assert.deepEqual(names(offered(all, "helper ")), ["Helper Two"]);
  assert.deepEqual(names(offered(all, " ")), []);
  assert.deepEqual(names(offered(all, " w")), []);
});

test("the key is core/names.py's: accents and invisible characters gone, NFKC, case folded", () => {
  assert.equal(nameKey("Ｒｅｓｅａｒｃｈｅｒ\u200d "), "researcher"); // full width, a joiner
  assert.equal(nameKey("Re\u0301searcher"), "researcher"); // a combining accent
  assert.equal(nameKey("Résumé  Bot"), "resume bot"); // accents; spaces collapsed
  assert.equal(nameKey("Straße"), "strasse"); // full case folding, as str.casefold
  assert.equal(nameKey("ΣΟΦΟΣ"), nameKey("σοφος")); // a final sigma folds as any sigma
  assert.equal(nameKey("\u200b\u00ad\ufeff"), "");
});

test("two names clash when equal or one starts the other before a separator, by key", () => {
  assert.ok(clashes("Researcher please", "Researcher")); // the case
  assert.ok(clashes("Research", "research-desk")); // the other direction
  assert.ok(clashes("RESEARCHER.bot", "Researcher"));
  assert.ok(clashes("Ｗｒｉｔｅｒ", "writer"));
  assert.ok(!clashes("Researchers", "Researcher")); // no separator: a name of its own
  assert.ok(!clashes("Writer", "Ghostwriter"));
});

test("two entries that look alike are never both offered: your agent's is kept", () => {
  const all = [
    outside("writer"),
    ours("Writer"),
    outside("Ｗｒｉｔｅｒ"), // full width
    outside("Wri\u200bter"), // a zero-width space inside
    outside("Wrïter"), // an accent
    outside("Helper"),
    outside("HELPER"),
  ];
  assert.deepEqual(names(unalike(all)), ["Writer", "Helper (outside)"]);
  assert.deepEqual(names(offered(all, "w")), ["Writer"]);
  assert.deepEqual(names(offered(all, "")), ["Writer", "Helper (outside)"]);
});

test("an outside agent whose name starts with yours, or is its start, is held back", () => {
  const all = [ours("Researcher"), ours("Data Bot"), outside("Researcher please"), outside("Data"), outside("Helper")];
  assert.deepEqual(names(offered(all, "")), ["Researcher", "Data Bot", "Helper (outside)"]);
  assert.deepEqual(names(offered(all, "researcher p")), []);
  assert.deepEqual(heldBack(all, "researcher p"), ["Researcher"]);
  assert.deepEqual(heldBack(all, "da"), ["Data Bot"]);
  assert.deepEqual(heldBack(all, "help"), []);
  assert.deepEqual(heldBack(all, " "), []);
});

test("the server's clashes_with holds an outside agent back: look-alikes only it can see", () => {
  // A Cyrillic "а": the key differs, the look does not; core/names.py's confusables say so.
  const all = [ours("Researcher"), outside("Reseаrcher", "Researcher"), outside("Helper")];
  assert.notEqual(nameKey("Reseаrcher"), nameKey("Researcher"));
  assert.deepEqual(names(offered(all, "")), ["Researcher", "Helper (outside)"]);
  assert.deepEqual(names(offered(all, "rese")), ["Researcher"]);
  assert.deepEqual(heldBack(all, "rese"), ["Researcher"]);
  assert.deepEqual(heldBack(all, ""), ["Researcher"]);
  // In your agents' order, each once.
  const more = [ours("Writer"), ...all, outside("Wrïter"), outside("Researcher 2")];
  assert.deepEqual(heldBack(more, ""), ["Writer", "Researcher"]);
});

test("with no agent of yours by that name, an outside agent is offered, marked as outside", () => {
  const all = [ours("Writer"), outside("Researcher please")];
  assert.deepEqual(names(offered(all, "res")), ["Researcher please (outside)"]);
  assert.deepEqual(heldBack(all, "res"), []);
});
