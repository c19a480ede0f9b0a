// The cells an agent wrote, marked in the notebook: matched by place only while the page and
// the server's list agree, never a wrong cell.
import assert from "node:assert/strict";
import { test } from "node:test";

import { changesMarks, markWords, marksFor, typeOf } from "../cell-marks.js";

const analyst = { agent: "analyst", name: "Analyst", chat: "c1" };
const listed = [
  { id: "a", type: "markdown", conch: null },
  { id: "b", type: "code", conch: analyst },
  { id: "c", type: "code", conch: null },
];

test("each shown cell gets the mark of the listed cell at its place", () => {
  const shown = [
    { index: null, type: "markdown" },
    { index: null, type: "code" },
    { index: null, type: "code" },
  ];
  assert.deepEqual(marksFor(shown, listed), [null, analyst, null]);
  // A windowed notebook's cells say their place: the same marks.
  const indexed = shown.map((cell, index) => ({ ...cell, index }));
  assert.deepEqual(marksFor(indexed, listed), [null, analyst, null]);
  // An unknown type (a page that names its cells otherwise) still matches by place.
  assert.deepEqual(marksFor([{ index: null, type: null }, ...shown.slice(1)], listed), [null, analyst, null]);
});

test("a page out of step with the list marks nothing", () => {
  const two = [
    { index: null, type: "markdown" },
    { index: null, type: "code" },
  ];
  assert.equal(marksFor(two, listed), null); // a cell added in the page, not yet in the list
  const four = [...two, { index: null, type: "code" }, { index: null, type: "code" }];
  assert.equal(marksFor(four, listed), null);
  // Same count, but a cell of another type at a place: the list is of another moment.
  const swapped = [
    { index: null, type: "code" },
    { index: null, type: "markdown" },
    { index: null, type: "code" },
  ];
  assert.equal(marksFor(swapped, listed), null);
  // A windowed notebook showing only some cells (scrolled), or out of order: nothing.
  const window = [
    { index: 1, type: "code" },
    { index: 2, type: "code" },
    { index: 3, type: "code" },
  ];
  assert.equal(marksFor(window, listed), null);
  const mixed = [
    { index: 0, type: "markdown" },
    { index: null, type: "code" },
    { index: 2, type: "code" },
  ];
  assert.equal(marksFor(mixed, listed), null);
  assert.deepEqual(marksFor([], []), []);
});

test("a mark says who wrote the cell, through Conch, and in which chat", () => {
  assert.deepEqual(markWords(analyst, "c1"), {
    badge: "written by Analyst",
    title: "Conch: Analyst wrote this cell in this notebook's Conch chat. Undo is in the chat.",
  });
  const removed = markWords({ agent: "x", name: null, chat: "c2" }, "c1");
  assert.equal(removed.badge, "written by an agent since removed");
  assert.match(removed.title, /in another Conch chat/);
});

test("a cell's type comes from JupyterLab's classes", () => {
  const classes = (...names) => ({ contains: (name) => names.includes(name) });
  assert.equal(typeOf(classes("jp-Cell", "jp-CodeCell")), "code");
  assert.equal(typeOf(classes("jp-Cell", "jp-MarkdownCell")), "markdown");
  assert.equal(typeOf(classes("jp-Cell", "jp-RawCell")), "raw");
  assert.equal(typeOf(classes("jp-Cell")), null);
});

test("a cell write's tool message or an Undo calls for a new read; nothing else does", () => {
  const tool = (name) => ({ type: "message", message: { role: "tool", tool: name } });
  assert.ok(changesMarks(tool("add_cell")));
  assert.ok(changesMarks(tool("edit_cell")));
  assert.ok(changesMarks(tool("delete_cell")));
  assert.ok(!changesMarks(tool("run_code")));
  assert.ok(!changesMarks(tool("read_notebook")));
  assert.ok(changesMarks({ type: "event", event: { type: "tool.undone", call_id: "x" } }));
  assert.ok(!changesMarks({ type: "event", event: { type: "tool.ended" } }));
  assert.ok(!changesMarks({ type: "message", message: { role: "agent", text: "add_cell" } }));
  assert.ok(!changesMarks({ type: "delta" }));
});
