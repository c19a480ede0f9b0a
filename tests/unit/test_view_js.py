"""The view's own tests, run by the README's test command: a failing JS test fails it.

The pure parts of js/ (arc geometry, the @ picker, keyed reconciling, the event-stream reader,
the timeline and the folded line's words) have unit tests run with Node's own test runner; the
JSDoc types are checked with `tsc --noEmit` (checkJs, strict), their format and lint by Biome
(`npm run lint`). And the view's timeline
(js/timeline.js) and the kernel's mirror of it (conch_jupyter/widget/timeline.py, for the relay
and the Python API) must draw the same items from one event stream.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from conch_jupyter.widget.timeline import ChatState, build_items, live_item

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


DRAW_IN_NODE = """
import { ChatState, buildItems, liveItem } from "./js/timeline.js";
let text = "";
for await (const chunk of process.stdin) text += chunk;
const stream = JSON.parse(text);
const state = new ChatState();
const out = [];
for (const item of stream) {
  if (item === "check") out.push({ items: buildItems(state), live: liveItem(state) });
  else state.take(item);
}
console.log(JSON.stringify(out));
"""


def test_the_view_and_the_kernel_draw_the_same_items() -> None:
    stream = _stream()
    state, python = ChatState(), []
    for item in stream:
        if item == "check":
            python.append({"items": build_items(state), "live": live_item(state)})
        else:
            state.take(item)
    ran = _run(_node(), "--input-type=module", "-e", DRAW_IN_NODE, stdin=json.dumps(stream))
    assert ran.returncode == 0, ran.stderr[-3000:]
    javascript = json.loads(ran.stdout)
    assert javascript == python
    assert python[0]["live"]["text"] == "A *plan* for"
    assert python[0]["live"]["doing"] == "Writer is running code"
    assert python[0]["items"][1]["line"] == "Writer is running code · 3 of 8 replies"
    assert [i["kind"] for i in python[1]["items"]] == [
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
    assert python[1]["items"][-4]["via"] == "kernel"  # marked as sent from the kernel
    assert "via" not in python[1]["items"][0]  # the user's own words carry no mark
    assert python[1]["items"][-3]["code"] == "1 + 2"
    assert python[1]["items"][-2]["state"] == ""
    tool = python[1]["items"][-6]
    assert (tool["summary"], tool["code"], tool["output"]) == (
        "Writer · code · ran",
        "print(2 + 2)",
        "4",
    )
