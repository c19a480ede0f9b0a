import assert from "node:assert/strict";
import { test } from "node:test";

import { sectionLocks } from "../policy.js";
import { namedValues, toolWords } from "../settings-tools.js";

test("a tool's annotations say what the one rule does with it", () => {
  assert.equal(toolWords({ readOnlyHint: true, openWorldHint: false }).label, "reads");
  assert.equal(toolWords({ readOnlyHint: true }).label, "reads, reaches out");
  assert.match(toolWords({ readOnlyHint: true }).words, /taints the chat/);
  assert.equal(toolWords(null).label, "no annotations: a change");
  assert.equal(toolWords({}).label, "no annotations: a change");
  assert.equal(toolWords({ destructiveHint: true, openWorldHint: false }).label, "changes");
  assert.doesNotMatch(toolWords({ destructiveHint: true, openWorldHint: false }).words, /taints/);
  assert.equal(toolWords({ destructiveHint: false }).label, "changes (not destructive)");
  assert.equal(toolWords({ readOnlyHint: "true" }).label, "changes"); // only true itself reads
});

test("NAME=value lines, values kept whole", () => {
  assert.deepEqual(namedValues(""), {});
  assert.deepEqual(namedValues("A=1\n\nB = x=y \n"), { A: "1", B: " x=y " });
  assert.throws(() => namedValues("no equals"), /NAME=value/);
  assert.throws(() => namedValues("=v"), /NAME=value/);
});

test("the policy key mcp locks Settings → Tools in words", () => {
  assert.deepEqual(sectionLocks({ mcp: false }).tools, ["Your own MCP servers are off on this server: set by your administrator."]);
  assert.match(sectionLocks({ mcp: { commands: ["uvx"], urls: [] } }).tools[0], /uvx: set by your administrator/);
  assert.deepEqual(sectionLocks({}).tools, []);
});

test("an MCP tool's taint says so in the header, live", async () => {
  const { ToolState, modeWords } = await import("../tools.js");
  const tools = new ToolState();
  tools.take({ type: "snapshot", conversation: { mode: "auto", messages: [] } });
  assert.equal(tools.tainted, false);
  assert.equal(tools.take({ type: "event", event: { type: "chat.tainted", kind: "tool", by: "web__fetch" } }), true);
  assert.equal(tools.tainted, true);
  assert.equal(modeWords("auto", tools.tainted, tools.taintKind).words, "Asking again: what one of your tools brought in is in this chat.");
  assert.equal(modeWords("auto", true).words, "Asking again: an outside agent's words are in this chat.");
});
