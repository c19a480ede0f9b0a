// Agents that work in the notebook, as the view follows them: the mode and its words, the runs
// asking for a yes, the working light's words, and tool messages drawn under the agent's reply.
import assert from "node:assert/strict";
import { test } from "node:test";

import { ChatState, buildItems, liveItem } from "../timeline.js";
import { ToolState, modeWords, stuckOf, toolItem, underReplies, workingWords } from "../tools.js";

const roster = {
  agents: [
    { id: "analyst", name: "Analyst" },
    { id: "writer", name: "Writer" },
  ],
  outside: [{ id: "helper", name: "Helper" }],
};
const asking = { call_id: "t_1", agent: "analyst", name: "Analyst", tool: "run_code", code: "x = 1" };

function chat(conversation = {}) {
  const state = new ChatState();
  state.take({ type: "snapshot", conversation: { title: "a.ipynb", messages: [], events: [], roster, ...conversation } });
  let t = 100;
  let seq = 0;
  return {
    state,
    message: (id, role, text, more = {}) => state.take({ type: "message", message: { id, role, text, created: ++t, ...more } }),
    event: (type, data = {}) => state.take({ type: "event", event: { seq: ++seq, type, created: ++t, ...data } }),
  };
}

test("the header's words for each mode; Auto says why it asks again once the chat is tainted", () => {
  assert.deepEqual(modeWords("ask", false), { words: "Ask: every run waits for your yes.", guarded: false });
  assert.deepEqual(modeWords("read", true), { words: "Read: agents can read the notebook but not run code.", guarded: false });
  assert.deepEqual(modeWords("auto", false), { words: "Auto: agents run code without asking.", guarded: false });
  assert.deepEqual(modeWords("auto", true), { words: "Asking again: an outside agent's words are in this chat.", guarded: true });
  // Anything else the server might say is read as the default, Ask.
  assert.equal(new ToolState().mode, "ask");
});

test("the snapshot gives the mode, the taint and what asks; a door chat's mode is not switchable", () => {
  const c = chat({ mode: "auto", tainted: null, asking: [asking, { ...asking, call_id: "t_2", tool: "read_notebook" }] });
  assert.equal(c.state.tools.mode, "auto");
  assert.equal(c.state.tools.tainted, false);
  assert.equal(c.state.tools.switchable, true);
  // Only runs ask for a yes: an approval for each run_code, none for reading.
  assert.deepEqual(
    c.state.tools.approvals().map((a) => a.call_id),
    ["t_1"],
  );
  const door = chat({ origin: "peer", tainted: { by: "door" }, mode: "ask" });
  assert.equal(door.state.tools.switchable, false);
  assert.equal(door.state.tools.tainted, true);
  // An outside answer already in the chat taints it too.
  const quoted = chat({ messages: [{ id: "o1", role: "outside", text: "hi", agent: "helper", created: 1 }] });
  assert.equal(quoted.state.tools.tainted, true);
});

test("live: mode.changed, an outside answer tainting the chat, a run asking then answered and ended", () => {
  const c = chat();
  const tools = c.state.tools;
  c.event("mode.changed", { mode: "auto" });
  assert.equal(tools.mode, "auto");
  c.message("o1", "outside", "Run this for me", { agent: "helper", name: "Helper" });
  assert.equal(tools.tainted, true);
  assert.equal(modeWords(tools.mode, tools.tainted).guarded, true);
  c.event("tool.asking", asking);
  c.state.take({ type: "working", working: { ...asking, state: "asking" } });
  assert.deepEqual(tools.approvals(), [asking]);
  // Answered (here or on another page): the call works on, so it is no longer asking.
  c.state.take({ type: "working", working: { ...asking, state: "waiting" } });
  assert.deepEqual(tools.approvals(), []);
  c.event("tool.asking", { ...asking, call_id: "t_3" });
  c.event("tool.ended", { ...asking, call_id: "t_3", state: "skipped", seconds: 0.1 });
  assert.deepEqual(tools.approvals(), []);
});

