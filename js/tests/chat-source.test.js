// The relay: the kernel's raw items (its `stream` trait and the chunks it sends) fed into the
// same ChatState a stream read by the view feeds, drawn from the same Store.
import assert from "node:assert/strict";
import { test } from "node:test";

import { fedChat, relayedChat } from "../chat-source.js";

/** An anywidget model, as much of it as a source uses. */
class Model {
  constructor(state) {
    this.state = { ...state };
    this.handlers = new Map();
    this.sent = [];
  }
  get(name) {
    return this.state[name];
  }
  set(name, value) {
    this.state[name] = value;
    this.emit(`change:${name}`);
  }
  save_changes() {}
  on(event, callback) {
    if (!this.handlers.has(event)) this.handlers.set(event, new Set());
    this.handlers.get(event).add(callback);
  }
  off(event, callback) {
    this.handlers.get(event)?.delete(callback);
  }
  send(content) {
    this.sent.push(content);
  }
  emit(event, ...args) {
    for (const callback of [...(this.handlers.get(event) || [])]) callback(...args);
  }
  listening() {
    return [...this.handlers.values()].reduce((n, set) => n + set.size, 0);
  }
}

const roster = {
  agents: [
    { id: "researcher", name: "Researcher" },
    { id: "writer", name: "Writer" },
  ],
  outside: [],
};
const snapshot = {
  type: "snapshot",
  conversation: { title: "work/demo.ipynb", messages: [], events: [], roster, mode: "auto", busy: false },
};
let t = 100;
const message = (id, role, text, more = {}) => ({
  type: "message",
  message: { id, role, text, html: `<p>${text}</p>`, created: ++t, ...more },
});
const started = () => ({ type: "event", event: { seq: 1, type: "round.started", named: ["researcher"], created: ++t } });
const floor = { type: "round", round: { speaker: "researcher", replies: 0, limit: 8 } };
const delta = (text) => ({ type: "delta", reply: "r1", agent: "researcher", text });
const settle = () => new Promise((resolve) => setTimeout(resolve, 0));

test("the relay draws the kernel's raw items as a stream read here draws them", async () => {
  const stream = [snapshot, message("u1", "user", "@Researcher go"), started(), floor, delta("Options: a")];
  const model = new Model({ stream, notice: "", problem: "" });
  const source = relayedChat(model);
  assert.equal(source.via, "kernel");
  assert.deepEqual(model.sent, [{ type: "relay" }]); // asks for the chunks of a streaming reply
  const direct = fedChat({ tools: true });
  for (const item of stream) direct.take(item);
  direct.redraw();
  for (const name of ["title", "items", "live", "round_running", "mentions"]) {
    assert.deepEqual(source.state.get(name), direct.state.get(name), name);
  }
  assert.equal(source.state.get("title"), "demo.ipynb");
  assert.equal(source.state.get("round_running"), true);
  assert.deepEqual(
    source.state.get("mentions").map((m) => m.name),
    ["Researcher", "Writer"],
  );
  assert.equal(source.state.get("items")[1].line, "Researcher is answering · 1 of 8 replies");
  // Only the user's own page draws the mode switch, the approvals, the stuck block.
  assert.equal(source.state.get("tools"), undefined);
  assert.equal(direct.state.get("tools").mode, "auto");
});

test("a chunk comes as a message; the next sync takes it all again and doubles nothing", async () => {
  const begun = started();
  const model = new Model({ stream: [snapshot, begun, floor, delta("Opt")], notice: "", problem: "" });
  const source = relayedChat(model);
  model.emit("msg:custom", { type: "item", item: delta("ions") });
  model.emit("msg:custom", { type: "send.failed", text: "not mine" }); // the view's, not the source's
  await settle();
  assert.equal(source.state.get("live").text, "Options");
  // The kernel joins a reply's chunks into one item in its trait.
  model.set("stream", [snapshot, begun, floor, delta("Options"), message("r1", "agent", "Options", { agent: "researcher" })]);
  assert.equal(source.state.get("live"), null);
  assert.deepEqual(
    source.state.get("items").map((i) => i.kind),
    ["round", "agent"],
  );
  model.set("stream", [snapshot, begun, floor, delta("Options a")]); // followed again: a new snapshot
  assert.equal(source.state.get("live").text, "Options a");
  assert.deepEqual(
    source.state.get("items").map((i) => i.kind),
    ["round"],
  );
});

test("what a send did is the kernel's words; closing stops listening", () => {
  const model = new Model({ stream: [], notice: "", problem: "" });
  const source = relayedChat(model);
  assert.deepEqual(source.state.get("items"), []); // nothing followed yet
  model.set("notice", "Your message ends the round once Researcher's reply is in.");
  assert.equal(source.state.get("notice"), "Your message ends the round once Researcher's reply is in.");
  source.send("hello");
  source.stop();
  assert.deepEqual(model.sent.slice(1), [{ type: "send", text: "hello" }, { type: "stop" }]);
  source.close();
  assert.equal(model.listening(), 0);
});

test("a relayed view loads earlier pages through the kernel and keeps them across syncs", async () => {
  const page = { ...snapshot, conversation: { ...snapshot.conversation, messages: [message("m9", "user", "late").message], earlier: true } };
  const model = new Model({ stream: [page], notice: "", problem: "" });
  const source = relayedChat(model);
  const loading = source.earlier();
  assert.deepEqual(model.sent.at(-1), { type: "earlier", before: "m9", limit: 250 });
  const older = { messages: [{ ...message("m1", "user", "early").message, created: 1 }], events: [], earlier: false };
  model.emit("msg:custom", { type: "item", item: { type: "earlier", conversation: older } });
  assert.equal(await loading, true);
  await settle();
  const ids = () => source.state.get("items").map((i) => i.id);
  assert.deepEqual(ids(), ["m1", "m9"]);
  model.set("stream", [page, message("m10", "agent", "next", { agent: "researcher" })]); // a sync
  assert.deepEqual(ids(), ["m1", "m9", "m10"]);
  assert.equal(await source.earlier(), false); // the first message is here: nothing before it
  source.close();
});
