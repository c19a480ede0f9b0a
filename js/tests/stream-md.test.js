// Markdown while a reply streams: the inline pieces a growing paragraph is drawn from.
import assert from "node:assert/strict";
import { test } from "node:test";

import { blocksOf, inlinePieces } from "../stream-md.js";

test("bold, italics and code, closed or still open", () => {
  assert.deepEqual(inlinePieces("a **museum** by `the river`"), [
    { kind: "text", text: "a " },
    { kind: "strong", text: "museum" },
    { kind: "text", text: " by " },
    { kind: "code", text: "the river" },
  ]);
  assert.deepEqual(inlinePieces("**Writ"), [{ kind: "strong", text: "Writ" }]); // open: bold so far
  assert.deepEqual(inlinePieces("an *idea* and _one_"), [
    { kind: "text", text: "an " },
    { kind: "em", text: "idea" },
    { kind: "text", text: " and " },
    { kind: "em", text: "one" },
  ]);
});

test("what is no emphasis stays as written, and HTML is only text", () => {
  assert.deepEqual(inlinePieces("snake_case_name * 3"), [{ kind: "text", text: "snake_case_name * 3" }]);
  assert.deepEqual(inlinePieces("<script>alert(1)</script>"), [{ kind: "text", text: "<script>alert(1)</script>" }]);
  assert.deepEqual(inlinePieces("`**not bold**`"), [{ kind: "code", text: "**not bold**" }]);
});

test("a long line with many marks is read in one pass", () => {
  const line = "word **bold** ".repeat(5_000); // its time: benchmarks/bench_view_stream.py
  assert.equal(inlinePieces(line).filter((p) => p.kind === "strong").length, 5_000);
});

test("a streaming paragraph takes the structure it settles into: a list is a list while it streams", () => {
  assert.deepEqual(blocksOf("*(offline — no model was asked)*\n\nI'm **Writer**."), [
    { kind: "p", lines: ["*(offline — no model was asked)*"] },
    { kind: "p", lines: ["I'm **Writer**."] },
  ]);
  assert.deepEqual(blocksOf("Points:\n- one\n- two and\nmore\n- thr"), [
    { kind: "p", lines: ["Points:"] },
    { kind: "list", ordered: false, start: 1, items: [["one"], ["two and", "more"], ["thr"]] },
  ]);
  assert.deepEqual(blocksOf("3. c\n4) d\n* e"), [
    { kind: "list", ordered: true, start: 3, items: [["c"], ["d"]] },
    { kind: "list", ordered: false, start: 1, items: [["e"]] },
  ]);
  assert.deepEqual(blocksOf("## Plan\nfirst line\nsecond"), [
    { kind: "heading", level: 2, text: "Plan" },
    { kind: "p", lines: ["first line", "second"] },
  ]);
  // A fence still open runs to the end of the text so far; its marks are not shown.
  assert.deepEqual(blocksOf("Run:\n```python\nx = 1\n- not a bullet"), [
    { kind: "p", lines: ["Run:"] },
    { kind: "code", text: "x = 1\n- not a bullet" },
  ]);
  assert.deepEqual(blocksOf("```\na\n```\nafter"), [
    { kind: "code", text: "a" },
    { kind: "p", lines: ["after"] },
  ]);
  assert.deepEqual(blocksOf("-"), [{ kind: "p", lines: ["-"] }]); // a lone mark: no item yet
  assert.deepEqual(blocksOf("You asked:\n\n> first  \n> second  \nA few things:\n- a"), [
    { kind: "p", lines: ["You asked:"] },
    { kind: "quote", lines: ["first  ", "second  ", "A few things:"] },
    { kind: "list", ordered: false, start: 1, items: [["a"]] },
  ]);
});
