// Controls that explain themselves: what each header control says, and where its tooltip goes.
import assert from "node:assert/strict";
import { test } from "node:test";

import { HINTS, placeUnder } from "../hints.js";

test("each mode says what it does, in the words the header uses", () => {
  assert.match(HINTS.ask, /^Ask: .*waits for your yes/);
  assert.match(HINTS.auto, /^Auto: .*without asking.*ask again\.$/);
  assert.match(HINTS.read, /^Read: .*refused\.$/);
  assert.match(HINTS.spend, /limit/);
  assert.match(HINTS.limit, /^Limit: .*dollars/);
});

test("a tooltip goes under its control, inside its host", () => {
  assert.deepEqual(placeUnder({ left: 40, bottom: 20 }, 100, 600), { left: 40, top: 24 });
  // Near the right edge it moves left to stay whole; wider than the host, it starts at 0.
  assert.deepEqual(placeUnder({ left: 550, bottom: 20 }, 100, 600), { left: 500, top: 24 });
  assert.deepEqual(placeUnder({ left: 10, bottom: 20 }, 700, 600), { left: 0, top: 24 });
});
