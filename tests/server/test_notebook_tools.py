"""NotebookTools against a real ipykernel started through Jupyter's session API: the decision,
the wait for a yes, the run in the notebook's own kernel, Stop, the bounds, and the log."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from conch_jupyter.notebook.asking import NotAsking
from conch_jupyter.notebook.kernel import NotebookKernels
from conch_jupyter.notebook.rules import NO_KERNEL_WORDS, OUTPUT_LIMIT
from conch_jupyter.notebook.service import Caller, NotebookTools
from conch_jupyter.providers.base import ToolCall
from conch_jupyter.server_ext.services import ConchServices

from ..support import notebook_kernels
from ..support.api import wait_for
from ..support.notebook_kernels import NotebookKernel

pytestmark = pytest.mark.timeout(120)
kernel = notebook_kernels.kernel  # the fixture: a real ipykernel for work.ipynb

ANALYST = Caller("analyst", "Analyst")


def run(code: str) -> ToolCall:
    return ToolCall("call_1", "run_code", {"code": code})


def conch_of(serverapp: Any) -> ConchServices:
    services: ConchServices = serverapp.web_app.settings["conch"]
    return services


def tools_of(serverapp: Any) -> NotebookTools:
    return conch_of(serverapp).tools


async def chat_for(serverapp: Any, path: str | None = "work.ipynb", mode: str = "ask") -> str:
    store = conch_of(serverapp).store
    chat = await store.create_conversation("t", path=path)
    await store.set_mode(chat.id, mode)  # type: ignore[arg-type]
    return chat.id


def tool_messages(serverapp: Any, chat_id: str) -> list[dict[str, Any]]:
    store = conch_of(serverapp).store
    return [m.to_json() for m in store.messages(chat_id) if m.role == "tool"]


def events(serverapp: Any, chat_id: str) -> list[dict[str, Any]]:
    return [e.to_json() for e in conch_of(serverapp).store.events(chat_id)]


async def test_ask_waits_and_runs_only_after_yes(jp_serverapp: Any, kernel: NotebookKernel) -> None:
    tools, chat = tools_of(jp_serverapp), await chat_for(jp_serverapp)
    call = asyncio.ensure_future(tools.call(chat, ANALYST, run("answer = 6 * 7\nanswer"), 0))
    asking = await wait_for(lambda: _async(tools.asking(chat)))
    assert asking == [
        {
            "call_id": asking[0]["call_id"],
            "agent": "analyst",
            "name": "Analyst",
            "tool": "run_code",
            "code": "answer = 6 * 7\nanswer",
        }
    ]
    await asyncio.sleep(0.3)
    assert not call.done()
    assert await kernel.value("'answer' in globals()") == "False"  # nothing ran yet
    tools.answer(chat, asking[0]["call_id"], True)
    assert (await call).strip() == "42"
    assert await kernel.value("answer") == "42"  # in the user's own kernel
    with pytest.raises(NotAsking):  # answering twice is refused
        tools.answer(chat, asking[0]["call_id"], True)
    [message] = tool_messages(jp_serverapp, chat)
    assert (message["state"], message["code"], message["output"].strip()) == (
        "ran",
        "answer = 6 * 7\nanswer",
        "42",
    )
    kinds = [e["type"] for e in events(jp_serverapp, chat)]
    assert kinds == ["tool.asking", "tool.ended"]
    assert events(jp_serverapp, chat)[-1]["state"] == "ran"
    assert tools.asking(chat) == []


async def test_dont_run_never_runs(jp_serverapp: Any, kernel: NotebookKernel) -> None:
    tools, chat = tools_of(jp_serverapp), await chat_for(jp_serverapp)
    call = asyncio.ensure_future(tools.call(chat, ANALYST, run("never = 1"), 0))
    asking = await wait_for(lambda: _async(tools.asking(chat)))
    tools.answer(chat, asking[0]["call_id"], False)
    assert "did not let this code run" in await call
    assert await kernel.value("'never' in globals()") == "False"
    assert tool_messages(jp_serverapp, chat)[0]["state"] == "skipped"


async def test_auto_runs_until_someone_elses_words_come_in(
    jp_serverapp: Any, kernel: NotebookKernel
) -> None:
    tools, chat = tools_of(jp_serverapp), await chat_for(jp_serverapp, mode="auto")
    assert "1" in await tools.call(chat, ANALYST, run("auto_ran = 1\nprint(auto_ran)"), 0)
    assert await kernel.value("auto_ran") == "1"
    await conch_of(jp_serverapp).store.set_taint(chat, {"kind": "person", "by": "Oracle"})
    call = asyncio.ensure_future(tools.call(chat, ANALYST, run("after = 1"), 1))
    asking = await wait_for(lambda: _async(tools.asking(chat)))  # the guard after reading
    tools.answer(chat, asking[0]["call_id"], False)
    await call
    assert await kernel.value("'after' in globals()") == "False"


async def test_read_refuses_runs_and_still_reads(jp_serverapp: Any, kernel: NotebookKernel) -> None:
    tools, chat = tools_of(jp_serverapp), await chat_for(jp_serverapp, mode="read")
    await kernel.run("total = sum([3, 1, 4])")
    words = await tools.call(chat, ANALYST, run("import os; os.remove('x')"), 0)
    assert "Read mode" in words
    read = await tools.call(chat, ANALYST, ToolCall("c2", "read_notebook", {}), 1)
    assert "Notebook work.ipynb as last saved: 3 cells." in read
    assert "sales = [3, 1, 4]" in read
    # What the kernel ran since the save is there too.
    assert "total = sum([3, 1, 4])" in read.split("Since the last save")[1]
    listed = await tools.call(chat, ANALYST, ToolCall("c3", "list_variables", {}), 2)
    assert "- total: int = 8" in listed
    assert "math" not in listed  # modules are not variables of the user's
    states = [m["state"] for m in tool_messages(jp_serverapp, chat)]
    assert states == ["refused", "ran", "ran"]


async def test_list_variables_has_no_side_effects(
    jp_serverapp: Any, kernel: NotebookKernel
) -> None:
    tools, chat = tools_of(jp_serverapp), await chat_for(jp_serverapp)
    await kernel.run("grid = [[1, 2], [3, 4]]")
    before = await kernel.value("sorted(k for k in globals() if not k.startswith('_'))")
    count = await kernel.value("get_ipython().execution_count")
    listed = await tools.call(chat, ANALYST, ToolCall("c", "list_variables", {}), 0)
    assert "- grid: list, len 2 = [[1, 2], [3, 4]]" in listed
    assert await kernel.value("sorted(k for k in globals() if not k.startswith('_'))") == before
    assert await kernel.value("get_ipython().execution_count") == count
    history = await conch_of(jp_serverapp).tools.kernels.history("work.ipynb")  # type: ignore[union-attr]
    assert not any("user_ns" in h for h in history)


async def test_output_errors_and_pictures_come_back_as_text(
    jp_serverapp: Any, kernel: NotebookKernel
) -> None:
    tools, chat = tools_of(jp_serverapp), await chat_for(jp_serverapp, mode="auto")
    failed = await tools.call(chat, ANALYST, run("print('before')\n1 / 0"), 0)
    assert "before" in failed
    assert "ZeroDivisionError" in failed
    assert "\x1b[" not in failed  # no terminal colours
    picture = (
        "from IPython.display import display, Image\n"
        "display(Image(data=bytes.fromhex('89504e470d0a1a0a0000000d49484452'), format='png'))"
    )
    shown = await tools.call(chat, ANALYST, run(picture), 1)
    assert "[a picture (image/png) was shown in the notebook]" in shown
    long = await tools.call(chat, ANALYST, run("print('x' * 50_000)"), 2)
    assert len(long) <= OUTPUT_LIMIT
    assert "Output cut: 50,001 characters" in long
    states = [m["state"] for m in tool_messages(jp_serverapp, chat)]
    assert states == ["failed", "ran", "ran"]


async def test_stop_interrupts_the_agents_run_and_the_kernel_is_idle(
    jp_serverapp: Any, kernel: NotebookKernel
) -> None:
    tools, chat = tools_of(jp_serverapp), await chat_for(jp_serverapp, mode="auto")
    # Ten minutes of sleep: an idle kernel within half a minute of Stop can only be the interrupt
    # (a shared, loaded machine may take seconds to schedule the kernel's answer).
    code = "import time\ntime.sleep(600)"
    call = asyncio.ensure_future(tools.call(chat, ANALYST, run(code), 0))
    km = jp_serverapp.kernel_manager.get_kernel(kernel.kernel_id)
    await wait_for(lambda: _async((tools.working(chat) or {}).get("state") == "running"))
    await wait_for(lambda: _async(km.execution_state == "busy"))  # the kernel runs it
    started = time.monotonic()
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    assert time.monotonic() - started < 2  # Stop itself does not wait for the kernel
    await wait_for(lambda: _async(km.execution_state == "idle"), timeout=30)
    assert tool_messages(jp_serverapp, chat)[0]["state"] == "skipped"
    assert (await kernel.run("1 + 1"))["output"] == "2"  # the kernel still works


async def test_a_run_waits_for_the_users_cell_and_does_not_cost_it(
    jp_serverapp: Any, kernel: NotebookKernel
) -> None:
    tools, chat = tools_of(jp_serverapp), await chat_for(jp_serverapp, mode="auto")
    users = asyncio.ensure_future(kernel.run("import time\ntime.sleep(1.5)\nusers_cell = 'done'"))
    km = jp_serverapp.kernel_manager.get_kernel(kernel.kernel_id)
    await wait_for(lambda: _async(km.execution_state == "busy"))
    call = asyncio.ensure_future(tools.call(chat, ANALYST, run("agent_saw = users_cell"), 0))
    await wait_for(lambda: _async((tools.working(chat) or {}).get("state") == "waiting"))
    assert (await users)["status"] == "ok"
    await call
    assert await kernel.value("agent_saw") == "'done'"


async def test_a_run_past_its_bound_is_interrupted(
    jp_serverapp: Any, kernel: NotebookKernel
) -> None:
    kernels = conch_of(jp_serverapp).tools.kernels
    assert isinstance(kernels, NotebookKernels)
    kernels.run_seconds = 1.0
    tools, chat = tools_of(jp_serverapp), await chat_for(jp_serverapp, mode="auto")
    words = await tools.call(chat, ANALYST, run("print('start', flush=True)\nwhile True: pass"), 0)
    assert "start" in words
    assert "longer than" in words
    assert tool_messages(jp_serverapp, chat)[0]["state"] == "timeout"
    assert (await kernel.run("'alive'"))["output"] == "'alive'"


async def test_a_chat_without_a_notebook_answers_in_words(jp_serverapp: Any) -> None:
    tools, chat = tools_of(jp_serverapp), await chat_for(jp_serverapp, path=None, mode="auto")
    assert await tools.call(chat, ANALYST, run("x = 1"), 0) == NO_KERNEL_WORDS
    assert "no notebook" in await tools.call(chat, ANALYST, ToolCall("c", "read_notebook", {}), 1)
    assert await tools.call(chat, ANALYST, ToolCall("c", "list_variables", {}), 2) == (
        NO_KERNEL_WORDS
    )
    states = [m["state"] for m in tool_messages(jp_serverapp, chat)]
    assert states == ["refused", "ran", "ran"]
    # A notebook whose kernel is not running: the same words, nothing asked.
    ask = await chat_for(jp_serverapp, path="nowhere.ipynb")
    assert await tools.call(ask, ANALYST, run("x = 1"), 0) == NO_KERNEL_WORDS
    assert tools.asking(ask) == []


async def test_writing_skips_what_is_asking(jp_serverapp: Any, kernel: NotebookKernel) -> None:
    tools, chat = tools_of(jp_serverapp), await chat_for(jp_serverapp)
    call = asyncio.ensure_future(tools.call(chat, ANALYST, run("skipped = 1"), 0))
    await wait_for(lambda: _async(tools.asking(chat)))
    tools.skip_asking(chat)
    assert "did not let" in await call
    # … and what would ask later in that turn is skipped without asking.
    assert "did not let" in await tools.call(chat, ANALYST, run("skipped = 2"), 1)
    assert await kernel.value("'skipped' in globals()") == "False"


async def _async(value: Any) -> Any:
    return value


async def test_a_read_does_not_wait_long_for_the_users_cell(
    jp_serverapp: Any, kernel: NotebookKernel, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A cell may itself be waiting for the chat (`await chat.settled()`): reading must not
    # deadlock it, so after a short wait a read says the kernel is busy.
    from conch_jupyter.notebook import kernel as kernel_module
    from conch_jupyter.notebook.service import BUSY_WORDS

    monkeypatch.setattr(kernel_module, "READ_WAIT_SECONDS", 0.3)
    tools, chat = tools_of(jp_serverapp), await chat_for(jp_serverapp)
    users = asyncio.ensure_future(kernel.run("import time\ntime.sleep(3)"))
    km = jp_serverapp.kernel_manager.get_kernel(kernel.kernel_id)
    await wait_for(lambda: _async(km.execution_state == "busy"))
    listed = await tools.call(chat, ANALYST, ToolCall("c", "list_variables", {}), 0)
    read = await tools.call(chat, ANALYST, ToolCall("c", "read_notebook", {}), 1)
    assert listed == BUSY_WORDS
    assert read.endswith(BUSY_WORDS)
    assert "sales = [3, 1, 4]" in read  # the saved notebook is still read
    assert not users.done()
    await users


async def test_a_made_up_tool_is_refused_and_its_name_kept_short(jp_serverapp: Any) -> None:
    tools, chat = tools_of(jp_serverapp), await chat_for(jp_serverapp, mode="auto")
    words = await tools.call(chat, ANALYST, ToolCall("c", "set_mode_" + "x" * 5000, {}), 0)
    assert words.startswith("There is no tool called")
    [message] = tool_messages(jp_serverapp, chat)
    assert (message["state"], len(message["tool"])) == ("refused", 80)
    assert conch_of(jp_serverapp).store.get_conversation(chat).mode == "auto"  # type: ignore[union-attr]


async def test_stop_keeps_the_cells_the_user_queued_behind_the_agents_run(
    jp_serverapp: Any, kernel: NotebookKernel
) -> None:
    tools, chat = tools_of(jp_serverapp), await chat_for(jp_serverapp, mode="auto")
    call = asyncio.ensure_future(tools.call(chat, ANALYST, run("import time\ntime.sleep(60)"), 0))
    await wait_for(lambda: _async((tools.working(chat) or {}).get("state") == "running"))
    km = jp_serverapp.kernel_manager.get_kernel(kernel.kernel_id)
    await wait_for(lambda: _async(km.execution_state == "busy"))  # the agent's code runs
    queued = asyncio.ensure_future(kernel.run("queued = 'ran'\nqueued"))  # the user's next cell
    await asyncio.sleep(0.3)  # no signal says a request reached the kernel's queue: a moment
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    # The interrupt hit the agent's code only; the user's queued cell was not aborted.
    assert await queued == {"status": "ok", "output": "'ran'"}
    assert await kernel.value("queued") == "'ran'"


async def test_stop_the_moment_a_run_is_sent_still_stops_it(
    jp_serverapp: Any, kernel: NotebookKernel
) -> None:
    """A Stop that lands after the code was sent but before the kernel began it: that interrupt
    hits a kernel that is not running anything yet (ipykernel ignores it), so the run must be
    interrupted again once it has begun, never left to run on after Stop. Watched on the
    kernel's own broadcast (iopub), which every client of the kernel sees."""
    kernels = tools_of(jp_serverapp).kernels
    assert kernels is not None
    code = "import time\ntime.sleep(4)\nran_on = 'yes'"
    task: asyncio.Task[Any] | None = None

    def on_state(state: str) -> None:
        if state == "running" and task is not None:
            task.cancel()  # delivered at the run's next await: right after the code is sent

    task = asyncio.ensure_future(kernels.run(kernel.path, code, on_state))
    with pytest.raises(asyncio.CancelledError):
        await task
    stopped = time.monotonic()
    run_id, ended, raised = None, None, None
    while ended is None and time.monotonic() - stopped < 10:
        msg = await kernel.client.get_iopub_msg(timeout=10)
        kind, parent = msg["header"]["msg_type"], msg["parent_header"].get("msg_id")
        if kind == "execute_input" and msg["content"]["code"] == code:
            run_id = parent
        elif parent is not None and parent == run_id:
            if kind == "error":
                raised = msg["content"]["ename"]
            elif kind == "status" and msg["content"]["execution_state"] == "idle":
                ended = time.monotonic() - stopped
    assert raised == "KeyboardInterrupt"  # the agent's run was interrupted …
    assert ended is not None
    assert ended < 3  # … not slept through
    assert await kernel.value("'ran_on' in globals()") == "False"
    assert (await kernel.run("1 + 1"))["output"] == "2"  # the kernel still works


