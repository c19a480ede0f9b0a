"""`await chat.answered()` (issue 23, item 8): with Run All, the cell after an approval waits
for the user's answer, says what it waits for, and the approved run is handed to it: it runs in
this kernel's main thread (the cell holds the kernel), so the cells queued after it see what the
run made. A real server, a real kernel, the user's answers over the real API; the kernel key
can take only what the user approved for that very kernel, and Stop still ends the run."""

from __future__ import annotations

import hashlib
import hmac
import queue
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from jupyter_client.blocking import BlockingKernelClient

from ..support.jupyter_process import JupyterProcess, notebook_session, running_jupyter

pytestmark = pytest.mark.timeout(240)

ASK = "%%conch\n@Writer please run this:\n```python\n{code}\n```"
WAIT = "from conch_jupyter.widget import this_chat\nchat = this_chat()\nawait chat.answered()"


@dataclass
class Cell:
    stdout: str = ""
    stderr: str = ""
    errors: list[str] = field(default_factory=list)
    done: bool = False


@dataclass
class Kernel:
    client: BlockingKernelClient
    kernel_id: str
    session_key: bytes

    def run_all(self, cells: list[str]) -> list[str]:
        """Queue every cell at once, as Run All does."""
        return [self.client.execute(code, stop_on_error=True) for code in cells]

    def collect(self, ids: list[str], timeout: float = 90) -> dict[str, Cell]:
        cells = {i: Cell() for i in ids}
        deadline = time.monotonic() + timeout
        while not all(c.done for c in cells.values()):
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"the cells did not end in {timeout} s: {cells}")
            try:
                msg = self.client.get_iopub_msg(timeout=min(left, 1))
            except queue.Empty:
                continue
            cell = cells.get(msg["parent_header"].get("msg_id", ""))
            if cell is None:
                continue
            kind, content = msg["header"]["msg_type"], msg["content"]
            if kind == "stream":
                if content["name"] == "stdout":
                    cell.stdout += content["text"]
                else:
                    cell.stderr += content["text"]
            elif kind == "error":
                cell.errors.append("\n".join(content["traceback"]))
            elif kind == "status" and content["execution_state"] == "idle":
                cell.done = True
        return cells

    def proof(self) -> str:
        said = b"conch-handover:" + self.kernel_id.encode()
        return hmac.new(self.session_key, said, hashlib.sha256).hexdigest()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JupyterProcess]:
    with running_jupyter(tmp_path_factory.mktemp("answered"), offline_delay=0.01) as process:
        yield process


@pytest.fixture(scope="module")
def kernel(server: JupyterProcess) -> Iterator[Kernel]:
    with notebook_session(server, "demo.ipynb") as (kernel_id, client):
        ran = Kernel(client, kernel_id, client.session.key)
        [loaded] = ran.run_all(["%load_ext conch_jupyter"])
        assert ran.collect([loaded])[loaded].errors == []
        yield ran


def the_chat(server: JupyterProcess, http: httpx.Client) -> dict[str, Any]:
    """The notebook's chat ({} until its first %conch cell has made it)."""
    chats = [
        c
        for c in http.get(server.api("conversations")).json()["conversations"]
        if c["path"] == "demo.ipynb"
    ]
    if not chats:
        return {}
    full: dict[str, Any] = http.get(server.api(f"conversations/{chats[0]['id']}")).json()
    return full


def asking(server: JupyterProcess, http: httpx.Client, code: str) -> tuple[str, dict[str, Any]]:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        chat = the_chat(server, http)
        for entry in chat.get("asking", []):
            if entry["code"] == code:
                return chat["id"], entry
        time.sleep(0.05)
    raise AssertionError(f"nothing asked to run {code!r}")


def answer(server: JupyterProcess, http: httpx.Client, chat_id: str, call: str, run: bool) -> None:
    said = http.post(server.api(f"conversations/{chat_id}/tools/{call}"), json={"run": run})
    assert said.status_code == 200, said.text


def tools(server: JupyterProcess, http: httpx.Client) -> list[tuple[str, str]]:
    chat = the_chat(server, http)
    return [(m["state"], m["output"]) for m in chat["messages"] if m["role"] == "tool"]


def test_run_all_waits_for_your_yes_and_the_next_cells_see_the_run(
    server: JupyterProcess, kernel: Kernel
) -> None:
    code = "total = sum([3, 1, 4, 1, 5])\nprint('the sum is', total)"
    ids = kernel.run_all([ASK.format(code=code), WAIT, "print(total * 2)"])
    with server.client() as http:
        chat_id, entry = asking(server, http, code)
        time.sleep(1.0)  # a person reads the code before pressing Run
        answer(server, http, chat_id, entry["call_id"], True)
        cells = kernel.collect(ids)
        ask, wait, after = (cells[i] for i in ids)
        assert [ask.errors, wait.errors, after.errors] == [[], [], []]
        assert "Waiting for your answer in the chat: Writer asks to run code in this kernel." in (
            wait.stdout
        )
        assert "the sum is 14" in wait.stdout  # the run's output, under the waiting cell
        assert after.stdout.strip() == "28"
        assert ("ran", "the sum is 14\n") in tools(server, http)


