"""The rules for coding agents over ACP (coding/rules.py), table-tested with no process."""

from __future__ import annotations

import json
import shlex
import sys
from typing import Any

import pytest
from acp import schema
from hypothesis import given, settings
from hypothesis import strategies as st

from conch_jupyter.coding.rules import (
    KNOWN_AGENTS,
    READING_FORMS,
    SKIPPING_MODES,
    WITHHELD_ENV,
    WRITING_FLAGS,
    AskingSetup,
    about_of,
    acted_unasked,
    asking_setup,
    child_env,
    chosen_option,
    command_of,
    command_refusal,
    conch_tool,
    detail_of,
    found_agents,
    mode_to_leave,
    no_read_turn,
    offered_server,
    own_kind,
    permission,
    prompt_text,
    reads_only,
    taint_judged,
    tool_state,
    workdir,
)

KINDS = ("read", "edit", "delete", "move", "search", "execute", "think", "fetch", "other", None)
READING = {"read", "search", "think"}
OFFERED = offered_server("0123456789ab")  # the name Conch offered its server under


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("mode", ["read", "ask", "auto"])
@pytest.mark.parametrize("tainted", [False, True])
def test_every_mode_kind_and_taint(mode: Any, kind: str | None, tainted: bool) -> None:
    got = permission(mode=mode, tainted=tainted, kind=kind)
    if kind in READING:
        expected = "allow"  # reading passes in every mode
    elif kind == "fetch" and not tainted:
        expected = "allow"  # an address is a way out only for what came in before it
    elif mode == "read":
        expected = "refuse"
    elif mode == "auto" and not tainted:
        expected = "allow"
    else:
        expected = "ask"  # Ask always; Auto once someone else's words came in
    assert got == expected


def _options(*kinds: str) -> list[schema.PermissionOption]:
    return [schema.PermissionOption(option_id=f"id-{k}", name=k, kind=k) for k in kinds]  # type: ignore[arg-type]


def test_the_answer_is_for_this_call_only() -> None:
    every = _options("allow_always", "allow_once", "reject_always", "reject_once")
    assert chosen_option(every, allow=True) == "id-allow_once"
    assert chosen_option(every, allow=False) == "id-reject_once"
    assert chosen_option(_options("allow_always"), allow=True) == "id-allow_always"
    assert chosen_option(_options("allow_once"), allow=False) is None  # → cancelled


def test_the_agent_never_gets_the_kernel_key_or_a_token() -> None:
    base = {
        "PATH": "/bin",
        "CONCH_KERNEL_KEY": "k",
        "JUPYTER_TOKEN": "t",
        "OTHER_NAME": "the-token",
        "HOME": "/h",
    }
    env = child_env(base, {"OPENAI_API_KEY": "sk", "CONCH_KERNEL_KEY": "again"}, {"the-token"})
    assert env == {"PATH": "/bin", "HOME": "/h", "OPENAI_API_KEY": "sk"}
    assert "CONCH_KERNEL_KEY" in WITHHELD_ENV


def test_it_runs_in_the_notebooks_folder_under_the_root(tmp_path: Any) -> None:
    root = str(tmp_path)
    assert workdir(root, "a/b/nb.ipynb") == str(tmp_path / "a" / "b")
    assert workdir(root, "nb.ipynb") == root
    assert workdir(root, None) == root
    assert workdir(root, "../../etc/nb.ipynb") == root  # never above the root


def test_a_command_is_checked_in_one_place() -> None:
    assert command_refusal("claude-code-acp") is None
    assert command_refusal("  ")
    assert command_refusal("a\nb")
    assert command_refusal("goose", ["a\0"])


def test_agents_found_on_path() -> None:
    on_path = {"goose": "/usr/bin/goose", "codex-acp": "/opt/codex-acp"}
    found = found_agents(on_path.get)
    assert [(f["label"], f["command"], f["args"]) for f in found] == [
        ("Codex", "codex-acp", []),
        ("Goose", "goose", ["acp"]),
    ]
    assert len(KNOWN_AGENTS) >= 5


