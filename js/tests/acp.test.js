// Coding agents over ACP in the view: their permission questions are approvals with the kind,
// the title and the detail in full, and their tool lines read by title.
import assert from "node:assert/strict";
import { test } from "node:test";

import { acpAnnouncement, acpHead, kindWords } from "../acp.js";
import { acpCardWords } from "../settings-acp.js";
import { ToolState, toolItem } from "../tools.js";

const asking = {
  type: "tool.asking",
  call_id: "t_1",
  agent: "coder",
  name: "Coder",
  tool: "acp",
  kind: "execute",
  title: "Run make",
  detail: "$ rm -rf build && make",
};

test("a coding agent's question is an approval holding what it will do", () => {
  const tools = new ToolState();
  assert.equal(tools.take({ type: "event", event: asking }), true);
  const [shown] = tools.approvals();
  assert.deepEqual(shown, {
    call_id: "t_1",
    agent: "coder",
    name: "Coder",
    tool: "acp",
    kind: "execute",
    title: "Run make",
    detail: "$ rm -rf build && make",
  });
  assert.deepEqual(acpHead(shown), { who: "Coder", wants: " wants to run a command: ", title: "Run make" });
  assert.match(acpAnnouncement(shown), /Coder asks to run a command\. Allow or Don't allow/);
  tools.take({ type: "event", event: { type: "tool.ended", call_id: "t_1" } });
  assert.deepEqual(tools.approvals(), []);
});

test("its lines read by title, and every kind has words", () => {
  const item = toolItem({ id: "m1", agent: "coder", tool: "acp", title: "Edit analysis.py", kind: "edit", state: "skipped", text: "diff" }, "Coder");
  assert.equal(item.summary, "Coder · Edit analysis.py · not run");
  assert.equal(item.output, "diff");
  for (const kind of ["read", "edit", "delete", "move", "search", "execute", "think", "fetch", "other"]) assert.ok(kindWords(kind));
  assert.equal(kindWords(""), "act");
});

test("a coding agent's card says when it acts without asking", () => {
  const agent = { provider: { command: "opencode", args: ["acp"] }, acp: { started: true, problem: null } };
  assert.equal(acpCardWords(agent), "coding agent (ACP) · opencode acp · started");
  agent.acp = { ...agent.acp, acts_unasked: true };
  assert.equal(acpCardWords(agent), "coding agent (ACP) · opencode acp · started · acts without asking");
});
