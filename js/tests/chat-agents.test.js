// Conch's agents in Jupyter Chat's @ list: which users it offers for the word being typed, and
// which shared copy of @jupyter/chat it takes (the page's singleton).
import assert from "node:assert/strict";
import { test } from "node:test";

import { PROVIDER_ID, agentCompletions, chosenVersion } from "../chat-agents.js";

const users = [
  { username: "anonymous-1", display_name: "Ada", bot: false },
  { username: "conch", display_name: "Conch", bot: true },
  { username: "conch-researcher", display_name: "Researcher", bot: true },
  { username: "conch-a_12", display_name: "Deep Research", bot: true },
  { username: "conch-writer", display_name: "Writer", bot: true },
  { username: "jupyternaut", display_name: "Jupyternaut", bot: true },
  { username: "conch-person", display_name: "Rita", bot: false },
];

test("an @ offers Conch's agents, by name, and no one else", () => {
  const all = agentCompletions("@", users).map((c) => c.name);
  assert.deepEqual(all, ["@Deep Research", "@Researcher", "@Writer"]);
  assert.deepEqual(
    agentCompletions("@re", users).map((c) => c.name),
    ["@Researcher"],
  );
  assert.deepEqual(agentCompletions("@Wr", users)[0], {
    name: "@Writer",
    providerId: PROVIDER_ID,
    description: "Conch's agent",
    spaceOnAccept: true,
  });
});

test("a word that is no @ gets nothing", () => {
  for (const word of ["", null, undefined, "Re", "a@Re", "@Re@", "/stop"]) {
    assert.deepEqual(agentCompletions(word, users), [], String(word));
  }
  assert.deepEqual(agentCompletions("@Nobody", users), []);
});

test("the page's copy of @jupyter/chat is its highest version, the loaded one among equals", () => {
  const a = { get: () => "a" };
  const b = { get: () => "b" };
  const c = { get: () => "c", loaded: 1 };
  assert.equal(chosenVersion({ "0.9.0": a, "0.18.2": b }), b);
  assert.equal(chosenVersion({ "0.18.2": b, "0.18.2+x": c }), c);
  assert.equal(chosenVersion({}), undefined);
});
