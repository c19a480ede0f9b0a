"""Agents write a live notebook: real JupyterLab 4 with jupyter-collaboration (the venv the tests
build, tests/live/env.py), two pages on one notebook — one in JupyterLab, one in Notebook 7.

The offline agent adds a cell and runs it, edits one, deletes one, in Auto; both pages show each
change within a moment (through the shared document, never the file under them); the user types
in cell 1 while the agent edits cell 3, and both survive a save and a reload; Undo puts a cell
back in both pages; the chat's view marks the cell an agent added, in JupyterLab and Notebook 7
(its badge goes with Undo); Ask asks and a no changes nothing; Read refuses; Stop during
`run_cell` interrupts the kernel and leaves the cell idle.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect

from ..support.browser import screenshot_path
from ..support.lab import Console, Lab, lab_folder, notebook, open_notebook, run_all, running_lab
from .env import live_env, live_python

pytestmark = [pytest.mark.browser, pytest.mark.timeout(600)]

BOOK = "live.ipynb"
DEMO = "demo.ipynb"  # the chat in the notebook itself, for the approval and Undo in the view
# Each cell of the page's notebook as the page holds it (its shared model).
CELLS = """() => {
  const panel = window.jupyterapp.shell.currentWidget;
  return Array.from(panel.content.model.cells).map(c => c.sharedModel.toJSON());
}"""
MOMENT = 5_000  # ms: "within a moment", with room for a loaded 2-core machine


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    notebooks = {
        BOOK: notebook("a = 1", "b = 2", "c = 3"),
        DEMO: notebook("%load_ext conch_jupyter", "%conch", "mine = 0"),
    }
    root = lab_folder(tmp_path_factory, "lab-live-cells", notebooks)
    python = live_python()
    with running_lab(root, offline_delay=0, python=python, env_extra=live_env()) as running:
        yield running


@pytest.fixture(scope="module")
def pages(lab: Lab, browser: Browser) -> Iterator[tuple[Page, Page]]:
    first = open_notebook(browser, f"{lab.url}lab/tree/{BOOK}?token={lab.token}")
    second = open_notebook(browser, f"{lab.url}notebooks/{BOOK}?token={lab.token}")
    yield first, second
    first.context.close()
    second.context.close()


@pytest.fixture(scope="module")
def chat(lab: Lab, pages: tuple[Page, Page]) -> str:
    with lab.client() as http:
        made = http.post(f"{lab.url}conch/api/conversations", json={"path": BOOK}).json()
        set_mode(lab, made["id"], "auto")
    return str(made["id"])


def set_mode(lab: Lab, chat: str, mode: str) -> None:
    with lab.client() as http:
        answer = http.patch(f"{lab.url}conch/api/conversations/{chat}", json={"mode": mode})
        assert answer.status_code == 200, answer.text


def say(lab: Lab, chat: str, text: str, *, wait: bool = True) -> dict[str, Any]:
    with lab.client() as http:
        answer = http.post(f"{lab.url}conch/api/conversations/{chat}/messages", json={"text": text})
        assert answer.status_code == 202, answer.text
    return settled(lab, chat) if wait else {}


def settled(lab: Lab, chat: str, seconds: float = 60) -> dict[str, Any]:
    deadline = time.monotonic() + seconds
    with lab.client() as http:
        while True:
            seen: dict[str, Any] = http.get(f"{lab.url}conch/api/conversations/{chat}").json()
            if not seen["busy"]:
                return seen
            assert time.monotonic() < deadline, seen
            time.sleep(0.1)


def tool_messages(seen: dict[str, Any]) -> list[dict[str, Any]]:
    return [m for m in seen["messages"] if m["role"] == "tool"]


def cells(page: Page) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = page.evaluate(CELLS)
    return found


def sources(page: Page) -> list[str]:
    return [c["source"] for c in cells(page)]


def both_show(
    pages: tuple[Page, Page], check: str, arg: Any = None, timeout: float = MOMENT
) -> None:
    """Wait until `check(cells, arg)` (JavaScript) holds in both pages."""
    script = f"arg => {{ const cells = ({CELLS})(); return ({check})(cells, arg); }}"
    for page in pages:
        page.wait_for_function(script, arg=arg, timeout=timeout)


def test_an_agent_adds_and_runs_a_cell_and_both_pages_show_it(
    lab: Lab, pages: tuple[Page, Page], chat: str
) -> None:
    seen = say(lab, chat, "@Researcher add and run a cell:\n```python\nprint(6 * 7)\n```")
    add, run = tool_messages(seen)[-2:]
    assert (add["tool"], add["state"], run["tool"], run["state"]) == (
        "add_cell",
        "ran",
        "run_cell",
        "ran",
    )
    assert "42" in run["output"]
    both_show(
        pages,
        """(cells) => cells.length === 4 && cells[3].source === "print(6 * 7)"
           && cells[3].execution_count > 0
           && JSON.stringify(cells[3].outputs).includes("42")
           && cells[3].metadata.conch && cells[3].metadata.conch.agent === "researcher" """,
    )
    pages[0].screenshot(path=screenshot_path("live-cells-added-lab"))
    pages[1].screenshot(path=screenshot_path("live-cells-added-notebook7"))


def test_the_user_types_in_cell_1_while_the_agent_edits_cell_3_and_both_survive(
    lab: Lab, pages: tuple[Page, Page], chat: str
) -> None:
    first, _second = pages
    third = cells(first)[2]["id"]
    editor = first.locator(".jp-Notebook .jp-Cell").nth(0).locator(".cm-content")
    editor.click()
    first.keyboard.press("End")
    say(lab, chat, f"@Researcher edit cell {third}:\n```python\nc = 30\n```", wait=False)
    first.keyboard.type("  # mine, typed while the agent edits", delay=20)
    seen = settled(lab, chat)
    assert tool_messages(seen)[-1]["tool"] == "edit_cell"
    assert tool_messages(seen)[-1]["state"] == "ran", tool_messages(seen)[-1]["output"]
    both_show(
        pages,
        """(cells) => cells[0].source === "a = 1  # mine, typed while the agent edits"
           && cells[2].source === "c = 30" """,
    )
    # A save and a reload: both changes are in the file and back in both pages.
    first.keyboard.press("Control+s")
    book = wait_for_file(lab, lambda book: book["cells"][0]["source"].endswith("the agent edits"))
    assert [c["source"] for c in book["cells"][:3]] == [
        "a = 1  # mine, typed while the agent edits",
        "b = 2",
        "c = 30",
    ]
    for page in pages:
        page.reload()
        page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60_000)
    # A reloaded page shows the notebook once its shared document is in: on a busy machine,
    # seconds after its first cell is drawn.
    both_show(
        pages,
        """(cells) => cells.length === 4 && cells[0].source.endsWith("the agent edits")
           && cells[2].source === "c = 30" """,
        timeout=60_000,
    )


def test_undo_puts_the_cell_back_in_both_pages(
    lab: Lab, pages: tuple[Page, Page], chat: str
) -> None:
    with lab.client() as http:
        seen = http.get(f"{lab.url}conch/api/conversations/{chat}").json()
        edit = [m for m in tool_messages(seen) if m["tool"] == "edit_cell"][-1]
        assert edit["undo"] is True
        answer = http.post(f"{lab.url}conch/api/conversations/{chat}/tools/{edit['call_id']}/undo")
        assert answer.status_code == 200, answer.text
    both_show(pages, """(cells) => cells[2].source === "c = 3" """)
    seen = settled(lab, chat)
    assert next(m for m in tool_messages(seen) if m["call_id"] == edit["call_id"])["undo"] is False
    assert "tool.undone" in [e["type"] for e in seen["events"]]


def test_an_agent_deletes_a_cell_and_both_pages_lose_it(
    lab: Lab, pages: tuple[Page, Page], chat: str
) -> None:
    added = cells(pages[0])[3]["id"]
    seen = say(lab, chat, f"@Researcher delete cell {added}")
    assert tool_messages(seen)[-1]["state"] == "ran", tool_messages(seen)[-1]["output"]
    both_show(pages, "(cells, id) => cells.length === 3 && cells.every(c => c.id !== id)", added)


def test_ask_asks_with_the_change_and_read_refuses(
    lab: Lab, pages: tuple[Page, Page], chat: str
) -> None:
    set_mode(lab, chat, "ask")
    say(lab, chat, "@Researcher add a cell:\n```python\nasked = 1\n```", wait=False)
    deadline = time.monotonic() + 60
    with lab.client() as http:
        while True:
            asking = http.get(f"{lab.url}conch/api/conversations/{chat}").json()["asking"]
            if asking:
                break
            assert time.monotonic() < deadline
            time.sleep(0.1)
        [entry] = asking
        assert {k: entry[k] for k in ("tool", "cell_id", "old", "new", "after")} == {
            "tool": "add_cell",
            "cell_id": None,
            "old": "",
            "new": "asked = 1",
            "after": None,
        }
        url = f"{lab.url}conch/api/conversations/{chat}/tools/{entry['call_id']}"
        assert http.post(url, json={"run": False}).status_code == 200
    settled(lab, chat)
    set_mode(lab, chat, "read")
    seen = say(lab, chat, "@Researcher add a cell:\n```python\nread = 1\n```")
    assert "Read mode" in tool_messages(seen)[-1]["output"]
    time.sleep(0.5)
    for page in pages:
        assert len(sources(page)) == 3
    set_mode(lab, chat, "auto")


def test_stop_during_run_cell_interrupts_and_leaves_the_cell_idle(
    lab: Lab, pages: tuple[Page, Page], chat: str
) -> None:
    code = "import time\nfor _ in range(600):\n    time.sleep(0.1)"
    say(lab, chat, f"@Researcher add and run a cell:\n```python\n{code}\n```", wait=False)
    deadline = time.monotonic() + 60
    with lab.client() as http:
        while True:
            working = http.get(f"{lab.url}conch/api/conversations/{chat}").json()["working"]
            if working and working["tool"] == "run_cell" and working["state"] == "running":
                break
            assert time.monotonic() < deadline
            time.sleep(0.1)
        time.sleep(1.0)
        assert http.post(f"{lab.url}conch/api/conversations/{chat}/round/stop").status_code < 300
    seen = settled(lab, chat)
    run = tool_messages(seen)[-1]
    assert (run["tool"], run["state"]) == ("run_cell", "skipped")
    both_show(pages, "(cells) => cells.length === 4 && cells[3].execution_state !== 'busy'")


def read_file(lab: Lab) -> dict[str, Any] | None:
    """The notebook's file as the contents API reads it now; None while it cannot say (mid-save
    it may answer with a model that has no `content` yet, or an error)."""
    with lab.client() as http:
        answer = http.get(f"{lab.url}api/contents/{BOOK}", params={"content": 1})
    model = answer.json() if answer.status_code == 200 else {}
    content = model.get("content") if isinstance(model, dict) else None
    if not isinstance(content, dict) or not isinstance(content.get("cells"), list):
        return None
    for cell in content["cells"]:
        if isinstance(cell["source"], list):
            cell["source"] = "".join(cell["source"])
    return content


def wait_for_file(lab: Lab, check: Any, seconds: float = 60) -> dict[str, Any]:
    """The saved file once `check` holds for it (a read mid-save is no answer yet: read again)."""
    deadline = time.monotonic() + seconds
    while True:
        book = read_file(lab)
        if book is not None and check(book):
            return book
        assert time.monotonic() < deadline, json.dumps(book)[:2000]
        time.sleep(0.2)


def test_in_the_chat_the_user_approves_an_added_cell_and_its_run_then_undoes_it(
    lab: Lab, browser: Browser
) -> None:
    # A workspace of its own: the default one would open live.ipynb too (the other pages' notebook),
    # and Run all would run that one.
    page = open_notebook(browser, f"{lab.url}lab/workspaces/demo/tree/{DEMO}?token={lab.token}")
    console = Console(page)
    run_all(page)
    chat = page.locator(".conch-chat").first
    expect(chat).to_have_attribute("data-source", "server", timeout=60_000)
    box = chat.locator(".conch-input")
    box.fill("@Researcher add and run a cell:\n```python\nprint(6 * 7)\n```")
    box.press("Enter")
    approval = chat.locator(".conch-approval")
    expect(approval).to_have_count(1, timeout=60_000)
    expect(approval.locator(".conch-approval-head")).to_have_text(
        "Researcher wants to add a code cell at the end"
    )
    expect(approval.locator(".conch-cell-change")).to_have_text("+ print(6 * 7)\n")
    chat.screenshot(path=screenshot_path("live-cells-approval-add"))
    approval.get_by_role("button", name="Add it").click()
    # The cell is in the notebook at once; then its run asks, showing the cell's code.
    page.wait_for_function(
        f"() => ({CELLS})().some(c => c.source === 'print(6 * 7)')", timeout=MOMENT
    )
    expect(approval.locator(".conch-approval-head")).to_contain_text(
        "wants to run cell", timeout=30_000
    )
    expect(approval.locator(".conch-cell-change")).to_have_text("  print(6 * 7)\n")
    chat.screenshot(path=screenshot_path("live-cells-approval-run"))
    approval.get_by_role("button", name="Run", exact=True).click()
    page.wait_for_function(
        f"""() => ({CELLS})().some(c => c.source === 'print(6 * 7)'
              && JSON.stringify(c.outputs).includes('42') && c.execution_count > 0)""",
        timeout=30_000,
    )
    added = chat.locator(".conch-tool[data-tool=add_cell]")
    expect(added).to_have_count(1, timeout=30_000)
    expect(added.locator("summary")).to_have_text("Researcher · add a cell · ran")
    # The chat keeps what the write changed: the cell's id and its text.
    expect(added.locator(".conch-cell-change")).to_have_text("+ print(6 * 7)\n")
    expect(added.locator(".conch-tool-label").first).to_contain_text("the change")
    # The view marks the cell the agent wrote, in the notebook itself (and no other cell).
    written = page.locator(".jp-Notebook .jp-Cell.conch-agent-cell")
    expect(written).to_have_count(1, timeout=MOMENT)
    expect(written.locator(".cm-content")).to_have_text("print(6 * 7)")
    badge = written.locator(".conch-cell-badge")
    expect(badge).to_have_text("written by Researcher")
    expect(badge).to_have_attribute(
        "title", re.compile(r"^Conch: Researcher wrote this cell in this notebook's Conch chat")
    )
    page.screenshot(path=screenshot_path("live-cells-added-and-ran"))
    # Notebook 7 on the same notebook: its chat view (the widget, live from the kernel) marks
    # the same cell there.
    classic = open_notebook(browser, f"{lab.url}notebooks/{DEMO}?token={lab.token}")
    marked = classic.locator(".jp-Notebook .jp-Cell.conch-agent-cell")
    expect(marked).to_have_count(1, timeout=30_000)
    expect(marked.locator(".conch-cell-badge")).to_have_text("written by Researcher")
    classic.screenshot(path=screenshot_path("live-cells-marked-notebook7"))
    # Undo, under the write: the added cell goes from the notebook, and Undo with it.
    added.get_by_role("button", name="Undo").click()
    page.wait_for_function(
        f"() => !({CELLS})().some(c => c.source === 'print(6 * 7)')", timeout=MOMENT
    )
    expect(added.get_by_role("button", name="Undo")).to_have_count(0, timeout=10_000)
    expect(page.locator(".conch-cell-badge")).to_have_count(0, timeout=MOMENT)
    expect(page.locator(".conch-agent-cell")).to_have_count(0)
    expect(classic.locator(".conch-cell-badge")).to_have_count(0, timeout=MOMENT)
    classic.context.close()
    # An edit of the user's own cell marks it; Undo of the edit takes the mark off again.
    mine = page.evaluate(f"() => ({CELLS})().find(c => c.source === 'mine = 0').id")
    box.fill(f"@Researcher edit cell {mine}:\n```python\nmine = 1\n```")
    box.press("Enter")
    expect(approval.locator(".conch-approval-head")).to_contain_text(
        "wants to change cell", timeout=30_000
    )
    approval.get_by_role("button", name="Change it").click()
    edited = page.locator(".jp-Notebook .jp-Cell.conch-agent-cell")
    expect(edited).to_have_count(1, timeout=MOMENT)
    expect(edited.locator(".cm-content")).to_have_text("mine = 1")
    edit = chat.locator(".conch-tool[data-tool=edit_cell]")
    edit.get_by_role("button", name="Undo").click()
    expect(page.locator(".conch-agent-cell")).to_have_count(0, timeout=MOMENT)
    page.wait_for_function(f"() => ({CELLS})().some(c => c.source === 'mine = 0')")
    assert console.errors == []
    page.context.close()
