"""%conch and %%conch in a real kernel that a real server started, and the chat widget's
kernel side (it follows the server's live stream) seen through its traits: the raw items it
keeps for a relayed view, drawn by the view's own code (js/chat-source.js, in Node)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from IPython.core.interactiveshell import InteractiveShell
from jupyter_client.blocking import BlockingKernelClient

from ..support.jupyter_process import JupyterProcess, notebook_session, running_jupyter
from ..unit.test_view_js import draw_relayed

pytestmark = pytest.mark.timeout(180)

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"

# What the kernel keeps of this notebook's chat once it has settled: the raw items a relayed
# view draws, and its own words.
CHAT_STATE = """
import json
from conch_jupyter.widget import this_chat
chat = this_chat()
await chat.settled()
relayed, unrelayed = chat._relaying, list(chat.stream)
await chat._relay({})  # what a view that draws through the kernel asks for first
print(json.dumps({"stream": chat.stream, "problem": chat.problem, "notice": chat.notice,
                  "relayed": relayed, "unrelayed": unrelayed}))
"""


def chat_state(kernel: Kernel) -> dict[str, Any]:
    """The chat as the relayed view draws it from the kernel's trait: its latest round card
    and the rest."""
    kept = kernel.run(CHAT_STATE).json()
    if not kept["relayed"]:
        # Until a view asks for the relay, the chat's items stay in the kernel: a view that
        # talks to the server itself reads them from there, not over the kernel's websocket.
        assert kept["unrelayed"] == []
    drawn = draw_relayed(kept["stream"])
    items = drawn["items"]
    cards = [i for i in items if i["kind"] == "round"]
    return {
        "title": drawn["title"],
        "kinds": [i["kind"] for i in items],
        "card": cards[-1] if cards else None,
        "cards": len(cards),
        "handovers": [i["text"] for i in items if i["kind"] == "handover"],
        "mentions": drawn["mentions"],
        "live": drawn["live"],
        "problem": kept["problem"],
        "notice": kept["notice"],
    }


# Waits (without holding the kernel up) until a new round has begun and its floor has changed
# hands; then stops waiting. The waits in these cells are deadlines in seconds, not counts of
# naps: on a loaded machine each nap takes longer than it asks for.
WAIT_FOR_A_HANDOVER = """
import asyncio, time
from conch_jupyter.widget import this_chat
chat = this_chat()
deadline = time.monotonic() + 60
while time.monotonic() < deadline:
    # A round running now (begun by the last message you sent), whose floor has changed
    # hands. %conch sends at once, so that round may already be under way when this cell starts.
    said = chat.messages
    yours = [n for n, m in enumerate(said) if m["role"] == "user"]
    if yours and chat.round is not None and any(
        "handed over" in m.get("text", "") for m in said[yours[-1]:] if m["role"] == "note"
    ):
        break
    await asyncio.sleep(0.02)
"""

# Prints a widget trait once it has a value (the widget's sends run on the kernel's loop).
PRINT_ONCE_SET = """
import asyncio, time
from conch_jupyter.widget import this_chat
chat = this_chat()
deadline = time.monotonic() + 60
while time.monotonic() < deadline:
    if getattr(chat, {name!r}):
        break
    await asyncio.sleep(0.02)