async def test_code_that_outlives_stop_is_followed_until_it_ends_by_itself(
    jp_serverapp: Any, kernel: NotebookKernel
) -> None:
    """Code that catches Stop's interrupt and ends later on its own: the call ends `skipped`
    saying the kernel is still busy, the chat is stuck meanwhile (reads say the kernel is busy
    at once, without waiting for it), and once the run ends the chat says so."""
    from conch_jupyter.notebook.rules import STILL_BUSY_WORDS
    from conch_jupyter.notebook.service import BUSY_WORDS

    tools, chat = tools_of(jp_serverapp), await chat_for(jp_serverapp, mode="auto")
    code = (
        "import time\nend = time.monotonic() + 3\nwhile time.monotonic() < end:\n"
        "    try:\n        time.sleep(0.05)\n    except KeyboardInterrupt:\n        pass\n"
        "outlived = 'yes'"
    )
    call = asyncio.ensure_future(tools.call(chat, ANALYST, run(code), 0))
    km = jp_serverapp.kernel_manager.get_kernel(kernel.kernel_id)
    await wait_for(lambda: _async((tools.working(chat) or {}).get("state") == "running"))
    await wait_for(lambda: _async(km.execution_state == "busy"))
    await asyncio.sleep(0.3)
    started = time.monotonic()
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    assert time.monotonic() - started < 2  # Stop does not wait for it
    [message] = tool_messages(jp_serverapp, chat)
    assert (message["state"], message["output"]) == ("skipped", STILL_BUSY_WORDS)
    stuck = tools.stuck(chat)
    assert stuck is not None
    assert stuck["words"] == "Analyst's code did not stop: the kernel is still busy."
    read_started = time.monotonic()
    listed = await tools.call(chat, ANALYST, ToolCall("c", "list_variables", {}), 1)
    assert listed == BUSY_WORDS
    assert time.monotonic() - read_started < 1
    assert km.execution_state == "busy"
    await wait_for(lambda: _async(tools.stuck(chat) is None), timeout=10)
    assert await kernel.value("outlived") == "'yes'"  # it ran to its end, by itself

    def idle_events() -> list[dict[str, Any]]:
        return [e for e in events(jp_serverapp, chat) if e["type"] == "kernel.idle"]

    [idle] = await wait_for(lambda: _async(idle_events()))
    assert (idle["call_id"], idle["after"]) == (message["call_id"], "itself")
    store = conch_of(jp_serverapp).store
    assert [m.text for m in store.messages(chat) if m.role == "note"] == [
        "Analyst's code has ended: the kernel is idle."
    ]
    # Nothing holds the kernel any more: the next run goes.
    assert await tools.call(chat, ANALYST, run("after = 1\nafter"), 2) == "1\n"
