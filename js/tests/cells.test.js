// Agents that write the notebook, as the view follows them: the change an approval shows (a
// line diff), its words, the approval list and tool items for the cell tools.
import assert from "node:assert/strict";
import { test } from "node:test";

import { cellAskWords, lineDiff } from "../cells.js";
import { ToolState, toolItem } from "../tools.js";

test("a line diff keeps what is the same and marks what went and came", () => {
  assert.deepEqual(lineDiff("a = 1\nb = 2\nc = 3", "a = 1\nb = 20\nc = 3\nd = 4"), [
    { op: " ", text: "a = 1" },
    { op: "+", text: "b = 20" },
    { op: "-", text: "b = 2" },
    { op: " ", text: "c = 3" },
    { op: "+", text: "d = 4" },
  ]);
  assert.deepEqual(lineDiff("", "x"), [{ op: "+", text: "x" }]);
  assert.deepEqual(lineDiff("x", ""), [{ op: "-", text: "x" }]);
  // A long cell is shown before, then after, in full.
  const long = Array.from({ length: 500 }, (_, i) => `line ${i}`).join("\n");
  const diff = lineDiff(long, `${long}\nmore`);
  assert.equal(diff.length, 1001);
  assert.equal(diff.filter((l) => l.op === "-").length, 500);
});

test("each cell tool's approval says what it would do, with its own buttons", () => {
  assert.deepEqual(cellAskWords({ tool: "add_cell", cell_id: null, after: "c1", cell_type: "markdown" }), {
    head: " wants to add a markdown cell after cell c1",
    label: "The new cell",
    yes: "Add it",
    no: "Don't add",
  });
  assert.equal(cellAskWords({ tool: "add_cell" }).head, " wants to add a code cell at the end");
  assert.equal(cellAskWords({ tool: "edit_cell", cell_id: "c2" }).head, " wants to change cell c2");
  assert.equal(cellAskWords({ tool: "delete_cell", cell_id: "c2" }).yes, "Delete it");
  assert.equal(cellAskWords({ tool: "run_cell", cell_id: "c2" }).yes, "Run");
});

test("a cell tool asking is an approval, with the change it asks for", () => {
  const tools = new ToolState();
  tools.take({
    type: "event",
    event: { type: "tool.asking", call_id: "t_9", agent: "analyst", name: "Analyst", tool: "edit_cell", cell_id: "c2", old: "x = 1", new: "x = 2" },
  });
  const [asking] = tools.approvals();
  assert.deepEqual(
    { tool: asking.tool, cell_id: asking.cell_id, old: asking.old, new: asking.new },
    { tool: "edit_cell", cell_id: "c2", old: "x = 1", new: "x = 2" },
  );
});

test("a write's tool item carries the cell and whether Undo is offered", () => {
  const message = { id: "m2", role: "tool", tool: "add_cell", call_id: "t_2", state: "ran", cell_id: "c9", old: "", new: "y = 1", undo: true, output: "Added" };
  const item = toolItem(message, "Analyst");
  assert.deepEqual([item.cell_id, item.new, item.undo, item.summary], ["c9", "y = 1", true, "Analyst · add a cell · ran"]);
  assert.equal(toolItem({ ...message, undo: false }, "Analyst").undo, false);
});