def test_what_a_question_shows_in_full() -> None:
    assert detail_of({"command": ["rm", "-rf", "x"]}, None, None) == "$ rm -rf x"
    diff = schema.FileEditToolCallContent(type="diff", path="a.py", old_text="1\n", new_text="2\n")
    assert detail_of(None, [diff], None) == "--- a.py\n+++ a.py\n-1\n+2"
    where = [schema.ToolCallLocation(path="data.csv")]
    assert detail_of(None, None, where) == "data.csv"
    long = detail_of({"command": "x" * 30_000}, None, None)
    assert len(long) < 21_000
    assert long.endswith("characters in all]")


def test_the_prompt_and_the_states() -> None:
    text = prompt_text("You are Coder.", [("user", "hi"), ("assistant", "done")])
    assert text == "You are Coder.\n\nhi\n\n(your earlier reply)\ndone"
    assert tool_state("completed", stopped=False) == "ran"
    assert tool_state("failed", stopped=True) == "failed"
    assert tool_state("in_progress", stopped=True) == "skipped"


# --- they ask before every change (issue 31) ---


def test_each_known_agent_is_made_to_ask_through_its_own_setting() -> None:
    claude = asking_setup("/home/u/.npm/bin/claude-agent-acp")
    assert claude is not None
    settings = json.loads(claude.meta["claudeCode"]["options"]["extraArgs"]["settings"])
    assert {"Bash", "Edit", "Write", "NotebookEdit"} <= set(settings["permissions"]["ask"])
    assert asking_setup("claude-code-acp") is not None  # the adapter's older name
    codex = asking_setup("codex-acp", ["-c", 'sandbox_mode="workspace-write"'])
    assert codex is not None
    assert codex.args == ("-c", 'approval_policy="untrusted"')
    opencode = asking_setup("opencode", ["acp"])
    assert opencode is not None
    asks = json.loads(opencode.env["OPENCODE_PERMISSION"])
    assert asks["bash"] == asks["edit"] == "ask"
    assert asking_setup("opencode", ["run"]) is None  # not its ACP face
    assert asking_setup("goose", ["acp"]) == AskingSetup("Goose", env={"GOOSE_MODE": "approve"})
    gemini = asking_setup("gemini", ["--acp"])
    assert gemini is not None
    assert gemini.args == ("--approval-mode", "default")
    assert asking_setup(sys.executable, ["my_agent.py"]) is None
    assert "gets no turn in a Read chat" in no_read_turn("Mine")


@pytest.mark.parametrize(
    ("current", "offered", "moved_to"),
    [
        ("default", ["default", "acceptEdits", "plan", "bypassPermissions"], None),
        ("bypassPermissions", ["default", "acceptEdits", "plan", "bypassPermissions"], "default"),
        ("plan", ["default", "plan"], "default"),  # a mode name is no lock
        ("dontAsk", ["default", "dontAsk"], "default"),
        ("full-access", ["read-only", "auto", "full-access"], "read-only"),
        ("yolo", ["default", "autoEdit", "yolo", "plan"], "default"),
        ("autoEdit", ["autoEdit", "yolo"], None),  # nothing that asks is offered
        ("build", ["build", "plan"], None),
        # Today's adapters (FIELD.md): Claude Code 0.101 starts in `auto` (a classifier
        # approves), Codex 2.6 in `agent` (a side call to the model approves) and offers
        # `agent-full-access` (never asks): each goes where the user answers.
        (
            "auto",
            ["auto", "default", "acceptEdits", "plan", "dontAsk", "bypassPermissions"],
            "default",
        ),
        ("agent", ["read-only", "workspace-write", "agent", "agent-full-access"], "read-only"),
        (
            "agent-full-access",
            ["read-only", "workspace-write", "agent", "agent-full-access"],
            "read-only",
        ),
        ("workspace-write", ["read-only", "workspace-write", "agent"], "read-only"),
        ("read-only", ["read-only", "workspace-write", "agent", "agent-full-access"], None),
        (None, [], None),
    ],
)
def test_an_agent_is_moved_out_of_a_mode_that_skips_questions(
    current: str | None, offered: list[str], moved_to: str | None
) -> None:
    assert mode_to_leave(current, offered) == moved_to
    assert moved_to not in SKIPPING_MODES


