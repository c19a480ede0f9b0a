// Conch's agents in Jupyter Chat's @ list: which names it offers for the word being typed, and
// which shared copy of @jupyter/chat it takes (the page's singleton).
import assert from "node:assert/strict";
import { test } from "node:test";

import { PROVIDER_ID, agentCompletions, chosenVersion, commandCompletions, completionsFor, rosterNames, stillFollowing } from "../chat-agents.js";

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

test("a / at the start offers Conch's commands, each with what it does", () => {
  const all = commandCompletions("/", "/");
  assert.deepEqual(
    all.map((c) => c.name),
    ["/stop", "/continue", "/allow", "/deny"],
  );
  assert.ok(all.every((c) => c.providerId === PROVIDER_ID && c.description.startsWith("Conch: ")));
  assert.deepEqual(
    commandCompletions("/st", "/st").map((c) => c.name),
    ["/stop"],
  );
  assert.deepEqual(
    commandCompletions("/co", "/co").map((c) => c.name),
    ["/continue"],
  );
  assert.deepEqual(
    commandCompletions("/AL", " /AL").map((c) => c.name),
    ["/allow"],
  );
  // A command is a whole message: none offered within a sentence, or for another word.
  assert.deepEqual(commandCompletions("/stop", "please /stop"), []);
  assert.deepEqual(commandCompletions("/x", "/x"), []);
  assert.deepEqual(commandCompletions("/stop", "/stop"), []); // whole: Enter sends it
  assert.deepEqual(commandCompletions("/Deny", "/Deny"), []);
  assert.deepEqual(commandCompletions("stop", "stop"), []);
  assert.deepEqual(commandCompletions("/", undefined).length, 4);
});

test("the lists: agents after @, commands after /, nothing else asks the server", async () => {
  let asked = 0;
  const names = async () => {
    asked += 1;
    return ["Writer"];
  };
  assert.deepEqual(
    (await completionsFor({ currentWord: "@W" }, names)).map((c) => c.name),
    ["@Writer"],
  );
  assert.deepEqual(
    (await completionsFor({ currentWord: "/d", value: "/d" }, names)).map((c) => c.name),
    ["/deny"],
  );
  assert.deepEqual(await completionsFor({ currentWord: "word" }, names), []);
  assert.deepEqual(await completionsFor({ currentWord: null }, names), []);
  assert.equal(asked, 1);
});

test("a chat panel follows at its end, stops when scrolled up, and keeps its state as it grows", () => {
  const at = (top, height) => ({ top, height, client: 500 });
  assert.equal(stillFollowing(false, 0, at(980, 1500)), true); // 20 px from the end
  assert.equal(stillFollowing(true, 1000, at(400, 1500)), false); // the person scrolled up
  assert.equal(stillFollowing(true, 1000, at(1000, 1900)), true); // a reply grew below
  assert.equal(stillFollowing(false, 400, at(400, 1900)), false); // still where they left it
  assert.equal(stillFollowing(true, 1000, at(1200, 1900)), true);
});
