// The @ picker: when it opens, what it offers, in what order, and never two entries alike.
import assert from "node:assert/strict";
import { test } from "node:test";

import { lookalikeKey, mentionAt, offered, unalike } from "../mentions.js";

const ours = (name) => ({ name, outside: false });
const outside = (name) => ({ name, outside: true });
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
  const all = [ours("Researcher"), ours("Writer"), outside("Research Desk"), ours("Data Bot")];
  assert.deepEqual(names(offered(all, "")), ["Researcher", "Writer", "Data Bot", "Research Desk (outside)"]);
  assert.deepEqual(names(offered(all, "res")), ["Researcher", "Research Desk (outside)"]);
  assert.deepEqual(names(offered(all, "t")), ["Writer", "Data Bot"]);
  assert.deepEqual(names(offered(all, "a b")), []); // inside matches only for one word
  assert.deepEqual(names(offered(all, "zzz")), []);
});

test("two entries that look alike are never both offered: your agent's is kept", () => {
  const all = [
    outside("writer"),
    ours("Writer"),
    outside("Ｗｒｉｔｅｒ"), // full width
    outside("Wri\u200bter"), // a zero-width space inside
    outside("Helper"),
    outside("HELPER"),
  ];
  assert.deepEqual(names(unalike(all)), ["Writer", "Helper (outside)"]);
  assert.deepEqual(names(offered(all, "w")), ["Writer"]);
  assert.equal(lookalikeKey("Ｒｅｓｅａｒｃｈｅｒ\u200d "), "researcher");
  assert.equal(lookalikeKey("\u200b"), "");
});