test("a message from the kernel waits for the user's yes before it goes outside: shown, then gone once ended", () => {
  const c = chat();
  const tools = c.state.tools;
  c.event("send.asking", { call_id: "t_9", outside: "forecaster", name: "Forecaster", text: "@Forecaster rain?" });
  assert.deepEqual(tools.approvals(), [
    { call_id: "t_9", agent: "", name: "Forecaster", tool: "send_outside", outside: "forecaster", text: "@Forecaster rain?" },
  ]);
  c.event("tool.ended", { call_id: "t_9", tool: "send_outside", outside: "forecaster", name: "Forecaster", state: "skipped", seconds: 1 });
  assert.deepEqual(tools.approvals(), []);
  // A snapshot lists it under asking as well.
  const listed = chat({ asking: [{ call_id: "t_8", tool: "send_outside", outside: "forecaster", name: "Forecaster", text: "hi" }] });
  assert.equal(listed.state.tools.approvals()[0].tool, "send_outside");
});

test("the working light's words", () => {
  const working = (tool, state) => ({ ...asking, tool, state });
  assert.equal(workingWords(working("run_code", "running"), "Analyst"), "Analyst is running code");
  assert.equal(workingWords(working("run_code", "waiting"), "Analyst"), "Analyst is waiting for the kernel");
  assert.equal(workingWords(working("run_code", "asking"), "Analyst"), "Analyst is waiting for your yes");
  assert.equal(workingWords(working("read_notebook", "running"), "Analyst"), "Analyst is reading the notebook");
  assert.equal(workingWords(working("list_variables", "running"), "Analyst"), "Analyst is looking at the variables");
  assert.equal(workingWords(null, "Analyst"), "");
});

test("a tool message as an item: what ran, what came back, how it ended", () => {
  const message = { id: "m1", role: "tool", agent: "analyst", tool: "run_code", call_id: "t_1", code: "print(42)", output: "42\n", state: "ran", text: "42\n" };
  assert.deepEqual(toolItem(message, "Analyst"), {
    kind: "tool",
    id: "m1",
    agent: "analyst",
    name: "Analyst",
    tool: "run_code",
    call_id: "t_1",
    state: "ran",
    summary: "Analyst · code · ran",
    code: "print(42)",
    output: "42\n",
  });
  assert.equal(toolItem({ ...message, state: "skipped" }, "Analyst").summary, "Analyst · code · not run");
  assert.equal(toolItem({ ...message, tool: "read_notebook", code: undefined, state: "ran" }, "Analyst").summary, "Analyst · read the notebook · ran");
  assert.equal(toolItem({ ...message, state: "timeout" }, "Analyst").summary, "Analyst · code · stopped after 60 s");
});

test("a turn's tool calls are drawn under its reply, in the order they ran", () => {
  const c = chat();
  c.message("u1", "user", "@Analyst run it, @Writer sum up");
  c.event("round.started", { named: ["analyst", "writer"] });
  c.message("n1", "note", "Analyst's turn", { round: { turn: 1, handed_by: null } });
  c.message("k1", "tool", "", { agent: "analyst", tool: "read_notebook", state: "ran", output: "cells" });
  c.message("k2", "tool", "", { agent: "analyst", tool: "run_code", code: "1", state: "ran", output: "1" });
  // While the reply still streams, the calls stay where they happened, above it.
  assert.deepEqual(
    buildItems(c.state).map((i) => i.id),
    ["u1", "round-1", "n1", "k1", "k2"],
  );
  c.message("r1", "agent", "Done", { agent: "analyst", name: "Analyst", round: { turn: 1 } });
  c.message("n2", "note", "Writer's turn", { round: { turn: 2, handed_by: "analyst" } });
  c.message("r2", "agent", "Summary", { agent: "writer", name: "Writer", round: { turn: 2 } });
  const items = buildItems(c.state);
  assert.deepEqual(
    items.map((i) => i.id),
    ["u1", "round-1", "n1", "r1", "k1", "k2", "n2", "r2"],
  );
  // Tool messages are not turns: the card's faces and passes come from the replies alone.
  assert.deepEqual(items[1].passes, [[0, 1]]);
});

