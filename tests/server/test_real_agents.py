"""The real coding agents (issue 31): Claude Code's `claude-agent-acp`, `codex-acp`, Gemini CLI
and OpenCode, installed from npm (tests/support/acp_adapters, pinned by its lock file) and run by
a real Jupyter server against a scripted model on loopback that speaks each one's wire format
(Anthropic Messages, OpenAI Responses, Gemini, Chat Completions). The model asks for a shell command
(`touch made.txt`); what the agent does with it is the agent's own, under Conch's setting.

Their own settings are a user's who lets them do anything (Claude's `settings.json` allows Bash
and starts in bypassPermissions; OpenCode's defaults run bash unasked), or today's adapters' own
defaults (Claude Code 0.101 starts in `auto`, where a classifier approves; Codex 2.6 in `agent`,
where a side call to the model does): the chat's mode holds all the same. Claude Code and Codex
run in two releases each (`RELEASES`: today's from the `@agentclientprotocol` scope, last month's
pin); the key proofs run on both, the rest on today's.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from ..support import real_agents
from ..support.api import Api, settled, wait_for
from ..support.real_agents import Script
from ..support.scripted_models import Reply, ScriptedModels
from .test_acp_rounds import asking, coding_chat, conch_of, replies, tool_lines
from .test_rounds_server import ended, say
from .test_shutdown import conch_app

pytestmark = [pytest.mark.adapters, pytest.mark.timeout(240)]

RUN = real_agents.RUN


@pytest.fixture(scope="module", autouse=True)
def _adapters() -> None:
    real_agents.ensure_adapters()  # `npm ci` once, when missing


@pytest.fixture
def conch_config() -> dict[str, Any]:
    return {"acp_quiet_seconds": 120.0}


@pytest.fixture
def script(models: ScriptedModels) -> Script:
    calls = {"RUNIT": ("", {})}
    scripted = Script(calls=calls, after="Done.")
    models.responder = scripted
    return scripted


def permissive(name: str, home: Path, *, own_default: bool = False) -> dict[str, str]:
    """The agent's own settings as a user's who lets it do anything; with `own_default`, the
    mode it starts in is its own default instead (today's: Claude's `auto`, Codex's `agent`).
    Returns the environment that says so."""
    if name == "claude":
        settings = home / ".claude" / "settings.json"
        settings.parent.mkdir(parents=True, exist_ok=True)
        allow: dict[str, Any] = {"allow": ["Bash", "Write", "Edit"]}
        if not own_default:
            allow["defaultMode"] = "bypassPermissions"
        settings.write_text(json.dumps({"permissions": allow}))
    if name == "codex" and not own_default:
        return {"INITIAL_AGENT_MODE": "agent-full-access"}  # codex-acp 2.6's own setting
    return {}


async def add_real(
    api: Api,
    name: str,
    models: ScriptedModels,
    home: Path,
    *,
    release: str = "today",
    own_default: bool = False,
    **extra: Any,
) -> str:
    env = permissive(name, home, own_default=own_default)
    extra["env"] = {**env, **extra.get("env", {})}
    provider = real_agents.provider(name, models, home, release=release, **extra)
    body = {"name": name.title(), "persona": "writes the code", "provider": provider}
    status, agent = await api("POST", "agents", body)
    assert status == 201, agent
    return str(agent["id"])


# The key proofs run on each release of the adapters that have two (today's and last month's).
RELEASED = [
    pytest.param(name, release, id=f"{name}-{release}")
    for name in ("claude", "codex", "gemini", "opencode")
    for release in real_agents.RELEASES[name]
]


def codex_sandbox(script: Script) -> str:
    """What today's Codex tells its model of its sandbox in the turn's request (its
    `<permission_profile>`): the mode it runs in, as Codex itself applies it."""
    found = re.findall(r"<permission_profile.*?</permission_profile>", json.dumps(script.seen))
    assert found, "no request of the turn said its sandbox"
    return str(found[-1]).replace('\\"', '"')


# Codex 2.6's `read-only`: the notebook's folder may be read, nothing written.
READ_ONLY = (
    '<permission_profile type="managed"><file_system type="restricted">'
    '<entry access="read"><special>:root</special></entry></file_system></permission_profile>'
)


def use(script: Script, name: str, release: str = "today") -> None:
    script.calls = {"RUNIT": real_agents.run_call(name, release)}


@pytest.mark.parametrize(("name", "release"), RELEASED)
async def test_in_read_no_real_agent_changes_a_file(
    api: Api,
    models: ScriptedModels,
    script: Script,
    jp_root_dir: Path,
    tmp_path: Path,
    name: str,
    release: str,
) -> None:
    """Today's Claude and Codex start in their own defaults here (`auto`, `agent`)."""
    use(script, name, release)
    await add_real(api, name, models, tmp_path / "home", release=release, own_default=True)
    chat_id = await coding_chat(api, mode="read")
    await say(api, chat_id, f"@{name.title()} RUNIT please")
    chat = await settled(api, chat_id, 180)
    assert not (jp_root_dir / "made.txt").exists()
    assert not [e for e in chat["events"] if e["type"] == "tool.asking"]
    [(kind, _, state)] = [line for line in tool_lines(chat) if line[0] == "execute"]
    assert (kind, state) == ("execute", "refused")
    if (name, release) == ("codex", "today"):  # moved out of `agent`, its own default
        assert codex_sandbox(script) == READ_ONLY
    if name in ("claude", "gemini"):  # Codex's and OpenCode's "no" ends their turn unsaid
        assert replies(chat, name)[-1].endswith("Done.")


@pytest.mark.parametrize(("name", "release"), RELEASED)
async def test_in_ask_the_change_waits_for_the_users_yes(
    api: Api,
    models: ScriptedModels,
    script: Script,
    jp_root_dir: Path,
    tmp_path: Path,
    name: str,
    release: str,
) -> None:
    """The user's own most permissive mode (Claude's bypassPermissions, Codex 2.6's
    agent-full-access) holds no more than the defaults."""
    use(script, name, release)
    await add_real(api, name, models, tmp_path / "home", release=release)
    chat_id = await coding_chat(api, mode="ask")
    await say(api, chat_id, f"@{name.title()} RUNIT please")
    [entry] = await asking(api, chat_id, 150)  # a real agent's start: seconds, on a busy machine
    assert not (jp_root_dir / "made.txt").exists()
    # The question says what will happen, once; the agent's own words apart.
    assert entry["kind"] == "execute"
    [command, *where] = entry["detail"].splitlines()
    assert command == "$ touch made.txt"
    # Claude Code 0.101 also names the file the command touches, as the call's location.
    assert where == (
        [str(jp_root_dir / "made.txt")] if (name, release) == ("claude", "today") else []
    )
    # Claude, Gemini and OpenCode describe the call; Codex's title is the command itself.
    assert entry["title"] == ("touch made.txt" if name == "codex" else "Make a file")
    if (name, release) == ("codex", "today"):  # moved out of `agent-full-access`
        assert codex_sandbox(script) == READ_ONLY
    await api("POST", f"conversations/{chat_id}/tools/{entry['call_id']}", {"run": True})
    chat = await settled(api, chat_id, 180)
    assert (jp_root_dir / "made.txt").exists()
    assert replies(chat, name)[-1].endswith("Done.")
    assert ended(chat)[-1][1] == "done"
    if name == "claude":  # it reports its cost (Codex reports none): a metered reply
        [spent] = chat["spend"]
        assert spent["estimated"] is False
        assert spent["usd"] > 0
        assert chat["spent_usd"] == pytest.approx(spent["usd"])


async def test_opencode_run_as_conch_cannot_set_it_is_watched(
    api: Api, models: ScriptedModels, script: Script, jp_root_dir: Path, tmp_path: Path
) -> None:
    """OpenCode under a name Conch does not know: none of its settings can be set, so it gets
    no turn in Read; in Ask its default runs bash without asking, and the watch ends its turn
    in words, and its card says it acts without asking."""
    use(script, "opencode")
    alias = tmp_path / "my-agent"
    alias.symlink_to(real_agents.command("opencode"))
    await add_real(api, "opencode", models, tmp_path / "home", command=str(alias))
    chat_id = await coding_chat(api, mode="read")
    await say(api, chat_id, "@Opencode RUNIT please")
    chat = await settled(api, chat_id, 60)
    notes = [m["text"] for m in chat["messages"] if m["role"] == "note"]
    assert "Opencode gets no turn in a Read chat" in notes[-1]
    await api("PATCH", f"conversations/{chat_id}", {"mode": "ask"})
    await say(api, chat_id, "@Opencode RUNIT please")
    chat = await settled(api, chat_id, 180)
    assert (jp_root_dir / "made.txt").exists()  # its own settings let it: seen, and said
    notes = [m["text"] for m in chat["messages"] if m["role"] == "note"]
    assert "Opencode ran `touch made.txt` without asking you" in notes[-1]
    assert ended(chat)[-1][1] == "error"
    _, agent = await api("GET", "agents/opencode")
    assert agent["acp"]["acts_unasked"] is True


@pytest.mark.parametrize(("name", "release"), RELEASED[:4])
async def test_it_reads_the_notebook_through_conch_in_read(
    api: Api,
    models: ScriptedModels,
    script: Script,
    jp_root_dir: Path,
    tmp_path: Path,
    name: str,
    release: str,
) -> None:
    """Claude labels Conch's MCP tool `other`, Codex gives it no kind: its question is answered
    by the tool's own rule (reading passes in every mode), not refused as an action. Today's
    releases defer MCP tools behind their own tool search (Claude's `ToolSearch`, Codex's
    `tool_search`): the model finds the notebook's tools there first, as a real one would."""
    (jp_root_dir / "nb.ipynb").write_text(
        json.dumps(
            {
                "cells": [
                    {
                        "id": "c1",
                        "cell_type": "code",
                        "source": "x = 41",
                        "metadata": {},
                        "outputs": [],
                        "execution_count": None,
                    }
                ],
                "metadata": {},
                "nbformat": 4,
                "nbformat_minor": 5,
            }
        )
    )
    script.calls = {"RUNIT": ("read_notebook", {})}
    await add_real(api, name, models, tmp_path / "home", release=release)
    chat_id = await coding_chat(api, mode="read", path="nb.ipynb")
    await say(api, chat_id, f"@{name.title()} RUNIT please")
    chat = await settled(api, chat_id, 180)
    assert not [e for e in chat["events"] if e["type"] == "tool.asking"]
    notebook_lines = [
        (m["tool"], m["state"]) for m in chat["messages"] if m.get("tool") == "read_notebook"
    ]
    assert notebook_lines == [("read_notebook", "ran")]
    assert replies(chat, name)[-1].endswith("Done.")
    # What the tool answered reached the model as the tool's result (Codex 2.6 may make a side
    # request after the turn: the one that answered).
    [answered] = [
        b for b in script.seen if "Done." not in json.dumps(b) and "x = 41" in json.dumps(b)
    ]
    assert real_agents._last_is_tool_result(answered)
    assert script.searched == (["read_notebook"] if release == "today" else [])


async def test_after_stop_claudes_next_reply_holds_only_its_own_words(
    api: Api, models: ScriptedModels, script: Script, tmp_path: Path, jp_serverapp: Any
) -> None:
    slow = Reply(text="stale " * 200, delay_per_chunk=0.05)

    def respond(body: Any) -> Reply:
        wording = real_agents.newest_user_text(body)
        if "SLOW" in wording and "again" not in wording and real_agents.tool_names(body):
            return slow
        return script(body)

    models.responder = respond
    script.text = "Fresh words."
    await add_real(api, "claude", models, tmp_path / "home")
    chat_id = await coding_chat(api, mode="ask")
    await say(api, chat_id, "@Claude SLOW please")

    async def streaming() -> bool:
        _, chat = await api("GET", f"conversations/{chat_id}")
        return bool(chat["streaming"]) and "stale" in json.dumps(chat)

    await wait_for(streaming, 120)
    await api("POST", f"conversations/{chat_id}/round/stop")
    await settled(api, chat_id, 30)
    await say(api, chat_id, "@Claude hello again")
    chat = await settled(api, chat_id, 180)
    assert replies(chat, "claude")[-1] == "Fresh words."
    assert conch_of(jp_serverapp).coding is not None


async def test_no_codex_process_survives_a_server_stop(
    api: Api, models: ScriptedModels, script: Script, tmp_path: Path, jp_serverapp: Any
) -> None:
    """codex-acp is a Node wrapper that starts a native binary: both end with the server."""
    await add_real(api, "codex", models, tmp_path / "home")
    chat_id = await coding_chat(api, mode="ask")
    await say(api, chat_id, "@Codex hello")
    chat = await settled(api, chat_id, 120)
    assert replies(chat, "codex")[-1] == "Hello from the model."
    coding = conch_of(jp_serverapp).coding
    group = coding.process_of("codex").pid
    members = _group(group)
    assert len(members) >= 2, members  # the wrapper and its binary
    await conch_app(jp_serverapp).stop_extension()  # what the server does when it stops

    async def gone() -> bool:
        return _group(group) == []

    await wait_for(gone, 30)  # a killed process is reaped by whoever is its parent now
    assert not [pid for pid in members if _alive(pid)]


def _alive(pid: int) -> bool:
    """Whether the process runs (a zombie has ended; only its parent's wait is missing)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _group(pgid: int) -> list[int]:
    """The live processes of a process group (zombies are gone already)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[2]) == pgid and fields[0] != "Z":
            found.append(int(entry.name))
    return found