@pytest.mark.parametrize(
    ("mode", "tainted", "kind", "status", "asked", "stopped"),
    [
        ("read", False, "execute", "completed", False, True),
        ("ask", False, "edit", "completed", False, True),
        ("ask", False, "edit", "in_progress", False, False),  # OpenCode's, before it asks
        ("ask", False, None, "completed", False, True),  # an unknown kind is a change
        ("ask", False, "other", "completed", False, True),
        ("auto", True, "execute", "completed", False, True),
        ("auto", False, "execute", "completed", False, False),
        ("ask", False, "execute", "completed", True, False),  # it asked: the answer held
        ("read", False, "read", "completed", False, False),
        ("read", False, "fetch", "completed", False, False),  # untainted before it: it passes
        ("auto", False, "fetch", "completed", False, False),
        ("ask", True, "fetch", "completed", False, True),  # tainted before it: a way out
        ("auto", True, "fetch", "completed", False, True),
        ("read", True, "fetch", "completed", False, True),
        ("ask", True, "fetch", "completed", True, False),  # it asked: the answer held
        ("ask", False, "execute", "pending", False, False),  # not run yet: it may still ask
        ("ask", False, "execute", "failed", False, False),
    ],
)
def test_a_change_made_without_asking_is_seen(
    mode: Any, tainted: bool, kind: str | None, status: str, asked: bool, stopped: bool
) -> None:
    seen = acted_unasked(mode=mode, tainted=tainted, kind=kind, status=status, asked=asked)
    assert seen is stopped


@pytest.mark.parametrize("kind", KINDS)
def test_a_fetch_is_judged_by_the_taint_from_before_it(kind: str | None) -> None:
    for before in (False, True, None):
        for now in (False, True):
            judged = taint_judged(kind, before, now)
            assert judged is ((before is not False) if kind == "fetch" else now)


def test_conchs_own_tools_are_known_by_every_agents_name_for_them() -> None:
    def mine(*args: Any) -> str | None:
        return conch_tool(*args, server=OFFERED)

    assert mine("Tool", f"mcp__{OFFERED}__read_notebook") == "read_notebook"
    assert mine(f"mcp__{OFFERED}__run_code") == "run_code"
    assert mine(f"{OFFERED}.list_variables") == "list_variables"
    assert mine(f"Tool: {OFFERED}/run_code") == "run_code"
    assert mine("x", None, {"server": OFFERED, "tool": "edit_cell"}) == "edit_cell"
    assert mine(f"mcp__{OFFERED}__no_such_tool") is None
    assert mine("mcp__other-server__read_notebook") is None
    assert mine("read_notebook") is None  # not offered by Conch under that name


def test_only_the_server_conch_offered_that_session_is_conchs() -> None:
    """A server of the user's or a project's that calls itself `conch-notebook` (or takes the
    name another session was offered) gets no pass; with no server offered, no call is Conch's."""
    other = offered_server("ba9876543210")
    for server, tool in (("conch-notebook", "run_code"), (other, "run_code")):
        assert conch_tool(f"mcp__{server}__{tool}", server=OFFERED) is None
        assert conch_tool("Tool", f"mcp__{server}__{tool}", server=OFFERED) is None
        assert conch_tool("x", None, {"server": server, "tool": tool}, server=OFFERED) is None
    assert conch_tool("Tool", f"mcp__{OFFERED}__run_code", server=None) is None
    # A name Conch never offers is no offered name, whatever it holds.
    assert conch_tool("Tool", "mcp__conch-notebook__run_code", server="conch-notebook") is None
    with pytest.raises(ValueError, match="12 hex digits"):
        offered_server("not hex!")


def test_a_command_that_names_a_conch_tool_is_no_conch_tool() -> None:
    """A model chooses a command's words, and Claude's title for a command is the command: a
    call is Conch's tool only by the agent's own naming, so no command or edit passes as one."""

    def mine(*args: Any) -> str | None:
        return conch_tool(*args, server=OFFERED)

    sneaky = f"rm -rf data # mcp__{OFFERED}__read_notebook"
    assert mine(sneaky, None, {"command": sneaky}) is None
    assert mine(f"mcp__{OFFERED}__read_notebook; rm -rf data") is None
    # Claude names the tool it runs: Bash is Bash, whatever its title says.
    assert mine(f"mcp__{OFFERED}__read_notebook", "Bash", {"command": "x"}) is None
    # A command or an edit is never Conch's tool, however the agent titles it.
    for kind in ("execute", "edit", "delete", "move", "read", "fetch"):
        assert mine(f"{OFFERED}.read_notebook", None, None, kind) is None
    assert mine(f"{OFFERED}.read_notebook", None, None, "other") == "read_notebook"
    # The server and tool given apart decide, not the title beside them.
    assert mine(f"mcp__{OFFERED}__run_code", None, {"server": "x", "tool": "y"}) is None


