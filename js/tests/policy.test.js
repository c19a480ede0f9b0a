// An administrator's policy as the view draws it: the sentences by each locked control, and
// the one request per server that asks what is locked.
import assert from "node:assert/strict";
import { test } from "node:test";

import { BY_ADMIN, budgetLock, kindAllowed, lockedOf, modeLock, policyOf, sectionLocks } from "../policy.js";

const CLASS = {
  modes: ["ask", "read"],
  max_chat_usd: 2,
  max_monthly_usd: 20,
  door: false,
  outside_hosts: false,
  providers: { kinds: ["openai"], base_urls: ["https://gateway.school.example/v1"] },
  acp: false,
};

test("nothing is locked without a policy", () => {
  assert.deepEqual(lockedOf({ locked: {} }), {});
  assert.deepEqual(lockedOf(null), {});
  assert.deepEqual(lockedOf({ locked: [] }), {});
  assert.equal(modeLock({}, "auto"), "");
  assert.equal(kindAllowed({}, "anthropic"), true);
  assert.deepEqual(sectionLocks({}), { agents: [], outside: [], pairings: [], tools: [] });
  assert.deepEqual(budgetLock({}), { chat: "", month: "" });
});

test("a mode turned off is said by its button", () => {
  assert.equal(modeLock(CLASS, "auto"), "Auto is off on this server: set by your administrator.");
  assert.equal(modeLock(CLASS, "ask"), "");
  assert.equal(modeLock(CLASS, "read"), "");
});

test("each section says what is locked there, ending with who set it", () => {
  const locks = sectionLocks(CLASS);
  assert.deepEqual(locks.agents, [
    `Providers allowed on this server: openai: ${BY_ADMIN}`,
    `Model addresses allowed on this server: https://gateway.school.example/v1: ${BY_ADMIN}`,
    `Coding agents over ACP are off on this server: ${BY_ADMIN}`,
  ]);
  assert.deepEqual(locks.outside, [`Outside agents are off on this server: ${BY_ADMIN}`]);
  assert.deepEqual(locks.pairings, [`The door is closed on this server, so no agent can be let in: ${BY_ADMIN}`]);
  const company = sectionLocks({ outside_hosts: ["agents.corp.example"], door_remote: false, acp: ["goose"] });
  assert.deepEqual(company.outside, [`Outside agents only at agents.corp.example on this server: ${BY_ADMIN}`]);
  assert.deepEqual(company.pairings, [`The door is closed to other computers on this server: ${BY_ADMIN}`]);
  assert.deepEqual(company.agents, [`Coding agents allowed on this server: goose: ${BY_ADMIN}`]);
  for (const words of [...locks.agents, ...locks.outside, ...locks.pairings]) assert.ok(words.endsWith(BY_ADMIN));
});

test("providers: only the kinds allowed can be chosen", () => {
  assert.equal(kindAllowed(CLASS, "openai"), true);
  assert.equal(kindAllowed(CLASS, "offline"), false);
  assert.equal(kindAllowed({ acp: false }, "acp"), false);
  assert.equal(kindAllowed({ acp: ["goose"] }, "acp"), true);
});

test("the budget fields' sentences", () => {
  assert.deepEqual(budgetLock(CLASS), {
    chat: `A chat's limit can be at most $2.00 on this server: ${BY_ADMIN}`,
    month: `The monthly budget can be at most $20.00 on this server: ${BY_ADMIN}`,
  });
});

test("the policy is asked once per server, and a server without /policy locks nothing", async () => {
  let asked = 0;
  const api = {
    base: "/one/conch/api/",
    request: async () => {
      asked += 1;
      return { locked: CLASS };
    },
  };
  assert.deepEqual(await policyOf(api), CLASS);
  assert.deepEqual(await policyOf(api), CLASS);
  assert.equal(asked, 1);
  const older = {
    base: "/older/conch/api/",
    request: async () => {
      throw new Error("404");
    },
  };
  assert.deepEqual(await policyOf(older), {});
});