async def test_an_idle_codex_ends_and_resumes_the_chats_session(
    api: Api, models: ScriptedModels, script: Script, tmp_path: Path, jp_serverapp: Any
) -> None:
    """The process ends after `idle_seconds` with no turn; the chat's next turn starts it again
    and takes up its session (`session/resume`): Codex still holds the first turn, and Conch
    sends it only what came since."""
    coding = conch_of(jp_serverapp).coding
    coding.idle_seconds = 0.5
    await add_real(api, "codex", models, tmp_path / "home")
    chat_id = await coding_chat(api, mode="ask")
    await say(api, chat_id, "@Codex remember PINEAPPLE")
    await settled(api, chat_id, 120)
    first = coding.process_of("codex")
    [session] = [s for s in coding._chats.values() if s.chat == chat_id]
    session_id = session.session_id

    async def ended_idle() -> bool:
        return coding.process_of("codex") is None

    await wait_for(ended_idle, 30)
    await say(api, chat_id, "@Codex what was it")
    chat = await settled(api, chat_id, 120)
    assert replies(chat, "codex")[-1] == "Hello from the model."
    assert coding.process_of("codex").pid != first.pid
    assert session.session_id == session_id  # the same session, taken up again
    last = json.dumps(script.seen[-1])
    assert "PINEAPPLE" in last  # Codex's own memory of the first turn
    assert last.count("remember PINEAPPLE") == 1  # … not sent again by Conch