def test_todays_codex_names_conchs_tool_by_its_server_and_tool() -> None:
    """Codex 2.6 reports an MCP call as kind `execute`, titled `mcp.<server>.<tool>`, its
    input the server, tool and arguments: that is Conch's tool; a command never is."""

    def mine(*args: Any) -> str | None:
        return conch_tool(*args, server=OFFERED)

    raw = {"server": OFFERED, "tool": "read_notebook", "arguments": {}}
    assert mine(f"mcp.{OFFERED}.read_notebook", None, raw, "execute") == "read_notebook"
    assert mine("x", None, {**raw, "command": "rm -rf data"}, "execute") is None
    assert mine("x", None, {**raw, "cmd": "rm -rf data"}, "execute") is None
    assert mine("x", None, raw, "edit") is None
    assert mine("x", None, {**raw, "server": "other"}, "execute") is None
    assert mine("x", None, {**raw, "server": "conch-notebook"}, "execute") is None


@settings(max_examples=300, deadline=None)
@given(
    title=st.text(max_size=80),
    meta=st.none() | st.text(max_size=80),
    raw=st.none() | st.dictionaries(st.sampled_from(["server", "tool", "command"]), st.text()),
    kind=st.sampled_from(KINDS),
    server=st.sampled_from(["conch-notebook", offered_server("ba9876543210")]) | st.text(),
)
def test_no_name_but_the_offered_servers_is_conchs(
    title: str, meta: str | None, raw: dict[str, str] | None, kind: str | None, server: str
) -> None:
    """Hostile names (any title, any tool name of the agent's, any input): a call is Conch's
    tool only where its naming holds the offered name itself."""
    found = conch_tool(title, meta, raw, kind, server=OFFERED)
    named = " ".join(x for x in (title, meta or "", *(raw or {}).values()) if x)
    assert found is None or OFFERED in named
    if OFFERED not in named:
        for name in (f"mcp__{server}__run_code", f"{server}.run_code"):
            if OFFERED not in server:
                assert conch_tool(name, name, None, "other", server=OFFERED) is None


def test_claudes_tool_search_only_reads() -> None:
    """Claude Code 0.101 defers MCP tools behind `ToolSearch` (kind `other`): by the agent's
    own name for the call it is a search, which passes the watch in every mode."""
    assert own_kind("other", "ToolSearch") == "search"
    assert own_kind(None, "ToolSearch") == "search"
    assert own_kind("execute", "ToolSearch") == "execute"  # a command stays a command
    assert own_kind("other", "Bash") == "other"
    assert own_kind("other", None) == "other"
    kind = own_kind("other", "ToolSearch")
    assert not acted_unasked(mode="read", tainted=True, kind=kind, status="completed", asked=False)


def test_a_question_says_what_will_happen_once() -> None:
    # Claude: the command as title and in rawInput, its description in the content.
    said = schema.ContentToolCallContent(
        type="content", content=schema.TextContentBlock(type="text", text="Make a file")
    )
    raw = {"command": "touch made.txt", "description": "Make a file"}
    assert detail_of(raw, [said], None, "touch made.txt") == "$ touch made.txt"
    assert about_of(raw) == "Make a file"
    # Codex: a list, run through a shell.
    codex = {"command": ["/bin/bash", "-lc", "touch made.txt && ls"], "cwd": "/w"}
    assert detail_of(codex, None, None) == "$ touch made.txt && ls"
    assert command_of({"cmd": "make test"}) == "make test"
    # OpenCode: the file it will write, whichever key holds it.
    assert detail_of({"filePath": "/w/a.py", "content": "x"}, None, None) == "/w/a.py"
    assert about_of({"command": "ls"}) == ""
    # Gemini: no rawInput; the command is the title, the content its folder and description.
    gemini = [
        schema.ContentToolCallContent(
            type="content",
            content=schema.TextContentBlock(
                type="text", text="[current working directory /w] (Make a file)"
            ),
        )
    ]
    assert detail_of(None, gemini, None, "touch made.txt") == "$ touch made.txt"
    assert command_of(None, "touch made.txt", gemini) == "touch made.txt"
    assert about_of(None, gemini) == "Make a file"
    assert command_of(None, "Edit a.py", None) is None
    # OpenCode reports the folder it runs in as the call's location: no news beside the command.
    where = [schema.ToolCallLocation(path="/w")]
    assert detail_of({"command": "ls", "cwd": "/w"}, None, where) == "$ ls"


