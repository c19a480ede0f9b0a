"""The view's own tests, run by the README's test command: a failing JS test fails it.

The pure parts of js/ (arc geometry, the @ picker, keyed reconciling, the event-stream reader,
the timeline, the chat's two sources and the folded line's words) have unit tests run with
Node's own test runner; the JSDoc types are checked with `tsc --noEmit` (checkJs, strict), their
format and lint by Biome (`npm run lint`). And the relay: the timeline is built once, in the view,
so what the kernel passes on (its `stream` trait and the chunks it sends) must draw, through
js/chat-source.js's relayedChat, exactly what the same stream read by the view itself draws.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from conch_jupyter.client_base import ConchClientError
from conch_jupyter.widget import ChatWidget

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.timeout(120)


def _node() -> str:
    node = shutil.which("node")
    if node is None:
        pytest.fail("Node.js 20+ is needed to build and test the view (js/)")
    return node


def _run(*command: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command, cwd=ROOT, input=stdin, capture_output=True, text=True, timeout=100, check=False
    )


def test_the_views_unit_tests_pass() -> None:
    ran = _run(_node(), "--test", "js/tests/")
    assert ran.returncode == 0, ran.stdout[-6000:] + ran.stderr[-2000:]
    assert "# fail 0" in ran.stdout
    assert "# pass 0\n" not in ran.stdout


def test_the_views_jsdoc_types_check() -> None:
    from hatch_build import ensure_node_modules

    ensure_node_modules()
    ran = _run(_node(), "node_modules/typescript/bin/tsc", "--noEmit", "-p", "jsconfig.json")
    assert ran.returncode == 0, ran.stdout[-6000:] + ran.stderr[-2000:]


def test_the_view_is_formatted_and_lint_clean() -> None:
    """`npm run lint`: Biome's check (format, lint, import order) over js/, as biome.jsonc sets it.

    A format problem is fixed with `npx biome format --write js`, most lint findings with
    `npx biome check --write js`.
    """
    from hatch_build import ensure_node_modules

    _node()
    ensure_node_modules()
    npm = shutil.which("npm")
    if npm is None:
        pytest.fail("npm is needed to run the view's lint (npm run lint)")
    ran = _run(npm, "run", "--silent", "lint")
    assert ran.returncode == 0, ran.stdout[-6000:] + ran.stderr[-6000:]


# One stream, as the server sends it: a round with a handover, an outside answer, a reply
# still streaming while its agent runs code (a tool call, drawn under the reply once it settles);
# then the round ends.
ROSTER = {
    "agents": [{"id": "researcher", "name": "Researcher"}, {"id": "writer", "name": "Writer"}],
    "outside": [{"id": "helper", "name": "Helper"}],
}


def _stream() -> list[dict[str, Any]]:
    t = iter(range(100, 200))

    def message(mid: str, role: str, text: str, **more: Any) -> dict[str, Any]:
        body = {"id": mid, "role": role, "text": text, "created": float(next(t)), **more}
        if role not in ("note", "tool"):
            body["html"] = f"<p>{text}</p>"
        return {"type": "message", "message": body}

    def event(seq: int, kind: str, **data: Any) -> dict[str, Any]:
        return {
            "type": "event",
            "event": {"seq": seq, "type": kind, "created": float(next(t)), **data},
        }

    snapshot = {"title": "work/a.ipynb", "messages": [], "events": [], "roster": ROSTER}
    call = {"call_id": "t_1", "agent": "writer", "name": "Writer", "tool": "run_code"}
    call["code"] = "print(2 + 2)"
    ids = {k: call[k] for k in ("call_id", "agent", "name")}
    return [
        {"type": "snapshot", "conversation": snapshot},
        message("u1", "user", "@Researcher go, @Helper look, @Writer draft"),
        event(1, "round.started", named=["researcher", "helper", "writer"]),
        {"type": "round", "round": {"speaker": "researcher", "replies": 0, "limit": 8}},
        message("n1", "note", "Researcher's turn", round={"turn": 1, "handed_by": None}),
        message("r1", "agent", "Options", agent="researcher", name="Researcher", round={"turn": 1}),
        event(2, "round.asking", agent="helper"),
        {"type": "round", "round": {"speaker": "helper", "replies": 1, "limit": 8}},
        message("o1", "outside", "Found", agent="helper", name="Helper", round={"turn": 2}),
        {"type": "round", "round": {"speaker": "writer", "replies": 2, "limit": 8}},
        message("n2", "note", "Writer's turn", round={"turn": 3, "handed_by": "researcher"}),
        {"type": "delta", "reply": "w1", "agent": "writer", "text": "A *plan"},
        {"type": "delta", "reply": "w1", "agent": "writer", "text": "* for"},
        {"type": "working", "working": {**call, "state": "running"}},
        "check",
        message("k1", "tool", "4", round={"turn": 3}, output="4", state="ran", **call),
        {"type": "working", "working": None},
        message("w1", "agent", "A *plan* for", agent="writer", name="Writer", round={"turn": 3}),
        message("n3", "note", "You stopped it."),
        message("u2", "user", "@Helper again?", via="kernel"),  # sent with the kernel key
        message(
            "t1",
            "tool",
            "3\n",
            agent="writer",
            name="Writer",
            tool="run_code",
            call_id="c1",
            code="1 + 2",
            state="ran",
        ),
        message("t2", "tool", "x = 1", agent="writer", name="Writer", tool="list_variables"),
        {"type": "round", "round": None},
        event(3, "round.ended", turns=3, reason="stopped", words="Researcher, Helper and Writer"),
        # Writer's code caught Stop's interrupt: the chat is stuck (no item of its own: the
        # view's Interrupt again and Restart kernel are not items), until a note says it ended.
        {"type": "stuck", "stuck": {**ids, "words": "Writer's code did not stop."}},
        event(4, "kernel.stuck", **ids),
        event(5, "kernel.idle", after="restart", **ids),
        {"type": "stuck", "stuck": None},
        message("n4", "note", "The kernel was restarted: Writer's code is ended."),
        "check",
    ]


# What a model delivers to the view, in order: {"stream": [...]} (the trait synced) or
# {"message": {...}} (a custom message); "check" asks both sources what they draw.
DRAW_IN_NODE = """
import { fedChat, relayedChat } from "./js/chat-source.js";
let text = "";
for await (const chunk of process.stdin) text += chunk;
const { stream, wire } = JSON.parse(text);
const settle = () => new Promise((resolve) => setTimeout(resolve, 0));
const drawn = (state) => Object.fromEntries(
  ["items", "live", "title", "mentions", "round_running"].map((k) => [k, state.get(k)]));
