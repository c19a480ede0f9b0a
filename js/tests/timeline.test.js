// The chat folded into items: order, round cards live and folded, the folded line's words.
import assert from "node:assert/strict";
import { test } from "node:test";

import { ChatState, buildItems, liveItem } from "../timeline.js";
import { foldedWords, initials } from "../words.js";

const roster = {
  agents: [
    { id: "researcher", name: "Researcher" },
    { id: "writer", name: "Writer" },
  ],
  outside: [{ id: "helper", name: "Helper" }],
};

function chat() {
  const state = new ChatState();
  state.take({ type: "snapshot", conversation: { title: "work/demo.ipynb", messages: [], events: [], roster } });
  let t = 100;
  let seq = 0;
  return {
    state,
    message: (id, role, text, more = {}) => state.take({ type: "message", message: { id, role, text, html: `<p>${text}</p>`, created: ++t, ...more } }),
    event: (type, data = {}) => state.take({ type: "event", event: { seq: ++seq, type, created: ++t, ...data } }),
    round: (round) => state.take({ type: "round", round }),
  };
}

test("the folded line's words", () => {
  assert.equal(foldedWords(["Researcher", "Writer", "Researcher"], 3), "Researcher and Writer took turns · 3 replies");
  assert.equal(foldedWords(["Writer"], 1), "Writer answered · 1 reply");
  assert.equal(foldedWords(["A", "B", "C"], 4), "A, B and C took turns · 4 replies");
  assert.equal(foldedWords([], 0), "The round ended before anyone answered");
  assert.equal(initials("Data Bot"), "DB");
  assert.equal(initials("writer"), "W");
});

test("a live round: the card where it began, the floor, the count, the streaming reply as text", () => {
  const c = chat();
  c.message("u1", "user", "@Researcher go, @Writer draft");
  c.event("round.started", { named: ["researcher", "writer"] });
  c.round({ speaker: "researcher", replies: 0, limit: 8 });
  c.message("n1", "note", "Researcher's turn", { round: { turn: 1, handed_by: null } });
  c.message("r1", "agent", "Options", { agent: "researcher", name: "Researcher", round: { turn: 1 } });
  c.round({ speaker: "writer", replies: 1, limit: 8 });
  c.message("n2", "note", "Researcher handed over to Writer", { round: { turn: 2, handed_by: "researcher" } });
  assert.equal(c.state.take({ type: "delta", reply: "w1", agent: "writer", text: "A **plan" }), "live");
  c.state.take({ type: "delta", reply: "w1", agent: "writer", text: "** for" });
  const items = buildItems(c.state);
  assert.deepEqual(
    items.map((i) => i.kind),
    ["user", "round", "handover", "agent", "handover"],
  );
  const card = items[1];
  assert.equal(card.state, "live");
  assert.deepEqual(
    card.faces.map((f) => f.name),
    ["Researcher", "Writer"],
  );
  assert.deepEqual(card.passes, [[0, 1]]);
  assert.equal(card.floor, 1);
  assert.equal(card.line, "Writer is answering · 2 of 8 replies");
  assert.equal(items[3].html, "<p>Options</p>");
  assert.deepEqual(liveItem(c.state), {
    kind: "agent",
    id: "w1",
    agent: "writer",
    name: "Writer",
    place: "turn 2 · handed over by Researcher",
    text: "A **plan** for",
    streaming: true,
  });
});

test("an ended round folds to the server's words; an outside agent is marked", () => {
  const c = chat();
  c.message("u1", "user", "@Helper look");
  c.event("round.started", { named: ["helper"] });
  c.event("round.asking", { agent: "helper" });
  c.message("o1", "outside", "Found it", { agent: "helper", name: "Helper", round: { turn: 1 } });
  c.round(null);
  c.event("round.ended", { turns: 1, reason: "done", words: "Helper answered · 1 reply" });
  const items = buildItems(c.state);
  const card = items.find((i) => i.kind === "round");
  assert.equal(card.state, "folded");
  assert.equal(card.line, "Helper answered · 1 reply");
  assert.deepEqual(card.faces, [{ id: "helper", name: "Helper", initials: "H", outside: true }]);
  assert.equal(items.find((i) => i.kind === "outside").name, "Helper");
  assert.equal(liveItem(c.state), null);
});

test("a snapshot after a dropped stream replaces everything: nothing lost, nothing doubled", () => {
  const c = chat();
  c.message("u1", "user", "hi");
  c.state.take({ type: "delta", reply: "w1", agent: "writer", text: "Hel" });
  const again = {
    title: "work/demo.ipynb",
    roster,
    messages: [{ id: "u1", role: "user", text: "hi", html: "<p>hi</p>", created: 1 }],
    events: [],
    streaming: [{ reply: "w1", agent: "writer", text: "Hello, wor" }],
  };
  c.state.take({ type: "snapshot", conversation: again });
  c.state.take({ type: "delta", reply: "w1", agent: "writer", text: "ld" });
  assert.deepEqual(
    buildItems(c.state).map((i) => i.id),
    ["u1"],
  );
  assert.equal(liveItem(c.state)?.text, "Hello, world");
  c.message("w1", "agent", "Hello, world", { agent: "writer", name: "Writer" });
  assert.equal(liveItem(c.state), null);
  assert.deepEqual(
    buildItems(c.state).map((i) => i.id),
    ["u1", "w1"],
  );
});