def test_conch_never_says_a_yes_that_skips_questions() -> None:
    # Claude's question on leaving `plan`: its options would move it into a skipping mode.
    leave_plan = [
        schema.PermissionOption(option_id="bypassPermissions", name="bypass", kind="allow_always"),
        schema.PermissionOption(option_id="acceptEdits", name="accept", kind="allow_always"),
        schema.PermissionOption(option_id="default", name="ask me", kind="allow_once"),
        schema.PermissionOption(option_id="plan", name="keep planning", kind="reject_once"),
    ]
    assert chosen_option(leave_plan, allow=True) == "default"
    assert chosen_option(leave_plan, allow=False) == "plan"  # a no keeps it where it is
    only_bypass = leave_plan[:2]
    assert chosen_option(only_bypass, allow=True) is None  # then the answer is `cancelled`


@pytest.mark.parametrize(
    ("command", "reading"),
    [
        ("git status", True),
        ("git log --oneline -5", True),
        ("pwd", True),
        ("ls -la src", True),
        ("/bin/cat notes.txt", True),
        ("find . -name '*.py'", True),
        ("find . -name '*.pyc' -delete", False),
        ("find . -exec rm {} +", False),
        ("echo hi > notes.txt", False),
        ("cat a | tee b", False),
        ("ls; rm -rf build", False),
        ("echo $(rm x)", False),
        ("git push", False),
        ("git diff --output=patch.txt", False),
        ("touch made.txt", False),
        ("rm -rf build", False),
        ("", False),
        (None, False),
        # A reading program's every form that writes or runs: the form decides, not the name.
        ("rg foo src", True),
        ("rg -n -i --hidden -g '*.py' -e 'def x' .", True),
        ("rg -A3 -tpy foo", True),
        ("rg --pre ./x.sh foo", False),
        ("rg --pre=./x.sh foo", False),
        ("rg '--pre' ./x.sh foo", False),  # quoting hides nothing
        ('rg "--pre=./x.sh" foo', False),
        ("rg --pre-glob '*.gz' foo", False),
        ("rg -z foo", False),
        ("rg -iz foo", False),
        ("rg --search-zip foo", False),
        ("rg --hostname-bin ./x.sh foo", False),
        ("rg foo *", False),  # a file named `--pre=x.sh` would be an option
        ("rg foo {--pre=./x.sh,}", False),
        ("./rg foo", False),  # whatever that file is
        ("/tmp/rg foo", False),
        ("/usr/bin/rg foo", True),
        ("rg --prefix foo", False),  # an option Conch does not know is a change
        ("rg -- --pre foo", True),  # after `--`, a pattern
        ("find . -fprint out.txt", False),
        ("find . -fprintf out.txt '%p'", False),
        ("find . -fls out.txt", False),
        ("find . -ok rm {} ;", False),
        ("find . -okdir rm {} ;", False),
        ("find . -execdir rm {} +", False),
        ("find . -name x -delete", False),
        ("find . -mtime -7 -size -10k -type f", True),
        ("find . -name -exec", False),
        ("find . -newer x -print0", True),
        ("find * -name x", False),
        ("sed -n 1,20p notes.txt", True),
        ("sed -n '/start/,/end/p' notes.txt", True),
        ("sed 5q notes.txt", True),
        ("sed -i s/a/b/ notes.txt", False),
        ("sed -n -i 1p notes.txt", False),
        ("sed --in-place=.bak 1p notes.txt", False),
        ("sed 's/a/b/w out.txt' notes.txt", False),
        ("sed -n 1w out.txt", False),
        ("sed 's/x/date/e' notes.txt", False),
        ("sed -f script.sed notes.txt", False),
        ("sed -n", False),
        ("sort -n data.csv", True),
        ("sort -k2,2n -t, data.csv", True),
        ("sort -o data.csv data.csv", False),
        ("sort -no data.csv data.csv", False),
        ("sort --output=data.csv data.csv", False),
        ("sort --out=data.csv data.csv", False),  # an abbreviation GNU takes
        ("sort --compress-program=./x.sh data.csv", False),
        ("file -b notes.txt", True),
        ("file -C -m magic", False),
        ("file -z notes.gz", False),
        ("git show HEAD~1:notes.txt", True),
        ("git log -5 --stat --format=%h", True),
        ("git diff --cached --name-only", True),
        ("git status --short", True),
        ("git -c core.pager=./x.sh log", False),
        ("git -C elsewhere status", False),
        ("git --no-pager log", False),
        ("git log --output=out.txt", False),
        ("git diff --outp=out.txt", False),  # an abbreviation git takes
        ("git diff --ext-diff", False),
        ("git show --textconv HEAD", False),
        ("git log --show-signature", False),
        ("git diff -c", False),
        ("git branch new", False),
        ("git log -- --output=x", True),  # after `--`, a path
        ("grep -rn foo *", True),  # every option of grep reads: so does every expansion
        ("cat 'unclosed", False),
        ("FOO=1 rg foo", False),
        ("env rg --pre ./x.sh foo", False),
    ],
)
def test_a_command_that_only_reads_is_no_change(command: str | None, reading: bool) -> None:
    assert reads_only(command) is reading
    seen = acted_unasked(
        mode="ask", tainted=False, kind="execute", status="completed", asked=False, command=command
    )
    assert seen is not reading