print(getattr(chat, {name!r}))
"""


@dataclass
class Ran:
    stdout: str = ""
    stderr: str = ""
    widgets: int = 0
    errors: list[str] = field(default_factory=list)

    def json(self) -> Any:
        return json.loads(self.stdout.strip().splitlines()[-1])


class Kernel:
    def __init__(self, client: BlockingKernelClient, server: JupyterProcess) -> None:
        self.client = client
        self.server = server

    def run(self, code: str, timeout: float = 60) -> Ran:
        ran = Ran()

        def hook(message: dict[str, Any]) -> None:
            kind, content = message["msg_type"], message["content"]
            if kind == "stream":
                if content["name"] == "stdout":
                    ran.stdout += content["text"]
                else:
                    ran.stderr += content["text"]
            elif kind == "display_data" and WIDGET_VIEW in content["data"]:
                ran.widgets += 1
            elif kind == "error":
                ran.errors.append("\n".join(content["traceback"]))

        try:
            reply = self.client.execute_interactive(code, timeout=timeout, output_hook=hook)
        except TimeoutError:
            # What the kernel printed so far and the server's log tail say where it hung.
            raise AssertionError(
                f"the cell ran longer than {timeout:g} s; it printed {ran}\n"
                + self.server.log_tail()
            ) from None
        if reply["content"]["status"] != "ok" and not ran.errors:
            ran.errors.append(str(reply["content"]))
        return ran


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JupyterProcess]:
    with running_jupyter(tmp_path_factory.mktemp("magic"), offline_delay=0.01) as process:
        yield process


@pytest.fixture(scope="module")
def kernel(server: JupyterProcess) -> Iterator[Kernel]:
    """A kernel started for a notebook session, as JupyterLab starts one."""
    with notebook_session(server, "talk.ipynb") as (_, client):
        kernel = Kernel(client, server)
        ran = kernel.run("%load_ext conch_jupyter")
        assert not ran.errors, f"{ran.errors}\n{server.log_tail()}"
        yield kernel


def test_a_message_starts_a_round_that_the_widget_follows_live(kernel: Kernel) -> None:
    ran = kernel.run("%conch @Researcher find options, @Writer draft it")
    assert (ran.widgets, ran.errors, ran.stderr) == (1, [], "")
    state = chat_state(kernel)
    assert state["title"] == "talk.ipynb"  # this notebook's chat
    assert state["kinds"][:3] == ["user", "round", "handover"]
    card = state["card"]
    assert card["state"] == "folded"
    assert card["line"] == "Researcher and Writer took turns · 2 replies"
    assert [f["name"] for f in card["faces"]] == ["Researcher", "Writer"]
    assert card["passes"] == [[0, 1]]
    assert state["handovers"] == ["Researcher's turn", "Writer's turn"]
    assert state["mentions"][:2] == [
        {"name": "Researcher", "outside": False},
        {"name": "Writer", "outside": False},
    ]
    assert state["live"] is None
    assert state["problem"] == ""


def test_the_notebooks_chat_works_in_this_kernel_after_your_yes(
    server: JupyterProcess, kernel: Kernel
) -> None:
    """%conch makes the chat with the notebook's path, so an agent's run lands in this kernel."""
    ran = kernel.run("%%conch\n@Writer please run:\n```python\nmade_by_writer = 6 * 7\n```")
    assert (ran.widgets, ran.errors) == (1, [])
    with server.client() as http:
        [chat] = [
            c
            for c in http.get(server.api("conversations")).json()["conversations"]
            if c["path"] == "talk.ipynb"
        ]
        assert chat["mode"] == "ask"
        asking: list[dict[str, Any]] = []
        for _ in range(300):
            asking = http.get(server.api(f"conversations/{chat['id']}")).json()["asking"]
            if asking:
                break
            time.sleep(0.05)
        [entry] = asking
        assert entry["code"] == "made_by_writer = 6 * 7"
        assert "NameError" in "".join(kernel.run("made_by_writer").errors)  # not before the yes
        answer = http.post(
            server.api(f"conversations/{chat['id']}/tools/{entry['call_id']}"), json={"run": True}
        )
        assert answer.status_code == 200
        # Not `await chat.settled()` in a cell: the agent's run waits for the user's cells.
        for _ in range(300):
            done = http.get(server.api(f"conversations/{chat['id']}")).json()
            if not done["busy"]:
                break
            time.sleep(0.05)
    tool = [m for m in done["messages"] if m["role"] == "tool"]
    assert [(m["state"], m["output"]) for m in tool] == [("ran", "(no output)")]
    ran = kernel.run("print(made_by_writer)")
    assert ran.stdout.strip() == "42", ran


def test_a_cell_message_hands_over_and_stop_ends_the_round(kernel: Kernel) -> None:
    ran = kernel.run("%%conch\n@Researcher and @Writer, take turns on a plan for a rainy weekend.")
    assert (ran.widgets, ran.errors) == (1, [])
    ran = kernel.run(WAIT_FOR_A_HANDOVER + "%conch stop")
    # Plain words, as the cell's normal output (not a red box).
    assert (ran.stdout.strip(), ran.stderr) == ("Stopped the round.", "")
    state = chat_state(kernel)
    card = state["card"]
    assert card["state"] == "folded"
    assert card["line"].endswith("· ended: you stopped it")
    assert "Researcher handed over to Writer" in state["handovers"]
    ran = kernel.run("%conch stop")
    assert (ran.stdout.strip(), ran.stderr) == ("No round is running.", "")


def test_a_question_ending_in_a_question_mark_is_sent(kernel: Kernel) -> None:
    ran = kernel.run("%conch @Researcher what is in this notebook?")
    assert (ran.widgets, ran.errors, ran.stderr) == (1, [], "")
    code = (
        "from conch_jupyter.widget import this_chat\n"
        "chat = this_chat()\n"
        "await chat.settled()\n"
        "said = [m for m in chat.messages if m['role'] == 'user']\n"
        "print(said[-1]['text'])"
    )
    ran = kernel.run(code)
    assert not ran.errors, ran.errors
    assert ran.stdout.strip().splitlines()[-1] == "@Researcher what is in this notebook?"
    ran = kernel.run(
        "%reload_ext conch_jupyter\n"
        "from conch_jupyter.magic import questions_sent\n"
        "print(get_ipython().input_transformers_cleanup.count(questions_sent))"
    )
    assert (ran.stdout.strip(), ran.errors) == ("1", [])  # loaded again: still read once


def test_writing_while_a_round_runs_ends_it_and_says_so(kernel: Kernel) -> None:
    ran = kernel.run(
        "%conch @Writer and @Researcher, discuss it once more.\n"
        + WAIT_FOR_A_HANDOVER
        + "%conch Thanks, that is enough."
    )
    assert not ran.errors
    ran = kernel.run(PRINT_ONCE_SET.format(name="notice"))
    assert ran.stdout.strip().startswith("Your message ends the round once ")
    assert ran.stdout.strip().endswith("'s reply is in.")
    state = chat_state(kernel)
    assert state["card"]["line"].endswith("· ended: you wrote")
    assert state["kinds"][-1] in ("agent", "note")  # the last message was answered too


def test_a_long_chat_is_followed_from_a_page_and_its_messages_read_whole(kernel: Kernel) -> None:
    """The kernel follows a chat from a page of its last messages (here 3); `messages` still
    gives all of them, the earlier ones read from the server page by page."""
    code = (
        "import conch_jupyter.widget.chat as widget_chat\n"
        "from conch_jupyter.client import ConchClient\n"
        "widget_chat.FOLLOW_PAGE = 3\n"
        "with ConchClient.from_environment() as c:\n"
        "    made = c.create_conversation('long one')['id']\n"
        "w = widget_chat.ChatWidget(made)\n"
        "for n in range(4):\n"
        "    w.post(f'@Writer line {n}')\n"
        "    await w.settled()\n"
        "w2 = widget_chat.ChatWidget(made)\n"
        "await w2.settled()\n"
        "with ConchClient.from_environment() as c:\n"
        "    whole = [m['id'] for m in c.conversation(made)['messages']]\n"
        "    page = c.conversation(made, limit=3)\n"
        "sent = []\n"
        "w2.send = sent.append  # what a relayed view that scrolled up is sent\n"
        "first = next(iter(w2._chat.messages))\n"
        "await w2._earlier({'before': first, 'limit': 2})\n"
        "relayed = [m['id'] for m in sent[0]['item']['conversation']['messages']]\n"
        "print(len(w2._chat.messages), w2._chat.earlier, page['earlier'],\n"
        "      [m['id'] for m in w2.messages] == whole, len(whole),\n"
        "      relayed == whole[whole.index(first) - 2 : whole.index(first)])"
    )
    ran = kernel.run(code)
    assert not ran.errors, ran.errors
    followed, earlier, paged, same, count, relayed = ran.stdout.strip().splitlines()[-1].split()
    assert (followed, earlier, paged, same, relayed) == ("3", "True", "True", "True", "True")
    assert int(count) >= 8


def test_the_view_messages_go_through_one_dispatcher(kernel: Kernel) -> None:
    code = (
        "from conch_jupyter.widget import this_chat\n"
        "chat = this_chat()\n"
        "chat._on_view_message(chat, {'type': 'no such thing'}, [])\n"
        "chat._on_view_message(chat, {'type': 'send', 'text': '@Writer one line, please'}, [])\n"
        "await chat.settled()\n"
        "print(chat.messages[-1]['role'], chat.messages[-1].get('name'))"
    )
    ran = kernel.run(code)
    assert not ran.errors, ran.errors
    assert ran.stdout.strip().splitlines()[-1] == "agent Writer"


def test_settings_widgets_show_and_say_what_the_server_lacks(kernel: Kernel) -> None:
    for command in ("agents", "outside", "pairings"):
        ran = kernel.run(f"%conch {command}")
        assert (ran.widgets, ran.errors, ran.stderr) == (1, [], ""), command
    code = (
        "import asyncio, json\n"
        "from ipywidgets import Widget\n"
        "from conch_jupyter.widget import SettingsWidget\n"
        "shown = [w for w in list(Widget.widgets.values()) if isinstance(w, SettingsWidget)]\n"
        "w = shown[-1]\n"
        "await w.acting()\n"
        "print(json.dumps({'section': w.section, 'agents': [a['name'] for a in w.agents],\n"
        "  'outside': w.outside, 'pairings': w.pairings, 'unavailable': w.unavailable,\n"
        "  'problem': w.problem}))"
    )
    state = kernel.run(code).json()
    assert state["section"] == "pairings"
    assert state["agents"] == ["Researcher", "Writer"]
    assert not any(state["problem"].values())
    # Outside agents and pairings may not have landed on this server yet: then it says so.
    if state["outside"] is None:
        assert state["unavailable"]["outside"] == "Outside agents are not available on this server."
    if state["pairings"] is None:
        assert state["unavailable"]["pairings"].endswith("not available on this server.")


def test_user_mistakes_are_said_in_words_not_tracebacks(kernel: Kernel) -> None:
    ran = kernel.run("%%conch\n   \n")
    assert ran.stderr.strip() == "Write the message in the cell, below %%conch."
    assert not ran.errors
    # The server refuses it: the chat says why, as it would for the composer.
    ran = kernel.run("%conch " + "x" * 17_000 + "\n" + PRINT_ONCE_SET.format(name="problem"))
    assert (ran.errors, ran.stderr) == ([], "")
    assert ran.stdout.strip() == "text: String should have at most 16000 characters."


def test_without_a_server_the_magic_says_so(monkeypatch: pytest.MonkeyPatch, capsys: Any) -> None:
    monkeypatch.delenv("JPY_PARENT_PID", raising=False)
    shell = InteractiveShell.instance()
    try:
        shell.run_line_magic("load_ext", "conch_jupyter")
        shell.run_line_magic("conch", "")
        shell.run_line_magic("conch", "stop")
        shell.run_line_magic("conch", "@Writer hello")
    finally:
        InteractiveShell.clear_instance()
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 3
    assert all(line.startswith("No Jupyter server with Conch was found") for line in err)


def test_the_extension_entry_point_is_the_package() -> None:
    import conch_jupyter

    assert callable(conch_jupyter.load_ipython_extension)
    assert Path(conch_jupyter.__file__).parent.joinpath("widget", "static", "widget.js").exists()


SETTINGS_ROUND_TRIP = """
import json
from conch_jupyter.widget import SettingsWidget
from conch_jupyter.client import AsyncConchClient
TOKEN = {token!r}
factory = (lambda: AsyncConchClient({url!r}, token=TOKEN)) if TOKEN else None
w = SettingsWidget("agents", client_factory=factory)
shown = []
w.send = lambda content, buffers=None: shown.append(content)
async def act(**content):
    w._on_view_message(w, content, [])
    await w.acting()