# --- known however launched (issue 37) ---


async def test_npx_claude_is_set_up_as_claude_code_and_its_card_shows_what_it_said(
    api: Api, models: ScriptedModels, script: Script, jp_root_dir: Path, tmp_path: Path
) -> None:
    """As JetBrains and marimo start it: `npx -y @agentclientprotocol/claude-agent-acp` (here
    from the notebook project's own node_modules, so npx fetches nothing). Conch knows it as
    Claude Code: its asking setup holds in Read, and its card shows the name and version it
    gave in `initialize`."""
    use(script, "claude")
    (jp_root_dir / "package.json").write_text(
        json.dumps({"private": True, "dependencies": {real_agents.package_of("claude"): "*"}})
    )
    (jp_root_dir / "node_modules").symlink_to(real_agents.ADAPTERS / "node_modules")
    offline = {"npm_config_offline": "true", "npm_config_update_notifier": "false"}
    package = real_agents.package_of("claude")
    await add_real(
        api, "claude", models, tmp_path / "home", command="npx", args=["-y", package], env=offline
    )
    chat_id = await coding_chat(api, mode="read")
    await say(api, chat_id, "@Claude RUNIT please")
    chat = await settled(api, chat_id, 180)
    assert not (jp_root_dir / "made.txt").exists()
    [(kind, _, state)] = [line for line in tool_lines(chat) if line[0] == "execute"]
    assert (kind, state) == ("execute", "refused")
    assert replies(chat, "claude")[-1].endswith("Done.")
    _, agent = await api("GET", "agents/claude")
    said = agent["acp"]["said"]
    assert said["name"] in real_agents.RELEASES["claude"].values()
    assert said["version"] == real_agents.version_of("claude")
    assert agent["acp"]["known_as"] == "Claude Code"