const direct = fedChat({ tools: true });
const seen = [];
for (const item of stream) {
  if (item !== "check") direct.take(item);
  else { await settle(); seen.push(drawn(direct.state)); }
}
const handlers = {};
const model = {
  state: { stream: [], notice: "", problem: "" }, sent: [],
  get(name) { return this.state[name]; },
  set(name, value) { this.state[name] = value; },
  save_changes() {},
  on(event, cb) { (handlers[event] ||= []).push(cb); },
  off() {},
  send(content) { this.sent.push(content); },
};
const emit = (event, ...args) => { for (const cb of handlers[event] || []) cb(...args); };
const relay = relayedChat(model);
const relayed = [];
for (const step of wire) {
  if (step === "check") { await settle(); relayed.push(drawn(relay.state)); }
  else if (step.stream) { model.state.stream = step.stream; emit("change:stream"); }
  else emit("msg:custom", step.message);
}
console.log(JSON.stringify({ direct: seen, relayed, asked: model.sent }));
"""


class Relaying(ChatWidget):
    """The kernel side as it is, outside a kernel: what it sends the front end is written down."""

    def __init__(self) -> None:
        self.wire: list[Any] = []
        super().__init__("c1", client_factory=self._no_server)
        self.wire.clear()  # the first follow found no server (said in `problem`)
        self.observe(lambda change: self.wire.append({"stream": change["new"]}), "stream")

    @staticmethod
    def _no_server() -> Any:
        raise ConchClientError(0, "no_server", "No Conch server here.")

    def send(self, content: Any, buffers: Any = None) -> None:
        self.wire.append({"message": content})


def test_the_relay_passes_raw_items_and_the_view_draws_them_as_it_draws_its_own() -> None:
    stream = _stream()
    kernel = Relaying()
    assert kernel.problem == "No Conch server here."
    for n, item in enumerate(stream):
        if n == 12:  # the view is drawn, mid-reply, and asks the kernel to relay
            kernel._on_view_message(kernel, {"type": "relay"}, [])
        if item == "check":
            kernel.wire.append("check")
        else:
            kernel._take(item)
    streams = [step["stream"] for step in kernel.wire if step != "check" and "stream" in step]
    messages = [step["message"] for step in kernel.wire if step != "check" and "message" in step]
    # The trait carries the stream's own items: the snapshot first, each reply's chunks as one.
    assert all(s[0] == stream[0] for s in streams)
    assert [i for i in streams[-1] if i["type"] != "delta"] == [
        i for i in stream if i != "check" and i["type"] != "delta"
    ]
    assert [i for i in streams[-1] if i["type"] == "delta"] == [
        {"type": "delta", "reply": "w1", "agent": "writer", "text": "A *plan* for"}
    ]
    # Chunks go as messages of their own once a view relays, never before.
    assert [m["item"]["text"] for m in messages] == ["* for"]
    assert all(m["type"] == "item" for m in messages)
    assert kernel.messages[-1]["id"] == "n4"
    assert kernel.round is None

    data = {"stream": stream, "wire": kernel.wire}
    ran = _run(_node(), "--input-type=module", "-e", DRAW_IN_NODE, stdin=json.dumps(data))
    assert ran.returncode == 0, ran.stderr[-3000:]
    drawn = json.loads(ran.stdout)
    assert drawn["asked"] == [{"type": "relay"}]
    assert drawn["relayed"] == drawn["direct"]
    first, last = drawn["direct"]
    assert first["live"]["text"] == "A *plan* for"
    assert first["live"]["doing"] == "Writer is running code"
    assert first["items"][1]["line"] == "Writer is running code · 3 of 8 replies"
    assert (first["title"], first["round_running"]) == ("a.ipynb", True)
    assert [m["name"] for m in first["mentions"]] == ["Researcher", "Writer", "Helper"]
    assert [i["kind"] for i in last["items"]] == [
        "user",
        "round",
        "handover",
        "agent",
        "outside",
        "handover",
        "agent",
        "tool",
        "note",
        "user",
        "tool",
        "tool",
        "note",
    ]
    items = last["items"]
    assert items[1]["line"] == "Researcher, Helper and Writer"  # the server's words
    assert items[-4]["via"] == "kernel"  # marked as sent from the kernel
    assert "via" not in items[0]  # the user's own words carry no mark
    assert items[-3]["code"] == "1 + 2"
    assert items[-2]["state"] == ""
    tool = items[-6]
    assert (tool["summary"], tool["code"], tool["output"]) == (
        "Writer · code · ran",
        "print(2 + 2)",
        "4",
    )
    assert last["live"] is None


def draw_relayed(stream: list[dict[str, Any]]) -> dict[str, Any]:
    """What the relayed view draws from a kernel's `stream` trait (for tests with a real kernel)."""
    data = {"stream": [], "wire": [{"stream": stream}, "check"]}
    ran = _run(_node(), "--input-type=module", "-e", DRAW_IN_NODE, stdin=json.dumps(data))
    assert ran.returncode == 0, ran.stderr[-3000:]
    drawn: dict[str, Any] = json.loads(ran.stdout)["relayed"][0]
    return drawn
