// Keyed reconciling: unchanged items keep their elements, cards update in place, the rest redraw.
import assert from "node:assert/strict";
import { test } from "node:test";

import { paragraphPieces, reconcile, textChange } from "../reconcile.js";

const note = (id, text) => ({ kind: "note", id, text });
const card = (id, line) => ({ kind: "round", id, line });

test("a first draw draws everything", () => {
  const plan = reconcile(new Map(), [note("a", "x"), card("r", "1")]);
  assert.deepEqual(
    plan.steps.map((s) => [s.id, s.how]),
    [
      ["a", "draw"],
      ["r", "draw"],
    ],
  );
  assert.deepEqual(plan.remove, []);
});

test("unchanged items are kept, a changed card is updated, a changed message redrawn, gone ones removed", () => {
  const before = [note("a", "x"), card("r", "1"), note("b", "y"), note("gone", "z")];
  const drawn = new Map(before.map((item) => [item.id, JSON.stringify(item)]));
  const plan = reconcile(drawn, [note("a", "x"), card("r", "2"), note("b", "changed"), note("new", "n")]);
  assert.deepEqual(
    plan.steps.map((s) => [s.id, s.how]),
    [
      ["a", "keep"],
      ["r", "update"],
      ["b", "draw"],
      ["new", "draw"],
    ],
  );
  assert.deepEqual(plan.remove, ["gone"]);
});

test("a streaming reply grows by appending; anything else replaces its text", () => {
  assert.deepEqual(textChange("Hello", "Hello, world"), { append: ", world" });
  assert.deepEqual(textChange("", "Hi"), { append: "Hi" });
  assert.deepEqual(textChange("Hello", "Hello"), { append: "" });
  assert.deepEqual(textChange("Hello", "Help"), { replace: "Help" });
});

test("appended words are cut where a paragraph ends, so each paragraph is its own block", () => {
  assert.deepEqual(paragraphPieces("", "Hi"), [{ fresh: true, text: "Hi" }]);
  assert.deepEqual(paragraphPieces("Hi", " there"), [{ fresh: false, text: " there" }]);
  assert.deepEqual(paragraphPieces("Hi", "\n\nNext\n\nLast"), [
    { fresh: false, text: "\n\n" },
    { fresh: true, text: "Next\n\n" },
    { fresh: true, text: "Last" },
  ]);
  assert.deepEqual(paragraphPieces("One\n\n", "Two"), [{ fresh: true, text: "Two" }]);
  assert.deepEqual(paragraphPieces("x", ""), []);
});
