// Conch's agents in Jupyter Chat's @ list: which names it offers for the word being typed, and
// which shared copy of @jupyter/chat it takes (the page's singleton).
import assert from "node:assert/strict";
import { test } from "node:test";

import { PROVIDER_ID, agentCompletions, chosenVersion, rosterNames } from "../chat-agents.js";

const roster = {
  agents: [
    { id: "researcher", name: "Researcher" },
    { id: "a_12", name: "Deep Research" },
    { id: "writer", name: "Writer" },
  ],
  outside: [
    { id: "o_1", name: "Weather", clashes_with: null },
    { id: "o_2", name: "Writer", clashes_with: "writer" },
  ],
};

test("the names offered are your agents and outside agents that clash with none", () => {
  assert.deepEqual(rosterNames(roster), ["Researcher", "Deep Research", "Writer", "Weather"]);
  assert.deepEqual(rosterNames({}), []);
});

test("an @ offers the names that start with what follows it", () => {
  const names = rosterNames(roster);
  const all = agentCompletions("@", names).map((c) => c.name);
  assert.deepEqual(all, ["@Deep Research", "@Researcher", "@Weather", "@Writer"]);
  assert.deepEqual(
    agentCompletions("@re", names).map((c) => c.name),
    ["@Researcher"],
  );
  assert.deepEqual(agentCompletions("@Wr", names)[0], {
    name: "@Writer",
    providerId: PROVIDER_ID,
    description: "Conch's agent",
    spaceOnAccept: true,
  });
});

test("a word that is no @ gets nothing", () => {
  const names = rosterNames(roster);
  for (const word of ["", null, undefined, "Re", "a@Re", "@Re@", "/stop"]) {
    assert.deepEqual(agentCompletions(word, names), [], String(word));
  }
  assert.deepEqual(agentCompletions("@Nobody", names), []);
});

test("the page's copy of @jupyter/chat is its highest version, the loaded one among equals", () => {
  const a = { get: () => "a" };
  const b = { get: () => "b" };
  const c = { get: () => "c", loaded: 1 };
  assert.equal(chosenVersion({ "0.9.0": a, "0.18.2": b }), b);
  assert.equal(chosenVersion({ "0.18.2": b, "0.18.2+x": c }), c);
  assert.equal(chosenVersion({}), undefined);
});
