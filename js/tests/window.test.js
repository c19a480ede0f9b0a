// A long chat a page at a time, and drawn a span at a time: a paged snapshot, earlier pages merged in as the person scrolls
// up, and a stream that resumed (what it missed, then the live parts), nothing lost or doubled.
import assert from "node:assert/strict";
import { test } from "node:test";

import { EventReader } from "../sse.js";
import { ChatState, buildItems, liveItem } from "../timeline.js";
import { DRAWN, NEWEST, STEP, spanOf } from "../window.js";

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

// Which items the view draws, for where the person reads (window.js): a span of at most DRAWN.

const ids = (from, to) => Array.from({ length: to - from }, (_, i) => `i${from + i}`);

test("a view opens on the newest items, at most DRAWN of them", () => {
  assert.deepEqual(spanOf(ids(0, 10), NEWEST), { first: "i0", last: "i9", from: 0, to: 10, follow: true });
  const span = spanOf(ids(0, 1000), NEWEST);
  assert.equal(span.to - span.from, DRAWN);
  assert.equal(span.last, "i999");
  assert.equal(span.follow, true);
  assert.deepEqual(spanOf([], NEWEST), { first: null, last: null, from: 0, to: 0, follow: true });
});

test("scrolling up draws the items above and drops those far below, down the other way round", () => {
  const all = ids(0, 1000);
  let span = spanOf(all, NEWEST);
  span = spanOf(all, span, "up");
  assert.equal(span.from, 1000 - DRAWN - STEP);
  assert.equal(span.to, 1000 - STEP); // the newest dropped: the span never grows over DRAWN
  assert.equal(span.follow, false);
  for (let i = 0; i < 20; i++) span = spanOf(all, span, "up");
  assert.deepEqual([span.from, span.to, span.first, span.last], [0, DRAWN, "i0", `i${DRAWN - 1}`]);
  // Again at the top: nothing changes (the edge asks the server for the page before).
  assert.deepEqual(spanOf(all, span, "up"), span);
  for (let i = 0; i < 20; i++) span = spanOf(all, span, "down");
  assert.deepEqual([span.from, span.to, span.follow], [1000 - DRAWN, 1000, true]);
  assert.deepEqual(spanOf(all, span, "down"), span);
});

test("an earlier page put in above keeps the span on the same items, then scrolling up reaches it", () => {
  let span = spanOf(ids(500, 600), NEWEST);
  const more = ids(250, 600); // the page before came
  span = spanOf(more, span);
  assert.deepEqual([span.first, span.last, span.from, span.to], ["i500", "i599", 250, 350]);
  span = spanOf(more, span, "up");
  assert.deepEqual([span.first, span.from, span.to], [`i${500 - STEP}`, 250 - STEP, 350]);
});

test("new items at the end: drawn while the span reaches it; the top dropped only when at the bottom", () => {
  const all = ids(0, DRAWN);
  let span = spanOf(all, NEWEST);
  // At the bottom: the newest come, the oldest drawn go.
  const grown = spanOf(ids(0, DRAWN + 5), span, null, true);
  assert.deepEqual([grown.from, grown.to, grown.follow], [5, DRAWN + 5, true]);
  // Reading higher up: what is read stays drawn; the span stops following and "Newest" is offered.
  const read = spanOf(ids(0, DRAWN + 5), span, null, false);
  assert.deepEqual([read.from, read.to, read.follow], [0, DRAWN, false]);
  // Below the cap, new items join a span that reaches the end whether at the bottom or not.
  span = spanOf(ids(0, 10), NEWEST);
  assert.deepEqual(spanOf(ids(0, 12), span).to, 12);
  // Newer items stay undrawn below a span that ends above them, until the person scrolls down.
  span = spanOf(ids(0, 1000), { first: "i0", last: "i299", from: 0, to: 300, follow: false });
  assert.deepEqual([span.from, span.to], [0, 300]);
  span = spanOf(ids(0, 1010), span, "newest");
  assert.deepEqual([span.from, span.to, span.follow], [1010 - DRAWN, 1010, true]);
});

test("an item that went away (folded under a reply) leaves the span where it was", () => {
  const all = ids(0, 50);
  const span = { first: "i10", last: "i19", from: 10, to: 20, follow: false };
  const fewer = all.filter((id) => id !== "i10" && id !== "i19");
  const next = spanOf(fewer, span);
  assert.deepEqual([next.from, next.to], [10, 20]);
  assert.ok(next.to - next.from <= DRAWN);
});

test("where items are heavy, fewer are drawn: the span keeps to the most it is given, a third a step", () => {
  const all = ids(0, 1000);
  let span = spanOf(all, NEWEST, null, true, 60);
  assert.deepEqual([span.from, span.to], [940, 1000]);
  span = spanOf(all, span, "up", false, 60);
  assert.deepEqual([span.from, span.to, span.follow], [920, 980, false]);
  // A span drawn with more than the most allowed now is cut at its bottom (the read line stays).
  span = spanOf(all, { first: "i100", last: "i399", from: 100, to: 400, follow: false }, null, false, 60);
  assert.deepEqual([span.from, span.to], [100, 160]);
});

test("a chat that came again shorter (a new snapshot) is drawn from its newest, never empty", () => {
  const span = { first: "i7500", last: "i7799", from: 7500, to: 7800, follow: false };
  const again = spanOf(ids(9850, 10000), span);
  assert.deepEqual([again.from, again.to, again.follow, again.first], [0, 150, true, "i9850"]);
});
