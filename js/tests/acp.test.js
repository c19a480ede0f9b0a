// Coding agents over ACP in the view: their permission questions are approvals with the kind,
// the title and the detail in full, and their tool lines read by title.
import assert from "node:assert/strict";
import { test } from "node:test";

import { acpAnnouncement, acpHead, acpOutputParts, kindWords } from "../acp.js";
import { acpCardWords, envOf, foundWords } from "../settings-acp.js";
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

test("a coding agent's environment: one NAME=value a line, and a line that cannot be right said in words", () => {
  assert.deepEqual(envOf("A=1\nB=2=two\n\n  \nC_3=\n"), { env: { A: "1", B: "2=two", C_3: "" } });
  assert.deepEqual(envOf("A=1\nB 2\nC=3"), { problem: "Environment line 2 (“B 2”) has no “=”: write NAME=value, one a line." });
  assert.deepEqual(envOf("=1"), { problem: "Environment line 1 (“=1”) does not start with a NAME (letters, digits and _): write NAME=value, one a line." });
  assert.deepEqual(envOf("MY KEY=1"), {
    problem: "Environment line 1 (“MY KEY=1”) does not start with a NAME (letters, digits and _): write NAME=value, one a line.",
  });
  assert.deepEqual(envOf(""), { env: {} });
});

test("a coding agent's output reads once: its fenced blocks as code, the raw copy after them left out", () => {
  assert.deepEqual(acpOutputParts("$ ls\n```console\na.py\nb.py\n```\na.py\nb.py"), [
    { kind: "text", text: "$ ls" },
    { kind: "code", text: "a.py\nb.py" },
  ]);
  assert.deepEqual(acpOutputParts("Read it.\n````md\n```inner```\n````\nafter"), [
    { kind: "text", text: "Read it." },
    { kind: "code", text: "```inner```" },
    { kind: "text", text: "after" },
  ]);
  // The raw copy after the path the call read (what a read line holds: content, path, output).
  assert.deepEqual(acpOutputParts("```console\n3 rows\n```\ndata.csv\n3 rows"), [
    { kind: "code", text: "3 rows" },
    { kind: "text", text: "data.csv" },
  ]);
  // A fence still open runs to the end; text with no fence is one part.
  assert.deepEqual(acpOutputParts("```\nx = 1"), [{ kind: "code", text: "x = 1" }]);
  assert.deepEqual(acpOutputParts("plain\nlines"), [{ kind: "text", text: "plain\nlines" }]);
});

test("a coding agent's card says when it acts without asking", () => {
  const agent = { provider: { command: "opencode", args: ["acp"] }, acp: { started: true, problem: null } };
  assert.equal(acpCardWords(agent), "coding agent (ACP) · opencode acp · started");
  agent.acp = { ...agent.acp, acts_unasked: true };
  assert.equal(acpCardWords(agent), "coding agent (ACP) · opencode acp · started · acts without asking");
});

test("a coding agent's card shows the name and version it gave", () => {
  const said = { name: "@agentclientprotocol/claude-agent-acp", title: "Claude Agent", version: "0.101.0" };
  const agent = { provider: { command: "npx", args: ["-y", said.name] }, acp: { started: true, problem: null, said, known_as: "Claude Code" } };
  assert.equal(acpCardWords(agent), `coding agent (ACP) · npx -y ${said.name} · started · says it is ${said.name} 0.101.0`);
  // Not the agent its command looks like: unknown, said so.
  agent.acp = { ...agent.acp, said: { name: "my-agent", version: "9" }, known_as: null };
  assert.equal(acpCardWords(agent), `coding agent (ACP) · npx -y ${said.name} · started · says it is my-agent 9: unknown to Conch, no turn in a Read chat`);
  // An agent that says nothing: nothing is shown.
  agent.acp = { started: true, problem: null, said: null, known_as: null };
  assert.equal(acpCardWords(agent), `coding agent (ACP) · npx -y ${said.name} · started`);
});

test("a coding agent found on this machine says where it comes from", () => {
  const about = "Anthropic's coding agent (npm: @agentclientprotocol/claude-agent-acp; Node 22)";
  assert.equal(foundWords({ label: "Claude Code", command: "claude-agent-acp", args: [], about }), `Claude Code (claude-agent-acp) · ${about}`);
  assert.equal(foundWords({ label: "Gemini CLI", command: "gemini", args: ["--acp"] }), "Gemini CLI (gemini --acp)");
});
