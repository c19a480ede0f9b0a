// Continue a round stopped at its bound: the end line and the folded card's offer, and its words.
import assert from "node:assert/strict";
import { test } from "node:test";

import { ChatState, buildItems } from "../timeline.js";
import { continueWords } from "../words.js";

const roster = {
  agents: [
    { id: "researcher", name: "Researcher" },
    { id: "writer", name: "Writer" },
  ],
};

/** A chat whose round ended at its bound (replies), as the server streams it. */
function stopped() {
  const state = new ChatState();
  const budget = { round: null, chat: { spent: 2.1, limit: 5 }, month: { spent: 2.1, limit: 50 } };
  state.take({ type: "snapshot", conversation: { title: "t", messages: [], events: [], roster, budget } });
  let t = 100;
  let seq = 0;
  const message = (id, role, text, more = {}) => state.take({ type: "message", message: { id, role, text, html: text, created: ++t, ...more } });
  const event = (type, data = {}) => state.take({ type: "event", event: { seq: ++seq, type, created: ++t, ...data } });
  message("u1", "user", "@Researcher go");
  event("round.started", { named: ["researcher"] });
  for (let i = 0; i < 4; i++) {
    const agent = i % 2 ? "writer" : "researcher";
    message(`r${i}`, "agent", "@other", { agent, round: { turn: i + 1 }, cost: { usd: 0.21, input_tokens: 1, output_tokens: 1 } });
  }
  message("n9", "note", "The round ended: it reached 4 replies.");
  event("round.ended", { turns: 4, reason: "replies", words: "Researcher and Writer took turns · 4 replies · ended: it reached 4 replies" });
  return { state, event };
}

test("the words: the round's cost and the chat's, whole dollars without cents", () => {
  const bound = "The round stopped at its bound";
  assert.deepEqual(continueWords({ turns: 4, spent: 0.84, reason: "loop" }, { spent: 2.1, limit: 5 }), {
    head: bound,
    line: "4 replies · $0.84",
    button: "Continue (this chat: $2.10 of $5)",
  });
  assert.deepEqual(continueWords({ turns: 1, spent: 0 }, { spent: 0, limit: null }), { head: bound, line: "1 reply", button: "Continue (this chat: $0.00)" });
  assert.deepEqual(continueWords({ turns: 8, spent: 1.2, reason: "spend", limit: "round" }, null), {
    head: bound,
    line: "8 replies · $1.20",
    button: "Continue",
  });
  // Stopped by the chat's limit or the month's budget: raise it first.
  assert.equal(
    continueWords({ turns: 2, spent: 0.8, reason: "spend", limit: "chat" }, { spent: 2, limit: 2 }).head,
    "The round stopped at this chat's limit: raise it, then",
  );
  assert.equal(continueWords({ turns: 2, reason: "spend", limit: "month" }, null).head, "The round stopped at this month's budget: raise it, then");
});

test("a round stopped at its bound offers Continue on its folded card and on the end line at the bottom", () => {
  const { state } = stopped();
  assert.equal(state.take({ type: "continuable", continuable: { named: ["researcher"], reason: "replies", turns: 4, spent: 0.84 } }), "items");
  const items = buildItems(state, { offerContinue: true });
  const last = items[items.length - 1];
  assert.deepEqual(last, {
    kind: "continue",
    id: "continue-round-1",
    head: "The round stopped at its bound",
    line: "4 replies · $0.84",
    button: "Continue (this chat: $2.10 of $5)",
  });
  const card = items.find((i) => i.kind === "round");
  assert.equal(card.state, "folded");
  assert.deepEqual(card.continues, { line: "4 replies · $0.84", button: "Continue (this chat: $2.10 of $5)" });
  // Announced with the card's words, so a screen reader hears the offer as the round folds.
  assert.match(card.announce, /Continue \(this chat: \$2\.10 of \$5\) is offered at the end of the chat\.$/);
});

test("no offer where the view cannot continue (through the kernel), before the server offers it, or once a round starts", () => {
  const { state, event } = stopped();
  assert.equal(
    buildItems(state, { offerContinue: true }).some((i) => i.kind === "continue"),
    false,
  );
  state.take({ type: "continuable", continuable: { named: ["researcher"], reason: "loop", turns: 4, spent: 0 } });
  assert.equal(
    buildItems(state).some((i) => i.kind === "continue" || i.continues),
    false,
  );
  assert.equal(
    buildItems(state, { offerContinue: true }).some((i) => i.kind === "continue"),
    true,
  );
  event("round.started", { named: ["writer"], continues: true });
  const items = buildItems(state, { offerContinue: true });
  assert.equal(
    items.some((i) => i.kind === "continue" || i.continues),
    false,
  );
  assert.equal(items.filter((i) => i.kind === "round").length, 2);
});

test("a message since, or the server saying it can no longer be continued, takes the offer away", () => {
  const { state } = stopped();
  state.take({ type: "continuable", continuable: { named: ["researcher"], reason: "speaker", turns: 4, spent: 0.84 } });
  state.take({ type: "continuable", continuable: null });
  assert.equal(
    buildItems(state, { offerContinue: true }).some((i) => i.kind === "continue"),
    false,
  );
  // A snapshot (a stream that opened again) carries it too.
  state.take({ type: "snapshot", conversation: { messages: [], events: [], roster, continuable: { turns: 2, spent: 0 } } });
  assert.equal(state.continuable?.turns, 2);
});

test("the kernel's request to continue waits for your yes below the chat, and goes once answered", async () => {
  const { ToolState } = await import("../tools.js");
  const tools = new ToolState();
  const asked = { seq: 1, type: "continue.asking", call_id: "t_1", tool: "continue", named: ["writer"], names: ["Writer"] };
  assert.equal(tools.take({ type: "event", event: asked }), true);
  assert.deepEqual(tools.approvals(), [{ call_id: "t_1", agent: "", tool: "continue", names: ["Writer"] }]);
  tools.take({ type: "event", event: { seq: 2, type: "tool.ended", call_id: "t_1", tool: "continue", state: "ran" } });
  assert.deepEqual(tools.approvals(), []);
  // Listed in a snapshot (a page opened while it asks) as the server lists it.
  tools.take({ type: "snapshot", conversation: { asking: [{ call_id: "t_2", tool: "continue", named: ["writer"], names: ["Writer"] }] } });
  assert.deepEqual(
    tools.approvals().map((a) => a.call_id),
    ["t_2"],
  );
});