async def test_an_agent_that_says_it_is_another_gets_no_read_turn(
    api: Api, models: ScriptedModels, script: Script, jp_root_dir: Path, tmp_path: Path
) -> None:
    """A program named `codex-acp` that is Claude Code's adapter: Conch took it for Codex, but
    it names itself in `initialize`, so the setting Conch gave it may mean nothing to it. It
    gets no Read turn, said in words naming what it said it is; in Ask it works, watched."""
    use(script, "claude")
    alias = tmp_path / "bin" / "codex-acp"
    alias.parent.mkdir()
    alias.symlink_to(real_agents.command("claude"))
    await add_real(api, "claude", models, tmp_path / "home", command=str(alias))
    chat_id = await coding_chat(api, mode="read")
    await say(api, chat_id, "@Claude RUNIT please")
    chat = await settled(api, chat_id, 180)
    notes = [m["text"] for m in chat["messages"] if m["role"] == "note"]
    said = f"{real_agents.package_of('claude')} {real_agents.version_of('claude')}"
    assert "Claude gets no turn in a Read chat: its command looks like Codex" in notes[-1]
    assert f"it says it is “{said}”" in notes[-1]
    assert not (jp_root_dir / "made.txt").exists()
    assert not replies(chat, "claude")
    _, agent = await api("GET", "agents/claude")
    assert agent["acp"]["said"]["name"] == real_agents.package_of("claude")
    assert agent["acp"]["known_as"] is None
