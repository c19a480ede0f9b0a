// Markdown while a reply streams: the inline pieces a growing paragraph is drawn from.
import assert from "node:assert/strict";
import { test } from "node:test";

import { inlinePieces } from "../stream-md.js";

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