await act()
agent = {{"name": "Critic", "persona": "Finds holes.", "provider": {{"kind": "offline"}}}}
await act(type="agent.save", id=None, agent=agent)
await act(type="agent.save", id="critic", agent={{"persona": "Finds the holes."}})
after_edit = [a["persona"] for a in w.agents if a["id"] == "critic"]
await act(type="agent.save", id=None, agent={{"name": "Writer"}})
taken = w.problem["agents"]
await act(type="agent.remove", id="critic")
names = [a["name"] for a in w.agents]
w.section = "outside"
await act(type="outside.add", paste="not an address")
outside_problem = w.problem.get("outside")
w.section = "pairings"
await act(type="pairing.add", agents=["writer"], remote=False)
made = [m for m in shown if m.get("type") == "pairing.created"]
pairing = made[0]["id"] if made else None
if pairing:
    await act(type="pairing.said", id=pairing)
said = w.said
traits = json.dumps({{k: getattr(w, k) for k in ("agents", "outside", "pairings", "said")}})
key_in_traits = bool(made) and made[0]["key"] in traits
if pairing:
    await act(type="pairing.remove", id=pairing)
print(json.dumps({{
    "after_edit": after_edit, "taken": taken, "names": names, "outside_problem": outside_problem,
    "made": [sorted(m) for m in made], "said": said, "key_in_traits": key_in_traits,
    "pairings": w.pairings, "done": [m for m in shown if m.get("type") == "done"][:2],
    "read_only": w.read_only, "problems": w.problem,
}}))
"""


def test_settings_actions_reach_the_server_and_come_back(kernel: Kernel) -> None:
    # Relayed with the user's own token (a kernel given it by hand): everything works.
    code = SETTINGS_ROUND_TRIP.format(token=kernel.server.token, url=kernel.server.url)
    state = kernel.run(code).json()
    assert state["read_only"] == ""
    assert state["after_edit"] == ["Finds the holes."]
    assert "Writer" in state["taken"]  # a name already taken, in words
    assert state["names"] == ["Researcher", "Writer"]
    assert state["done"] == [
        {"type": "done", "action": "agent.save", "ok": True, "words": ""},
        {"type": "done", "action": "agent.save", "ok": True, "words": ""},
    ]
    assert state["outside_problem"]  # a paste Conch cannot read, said in words
    assert state["made"] == [["address", "agents", "id", "key", "note", "paste", "remote", "type"]]
    assert state["key_in_traits"] is False  # shown once, never kept in the widget's state
    assert state["said"]["note"] == "It has not said anything yet."
    assert state["pairings"] == []


def test_settings_relayed_with_the_kernel_key_read_and_change_nothing(kernel: Kernel) -> None:
    state = kernel.run(SETTINGS_ROUND_TRIP.format(token="", url="")).json()
    assert "Read-only here" in state["read_only"]
    assert state["names"] == ["Researcher", "Writer"]  # read, and nothing was added
    assert state["after_edit"] == []
    assert state["made"] == []  # no pairing: code in a kernel can let nobody in
    assert state["done"] == [
        {"type": "done", "action": "agent.save", "ok": False, "code": "only_the_user"},
        {"type": "done", "action": "agent.save", "ok": False, "code": "only_the_user"},
    ]
    for section in ("agents", "outside", "pairings"):
        assert state["problems"][section] == state["read_only"]  # said in words
    with kernel.server.client() as http:
        agents = http.get(f"{kernel.server.url}conch/api/agents").json()["agents"]
        pairings = http.get(f"{kernel.server.url}conch/api/pairings").json()["pairings"]
    assert [a["name"] for a in agents] == ["Researcher", "Writer"]
    assert pairings == []


def test_the_python_api_says_a_refusal_in_words(kernel: Kernel) -> None:
    ran = kernel.run(
        "from conch_jupyter.client import ConchClient\n"
        "ConchClient.from_environment().create_agent(name='Mole')"
    )
    assert len(ran.errors) == 1
    [shown] = ran.errors
    assert shown.startswith("Conch: Only you can add, change or remove agents")
    assert "Traceback" not in shown
    assert "File " not in shown


@pytest.mark.parametrize(
    ("session_name", "root", "path"),
    [
        ("/srv/root/dir/a.ipynb", "/srv/root", "dir/a.ipynb"),  # JupyterLab: the full path
        ("dir/a.ipynb", "/srv/root", "dir/a.ipynb"),  # a session started with no name
        ("/elsewhere/a.ipynb", "/srv/root", None),  # outside the root: no notebook
        ("/srv/root/a.ipynb", "", None),  # a server that did not say its root
        ("", "/srv/root", None),  # no session at all
    ],
)
def test_the_notebooks_path_is_under_the_servers_root(
    session_name: str, root: str, path: str | None
) -> None:
    from conch_jupyter.widget.chat import notebook_path

    env = {"JPY_SESSION_NAME": session_name, "CONCH_ROOT_DIR": root}
    assert notebook_path(env) == path
