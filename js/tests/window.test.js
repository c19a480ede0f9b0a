// A long chat a page at a time: a paged snapshot, earlier pages merged in as the person scrolls
// up, and a stream that resumed (what it missed, then the live parts), nothing lost or doubled.
import assert from "node:assert/strict";
import { test } from "node:test";

import { EventReader } from "../sse.js";
import { ChatState, buildItems, liveItem } from "../timeline.js";

const roster = { agents: [{ id: "researcher", name: "Researcher" }], outside: [] };
const msg = (n) => ({
  id: `m${n}`,
  role: n % 2 ? "agent" : "user",
  agent: n % 2 ? "researcher" : undefined,
  text: `t${n}`,
  html: `<p>t${n}</p>`,
  created: 100 + n,
});
const range = (from, to) => Array.from({ length: to - from }, (_, i) => msg(from + i));

test("a paged snapshot, then the pages before it, draw the whole chat in order once", () => {
  const state = new ChatState();
  state.take({ type: "snapshot", conversation: { messages: range(20, 30), events: [], earlier: true, roster } });
  assert.equal(state.earlier, true);
  assert.equal(state.first, "m20");
  state.take({
    type: "earlier",
    conversation: { messages: range(10, 20), events: [{ seq: 1, type: "round.started", named: ["researcher"], created: 110.5 }], earlier: true },
  });
  assert.equal(state.first, "m10");
  state.take({ type: "earlier", conversation: { messages: range(0, 10), events: [], earlier: false } });
  assert.equal(state.earlier, false);
  const ids = buildItems(state)
    .filter((i) => i.kind !== "round")
    .map((i) => i.id);
  assert.deepEqual(
    ids,
    range(0, 30).map((m) => m.id),
  );
  assert.equal(buildItems(state).filter((i) => i.kind === "round").length, 1);
});

test("a resumed stream keeps what was loaded and takes the live parts as they are now", () => {
  const state = new ChatState();
  state.take({ type: "snapshot", conversation: { messages: range(0, 4), events: [], earlier: false, roster, streaming: [] } });
  state.take({ type: "delta", reply: "r9", agent: "researcher", text: "Hel" });
  // The stream dropped; it resumed: a message it missed, then the live parts (the reply so far).
  state.take({ type: "message", message: msg(4) });
  state.take({
    type: "resumed",
    conversation: {
      round: { speaker: "researcher", replies: 0, limit: 8 },
      busy: true,
      roster,
      streaming: [{ reply: "r9", agent: "researcher", text: "Hello" }],
    },
  });
  state.take({ type: "delta", reply: "r9", agent: "researcher", text: " there" });
  assert.equal(state.messages.size, 5);
  assert.equal(liveItem(state)?.text, "Hello there");
  assert.equal(state.round?.speaker, "researcher");
});

test("the event reader keeps the last event id, across events without one", () => {
  const reader = new EventReader();
  reader.push("id: 3-1\ndata: {}\n\n");
  assert.equal(reader.id, "3-1");
  reader.push("event: delta\ndata: {}\n\n");
  assert.equal(reader.id, "3-1");
  reader.push("id: 4-1\ndata: {}\n\n");
  assert.equal(reader.id, "4-1");
});