test("a round the server forgot (it restarted) folds once quiet, in words of the view's own", () => {
  const c = chat();
  c.event("round.started", { named: ["researcher"] });
  c.message("r1", "agent", "x", { agent: "researcher", name: "Researcher" });
  const card = buildItems(c.state)[0];
  assert.equal(card.state, "folded");
  assert.equal(card.line, "Researcher answered · 1 reply");
});

// What tests/test_widget_timeline.py checked of the kernel's mirror, checked of the one timeline.

test("the live card says what its picture shows", () => {
  const c = chat();
  c.message("u1", "user", "@Researcher find, @Writer draft. Take turns.");
  c.event("round.started", { named: ["researcher", "writer"] });
  c.round({ speaker: "researcher", replies: 0, limit: 8 });
  c.message("a1", "agent", "Options. @Writer", { agent: "researcher", round: { turn: 1, handed_by: null } });
  c.round({ speaker: "writer", replies: 1, limit: 8 });
  const card = buildItems(c.state)[1];
  assert.deepEqual(
    card.faces.map((f) => f.initials),
    ["R", "W"],
  );
  assert.equal(card.announce, "Writer is answering");
  assert.equal(card.picture, "In the round: Researcher and Writer. The floor passed from Researcher to Writer. Writer has the floor.");
});

test("between turns the live card says the round goes on; a loop of three draws every pass", () => {
  const c = chat();
  c.message("u1", "user", "@Researcher hi");
  c.event("round.started", { named: ["researcher"] });
  c.state.busy = true;
  assert.equal(buildItems(c.state)[1].line, "The round is starting");
  c.message("r1", "agent", "Hello", { agent: "researcher", round: { turn: 1, handed_by: null } });
  c.round(null);
  assert.equal(buildItems(c.state)[1].line, "The round is ending");
  const loop = chat();
  loop.state.names.ours.set("critic", "Critic");
  loop.message("u1", "user", "go");
  loop.event("round.started", { named: ["researcher"] });
  for (const [n, agent] of ["researcher", "writer", "critic", "researcher", "writer"].entries()) {
    loop.message(`m${n}`, "agent", "x", { agent, round: { turn: n + 1, handed_by: null } });
  }
  loop.event("round.ended", { turns: 5, reason: "replies", words: "w" });
  const card = buildItems(loop.state)[1];
  assert.deepEqual(
    card.faces.map((f) => f.name),
    ["Researcher", "Writer", "Critic"],
  );
  assert.deepEqual(card.passes, [
    [0, 1],
    [1, 2],
    [2, 0],
    [0, 1],
  ]);
});

test("an event taken twice changes nothing; an item of no known kind is no change", () => {
  const c = chat();
  c.message("u1", "user", "@Researcher hi");
  c.event("round.started", { named: ["researcher"] });
  const before = buildItems(c.state);
  assert.equal(c.state.take({ type: "event", event: [...c.state.events.values()][0] }), "items");
  assert.deepEqual(buildItems(c.state), before);
  assert.equal(c.state.take({ type: "keepalive" }), "");
});

test("notes are Conch's, the user's words are labelled, names fall back to what messages carried", () => {
  const c = chat();
  c.message("u1", "user", "hi");
  c.message("n1", "note", "You have no agents yet.");
  c.message("g1", "agent", "x", { agent: "gone", name: "Old Name" });
  c.message("g2", "agent", "y", { agent: "ghost" });
  const items = buildItems(c.state);
  assert.deepEqual([items[1].kind, items[1].text], ["note", "You have no agents yet."]);
  assert.equal(items[0].who, "You");
  assert.equal(buildItems(c.state, { userLabel: "The other agent" })[0].who, "The other agent");
  assert.deepEqual([items[2].name, items[3].name], ["Old Name", "ghost"]);
  assert.equal(initials("data-bot"), "DB");
  assert.deepEqual([initials("écrivain"), initials("")], ["É", "?"]);
});