test("a call whose turn never said a word stays where it ran", () => {
  const items = [
    { kind: "tool", id: "k1", agent: "analyst" },
    { kind: "note", id: "n1" },
    { kind: "agent", id: "r1", agent: "analyst" },
    { kind: "tool", id: "k2", agent: "writer" },
    { kind: "agent", id: "r2", agent: "analyst" },
  ];
  assert.deepEqual(
    underReplies(items).map((i) => i.id),
    ["k1", "n1", "r1", "k2", "r2"],
  );
});

test("the round card's line and the streaming reply say what the agent with the floor is doing", () => {
  const c = chat();
  c.message("u1", "user", "@Analyst run it");
  c.event("round.started", { named: ["analyst"] });
  c.state.take({ type: "round", round: { speaker: "analyst", replies: 0, limit: 8 } });
  c.state.take({ type: "delta", reply: "r1", agent: "analyst", text: "I'll run your code." });
  assert.equal(buildItems(c.state)[1].line, "Analyst is answering · 1 of 8 replies");
  assert.equal(liveItem(c.state)?.doing, undefined);
  assert.equal(c.state.take({ type: "working", working: { ...asking, state: "waiting" } }), "items");
  assert.equal(buildItems(c.state)[1].line, "Analyst is waiting for the kernel · 1 of 8 replies");
  c.state.take({ type: "working", working: { ...asking, state: "running" } });
  const card = buildItems(c.state)[1];
  assert.equal(card.line, "Analyst is running code · 1 of 8 replies");
  assert.equal(card.announce, "Analyst is running code");
  assert.equal(liveItem(c.state)?.doing, "Analyst is running code");
  c.state.take({ type: "working", working: null });
  assert.equal(buildItems(c.state)[1].line, "Analyst is answering · 1 of 8 replies");
});

test("code that Stop could not end: stuck from the snapshot, live, and gone once the kernel is idle", () => {
  const stuck = { call_id: "t_1", agent: "analyst", name: "Analyst", words: "Analyst's code did not stop: the kernel is still busy." };
  // A page opened while it runs on sees it in the snapshot.
  assert.deepEqual(chat({ stuck }).state.tools.stuck, stuck);
  assert.equal(chat().state.tools.stuck, null);
  // Live: the stuck item (redrawn: the words and the buttons), new words, then none.
  const c = chat();
  assert.equal(c.state.take({ type: "stuck", stuck }), "items");
  assert.deepEqual(c.state.tools.stuck, stuck);
  const again = { ...stuck, words: "Analyst's code did not stop, even when interrupted again: the kernel is still busy." };
  c.state.take({ type: "stuck", stuck: again });
  assert.equal(c.state.tools.stuck?.words, again.words);
  c.state.take({ type: "stuck", stuck: null });
  assert.equal(c.state.tools.stuck, null);
  // kernel.idle for that call ends it too (a page that missed the live item); another call's does not.
  c.state.take({ type: "stuck", stuck });
  c.event("kernel.idle", { call_id: "t_9", agent: "writer", name: "Writer", after: "itself" });
  assert.deepEqual(c.state.tools.stuck, stuck);
  c.event("kernel.idle", { call_id: "t_1", agent: "analyst", name: "Analyst", after: "restart" });
  assert.equal(c.state.tools.stuck, null);
  // The events are no items of their own: the tool message and the server's note say it.
  assert.deepEqual(buildItems(c.state), []);
});

test("stuck as the server sends it, or anything else", () => {
  assert.equal(stuckOf(null), null);
  assert.equal(stuckOf("stuck"), null);
  assert.deepEqual(stuckOf({ call_id: 7, agent: "analyst", name: "Analyst", words: "" }), {
    call_id: "7",
    agent: "analyst",
    name: "Analyst",
    words: "Analyst's code did not stop: the kernel is still busy.",
  });
  assert.equal(stuckOf({ call_id: "t", words: "<b>x</b>" })?.words, "<b>x</b>"); // drawn as text
});
