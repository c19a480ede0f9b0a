// The providers Settings offers: a local Ollama among them (saved as the OpenAI-compatible wire
// at Ollama's address, shown as Ollama again), each with an example model name.
import assert from "node:assert/strict";
import { test } from "node:test";

import { kindAllowed } from "../policy.js";
import { CHOICES, OLLAMA_URL, addressFor, choice, choiceAllowed, choiceOf, isOllama } from "../providers.js";

test("Ollama is offered, on the OpenAI-compatible wire, at its own address", () => {
  assert.deepEqual(
    CHOICES.map((c) => c.value),
    ["offline", "openai", "anthropic", "ollama", "acp"],
  );
  assert.equal(choice("ollama").kind, "openai");
  assert.equal(OLLAMA_URL, "http://localhost:11434/v1");
  assert.ok(CHOICES.filter((c) => c.value !== "acp").every((c) => c.example.length > 0));
  assert.match(choice("ollama").example, /^e\.g\. /);
});

test("a saved provider is shown as the choice it was made from", () => {
  assert.equal(choiceOf({ kind: "openai", base_url: "http://localhost:11434/v1" }), "ollama");
  assert.equal(choiceOf({ kind: "openai", base_url: "http://127.0.0.1:11434/v1/" }), "ollama");
  assert.equal(choiceOf({ kind: "openai", base_url: "https://api.example.com/v1" }), "openai");
  assert.equal(choiceOf({ kind: "openai", base_url: null }), "openai");
  assert.equal(choiceOf({ kind: "anthropic" }), "anthropic");
  assert.equal(choiceOf(null), "offline");
  assert.equal(isOllama("not a url"), false);
});

test("choosing Ollama fills its address in, and a typed address is kept", () => {
  assert.equal(addressFor("ollama", ""), OLLAMA_URL);
  assert.equal(addressFor("ollama", "http://gpu-box:11434/v1"), "http://gpu-box:11434/v1");
  assert.equal(addressFor("openai", OLLAMA_URL), ""); // the preset goes with its choice
  assert.equal(addressFor("openai", "https://my.proxy/v1"), "https://my.proxy/v1");
});

test("the administrator's policy locks Ollama with the openai kind or its address", () => {
  assert.equal(choiceAllowed({}, "ollama", kindAllowed), true);
  assert.equal(choiceAllowed({ providers: { kinds: ["offline"] } }, "ollama", kindAllowed), false);
  const onlyHosted = { providers: { kinds: ["openai"], base_urls: ["https://api.openai.com/v1"] } };
  assert.equal(choiceAllowed(onlyHosted, "ollama", kindAllowed), false);
  assert.equal(choiceAllowed(onlyHosted, "openai", kindAllowed), true);
  const local = { providers: { base_urls: [`${OLLAMA_URL}/`] } };
  assert.equal(choiceAllowed(local, "ollama", kindAllowed), true);
});
