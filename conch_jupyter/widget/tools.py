"""Agents that work in the notebook, as the chat's items show them: a tool message as an item,
tool items moved under the reply they belong to, and the words for what an agent is doing with
a tool now ("Analyst is running code"). Pure; the kernel's mirror of the view's js/tools.js (for
the relay and the Python API), checked against it by tests/unit/test_view_js.py.
"""

from __future__ import annotations

from typing import Any

Item = dict[str, Any]

# How a call ended (tool.ended's state), in words.
_ENDINGS = {
    "ran": "ran",
    "failed": "failed",
    "skipped": "not run",
    "refused": "refused",
    "timeout": "stopped after 60 s",
}
_DOING = {
    "run_code": "code",
    "read_notebook": "read the notebook",
    "list_variables": "listed the variables",
}


def tool_item(message: Item, name: str) -> Item:
    """A tool message as a chat item: what ran, what came back, how it ended (drawn folded)."""
    tool, state = str(message.get("tool") or ""), str(message.get("state") or "")
    code = message.get("code")
    output = message.get("output")
    return {
        "kind": "tool",
        "id": str(message["id"]),
        "agent": str(message.get("agent") or ""),
        "name": name,
        "tool": tool,
        "call_id": str(message.get("call_id") or ""),
        "state": state,
        "summary": f"{name} · {_DOING.get(tool, tool)} · {_ENDINGS.get(state, state)}",
        "code": code if isinstance(code, str) else "",
        "output": str(output if output is not None else message.get("text", "")),
    }


def under_replies(items: list[Item]) -> list[Item]:
    """A turn's calls are logged before its reply is stored: each run of tool items goes after
    the next reply of the same agent (while that reply still streams, they stay above it)."""
    out: list[Item] = []
    held: list[Item] = []
    for item in items:
        if item.get("kind") == "tool":
            if held and held[0]["agent"] != item["agent"]:
                out += held
                held = []
            held.append(item)
            continue
        if held and item.get("kind") == "agent" and item.get("agent") == held[0]["agent"]:
            out += [item, *held]
            held = []
            continue
        out += held  # anything else first: the reply never came (stopped before a word)
        held = []
        out.append(item)
    return out + held


def working_words(working: Item | None, name: str) -> str:
    """What an agent is doing with a tool now, for the round card and the streaming reply."""
    if not working:
        return ""
    state, tool = working.get("state"), working.get("tool")
    if state == "asking":
        return f"{name} is waiting for your yes"
    if state == "waiting":
        return f"{name} is waiting for the kernel"
    if tool == "run_code":
        return f"{name} is running code"
    if tool == "read_notebook":
        return f"{name} is reading the notebook"
    if tool == "list_variables":
        return f"{name} is looking at the variables"
    return f"{name} is using a tool"