def _writes(program: str, word: str) -> bool:
    """Whether one of the shell's words is one of the program's known writing or running flags
    (a long one with its value, or a single letter anywhere in a cluster before a value)."""
    flags = WRITING_FLAGS.get(program, frozenset())
    if word.split("=", 1)[0] in flags or (program == "find" and word.startswith("-fprint")):
        return True
    if program in READING_FORMS and word.startswith("-") and not word.startswith("--"):
        form = READING_FORMS[program]
        for letter in word[1:]:
            if f"-{letter}" in flags:
                return True
            if letter in form.valued:
                return False
    return False


_PROGRAMS = sorted(WRITING_FLAGS)
_KNOWN_WRITING = sorted({f for flags in WRITING_FLAGS.values() for f in flags})
_ARGS = st.sampled_from(
    [
        *_KNOWN_WRITING,
        *["-n", "-i", "-e", "-z", "--", "-", "1,5p", "s/a/b/w x", "foo", "*", "-name", "x.py"],
        *["status", "log", "--stat", "-k2", "--pre=./x.sh", "-iz", "-no", "-exec", "'-o'"],
        '"--pre"',
    ]
) | st.text(alphabet="-=abcdefghiknoprsuvwxzCEIOPSTZ*'\" .,", max_size=12)


@settings(max_examples=1500, deadline=None)
@given(program=st.sampled_from(_PROGRAMS), args=st.lists(_ARGS, max_size=6))
def test_no_reading_form_holds_a_writing_flag(program: str, args: list[str]) -> None:
    """Hostile commands built from every known writing and running flag: none that Conch
    counts as reading holds one (before a `--` that ends the options)."""
    command = " ".join([program, *args])
    if not reads_only(command):
        return
    words = shlex.split(command)[1:]
    if program != "find" and "--" in words:
        words = words[: words.index("--")]
    assert not any(_writes(program, w) for w in words), command


@settings(max_examples=500, deadline=None)
@given(st.text(max_size=200))
def test_reads_only_takes_any_text(command: str) -> None:
    """Any text at all (unclosed quotes, control characters) is an answer, never an error; one
    counted as reading holds no shell sign."""
    if reads_only(command):
        assert not set(command) & set(";&|<>`$\n\\")


def test_known_agents_name_todays_packages() -> None:
    about = " ".join(k.about for k in KNOWN_AGENTS)
    for package in (
        "@agentclientprotocol/claude-agent-acp",
        "@agentclientprotocol/codex-acp",
        "@google/gemini-cli",
        "opencode-ai",
    ):
        assert package in about
    for known in KNOWN_AGENTS:  # each one offered is one Conch can make ask
        assert asking_setup(known.command, known.args) is not None