test("cost in sight: a metered reply's quiet line, the round's spend on its card, live and folded", () => {
  const c = chat();
  c.state.take({ type: "budget", budget: { round: { spent: 0.5, limit: 1 }, chat: { spent: 0.5, limit: 5 }, month: { spent: 1, limit: 50 } } });
  c.message("u1", "user", "@Writer go");
  c.event("round.started", { named: ["writer"] });
  assert.equal(c.state.roundSpend, null); // the last round's spend is not this one's
  c.round({ speaker: "writer", replies: 0, limit: 8 });
  let card = buildItems(c.state).find((i) => i.kind === "round");
  assert.equal(card.line, "Writer is answering · 1 of 8 replies"); // nothing spent yet: not said
  const cost = { usd: 0.0042, input_tokens: 1200, output_tokens: 340, estimated: false };
  c.message("a1", "agent", "Done.", { agent: "writer", round: { turn: 1 }, cost });
  c.state.take({ type: "budget", budget: { round: { spent: 0.0042, limit: 1 }, chat: { spent: 0.5042, limit: 5 }, month: { spent: 1.0042, limit: 50 } } });
  c.round({ speaker: "writer", replies: 1, limit: 8 });
  const items = buildItems(c.state);
  assert.equal(items.find((i) => i.id === "a1").cost, "1.2k tokens in · 340 out · $0.004");
  card = items.find((i) => i.kind === "round");
  assert.equal(card.line, "Writer is answering · 2 of 8 replies · $0.004 of $1");
  c.round(null);
  c.event("round.ended", { reason: "done", turns: 1, words: "Writer answered · 1 reply" });
  card = buildItems(c.state).find((i) => i.kind === "round");
  assert.equal(card.line, "Writer answered · 1 reply · $0.004");
  // A reply Conch counted itself says "about"; an unmetered one has no line at all.
  c.message("a2", "agent", "Cut.", { agent: "writer", cost: { ...cost, usd: 0.25, estimated: true } });
  c.message("a3", "agent", "Free.", { agent: "writer" });
  const later = buildItems(c.state);
  assert.equal(later.find((i) => i.id === "a2").cost, "1.2k tokens in · 340 out · about $0.25");
  assert.equal(later.find((i) => i.id === "a3").cost, undefined);
});

test("a folded card keeps its round's cost for good: through the next round and a reload", () => {
  const c = chat();
  const cost = (usd) => ({ usd, input_tokens: 10, output_tokens: 5, estimated: false });
  c.message("u1", "user", "@Researcher @Writer go");
  c.event("round.started", { named: ["researcher", "writer"] });
  c.message("a1", "agent", "One.", { agent: "researcher", round: { turn: 1 }, cost: cost(0.0001) });
  c.message("a2", "agent", "Two.", { agent: "writer", round: { turn: 2 }, cost: cost(0.0001) });
  c.state.take({ type: "budget", budget: { round: { spent: 0.0002, limit: 1 } } });
  c.event("round.ended", { reason: "done", turns: 2, words: "Researcher and Writer took turns · 2 replies" });
  const first = () => buildItems(c.state).find((i) => i.kind === "round");
  assert.equal(first().line, "Researcher and Writer took turns · 2 replies · $0.0002");
  // The next round begins: the chat's budget has no round spend any more; the first card keeps its own.
  c.message("u2", "user", "@Writer again");
  c.event("round.started", { named: ["writer"] });
  assert.equal(first().line, "Researcher and Writer took turns · 2 replies · $0.0002");
  c.message("a3", "agent", "Three.", { agent: "writer", round: { turn: 1 }, cost: cost(0.003) });
  c.event("round.ended", { reason: "done", turns: 1, words: "Writer answered · 1 reply" });
  const cards = () =>
    buildItems(c.state)
      .filter((i) => i.kind === "round")
      .map((i) => i.line);
  assert.deepEqual(cards(), ["Researcher and Writer took turns · 2 replies · $0.0002", "Writer answered · 1 reply · $0.003"]);
  // A reload: a snapshot of the same chat, whose budget holds no round.
  const again = new ChatState();
  again.take({
    type: "snapshot",
    conversation: { messages: [...c.state.messages.values()], events: [...c.state.events.values()], roster, budget: { round: null } },
  });
  assert.deepEqual(
    buildItems(again)
      .filter((i) => i.kind === "round")
      .map((i) => i.line),
    cards(),
  );
  // An unmetered round says no cost.
  c.message("u3", "user", "@Writer free");
  c.event("round.started", { named: ["writer"] });
  c.message("a4", "agent", "Free.", { agent: "writer", round: { turn: 1 } });
  c.event("round.ended", { reason: "done", turns: 1, words: "Writer answered · 1 reply" });
  assert.equal(cards()[2], "Writer answered · 1 reply");
});

test("dollars and spend against a limit, in words", async () => {
  const { dollars, spentWords } = await import("../words.js");
  assert.equal(dollars(0), "$0.00");
  assert.equal(dollars(0.0004), "$0.0004");
  assert.equal(dollars(0.0042), "$0.004");
  assert.equal(dollars(1234.5), "$1,234.50");
  assert.equal(spentWords({ spent: 0.42, limit: 5 }), "$0.42 of $5.00");
  assert.equal(spentWords({ spent: 0.42, limit: null }), "$0.42 · no limit");
});

test("a roster item teaches the picker names added, renamed or removed elsewhere", () => {
  const c = chat();
  assert.deepEqual(
    c.state.names.mentions().map((m) => m.name),
    ["Researcher", "Writer", "Helper"],
  );
  const changed = c.state.take({ type: "roster", roster: { agents: [...roster.agents, { id: "fox", name: "Fox" }], outside: [] } });
  assert.equal(changed, "items");
  assert.deepEqual(
    c.state.names.mentions().map((m) => m.name),
    ["Researcher", "Writer", "Fox"],
  );
});