def test_dont_run_ends_the_wait_and_runs_nothing(server: JupyterProcess, kernel: Kernel) -> None:
    code = "never_made = 1"
    ids = kernel.run_all([ASK.format(code=code), WAIT, "print('never_made' in globals())"])
    with server.client() as http:
        chat_id, entry = asking(server, http, code)
        time.sleep(1.0)
        answer(server, http, chat_id, entry["call_id"], False)
        cells = kernel.collect(ids)
        ask, wait, after = (cells[i] for i in ids)
        assert [ask.errors, wait.errors, after.errors] == [[], [], []]
        assert "Waiting for your answer" in wait.stdout
        assert after.stdout.strip() == "False"
        assert tools(server, http)[-1][0] == "skipped"


def test_stop_during_a_handed_run_interrupts_it(server: JupyterProcess, kernel: Kernel) -> None:
    code = "import time\ntime.sleep(60)\nslept = True"
    ids = kernel.run_all([ASK.format(code=code), WAIT, "print('slept' in globals())"])
    with server.client() as http:
        chat_id, entry = asking(server, http, code)
        time.sleep(0.5)
        answer(server, http, chat_id, entry["call_id"], True)
        deadline = time.monotonic() + 30
        while (the_chat(server, http).get("working") or {}).get("state") != "running":
            assert time.monotonic() < deadline, "the handed run never began"
            time.sleep(0.05)
        time.sleep(0.5)
        started = time.monotonic()
        stopped = http.post(server.api(f"conversations/{chat_id}/round/stop"))
        assert stopped.status_code == 200, stopped.text
        cells = kernel.collect(ids, timeout=30)
        assert time.monotonic() - started < 10
        ask, wait, after = (cells[i] for i in ids)
        assert [ask.errors, wait.errors, after.errors] == [[], [], []]
        assert "KeyboardInterrupt" in wait.stderr  # the run's own output says it was stopped
        assert after.stdout.strip() == "False"
        assert tools(server, http)[-1][0] == "skipped"
    [again] = kernel.run_all(["print(6 * 7)"])
    assert kernel.collect([again])[again].stdout.strip() == "42"  # the kernel still works


def test_the_kernel_key_takes_only_what_you_approved_for_that_kernel(
    server: JupyterProcess, kernel: Kernel
) -> None:
    [read] = kernel.run_all(["import os; print(os.environ['CONCH_KERNEL_KEY'])"])
    key = kernel.collect([read])[read].stdout.strip()
    code = "not_yet = 1"
    [ask] = kernel.run_all([ASK.format(code=code)])
    kernel.collect([ask])
    handed = server.api(f"kernels/{kernel.kernel_id}/handed")
    with httpx.Client(
        headers={"X-Conch-Kernel-Key": key}, trust_env=False, timeout=10
    ) as as_kernel:
        chat_id, entry = asking(server, as_kernel, code)
        # Without this kernel's proof: nothing, in words.
        no_proof = as_kernel.post(handed, json={"wait": 0})
        assert no_proof.status_code == 400
        wrong = as_kernel.post(handed, json={"proof": "0" * 64, "wait": 0})
        assert (wrong.status_code, wrong.json()["error"]["code"]) == (403, "not_this_kernel")
        other = server.api("kernels/another-kernel/handed")
        assert as_kernel.post(other, json={"proof": kernel.proof(), "wait": 0}).status_code == 403
        # With it, while the run still asks: no run is handed (only an approved one is).
        took = as_kernel.post(handed, json={"proof": kernel.proof(), "wait": 1})
        assert took.status_code == 200
        assert took.json() == {"run": None}
        # The kernel key cannot answer the call itself.
        yes = as_kernel.post(
            server.api(f"conversations/{chat_id}/tools/{entry['call_id']}"), json={"run": True}
        )
        assert (yes.status_code, yes.json()["error"]["code"]) == (403, "only_the_user")
        # Nor give a result for a run nobody handed it.
        given = as_kernel.post(
            handed + "/" + "a" * 32,
            json={"proof": kernel.proof(), "output": "42", "total": 2, "failed": False},
        )
        assert (given.status_code, given.json()["error"]["code"]) == (404, "no_handed_run")
    with server.client() as http:
        answer(server, http, chat_id, entry["call_id"], False)
        deadline = time.monotonic() + 30
        while the_chat(server, http)["busy"]:
            assert time.monotonic() < deadline
            time.sleep(0.05)
    [check] = kernel.run_all(["print('not_yet' in globals())"])
    assert kernel.collect([check])[check].stdout.strip() == "False"
