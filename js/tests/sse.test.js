// Server-sent events read from chunks cut anywhere.
import assert from "node:assert/strict";
import { test } from "node:test";

import { EventReader } from "../sse.js";

test("events split across chunks, comments skipped, multi-line data joined", () => {
  const reader = new EventReader();
  const text = ': keepalive\n\nevent: delta\ndata: {"a":\ndata: 1}\n\r\nevent: message\r\ndata: two\r\n\r\n';
  const out = [];
  for (const ch of text) out.push(...reader.push(ch)); // one character at a time
  assert.deepEqual(out, [
    { event: "delta", data: '{"a":\n1}' },
    { event: "message", data: "two" },
  ]);
});

test("an event is not dispatched before its blank line", () => {
  const reader = new EventReader();
  assert.deepEqual(reader.push("data: x\n"), []);
  assert.deepEqual(reader.push("\n"), [{ event: "message", data: "x" }]);
});
