"""The kernel's side of the hand-over (`ChatWidget.answered()`): while a cell waits for the
user's answer it holds the kernel, so a run the user approves cannot be queued behind it; the
waiting cell takes the run from the server and runs it itself, in the kernel's main thread and
the user's namespace, as a cell would (its output shows under the waiting cell; Stop's
interrupt lands on it as on any run), and gives the output back as the run's result.

What the cell shows the server to take its kernel's runs is `proof`: an HMAC of the kernel's id
with its own connection key (the server holds it too; the kernel key alone is every kernel's).
"""

from __future__ import annotations

import ast
import contextlib
import hashlib
import hmac
import signal
import sys
import threading
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

# What is sent back of a run's output: its start (the server keeps less for the agent), and its
# whole length, counted.
GIVE_LIMIT = 100_000
FILENAME = "<the agent's run>"


@dataclass(frozen=True)
class ThisKernel:
    kernel_id: str
    proof: str


def this_kernel(shell: Any = None) -> ThisKernel | None:
    """This kernel's id and proof, or None outside a Jupyter server's kernel (no hand-over)."""
    if shell is None:
        with contextlib.suppress(Exception):
            from IPython import get_ipython

            shell = get_ipython()
    kernel = getattr(shell, "kernel", None)
    key = getattr(getattr(kernel, "session", None), "key", None)
    # The kernel's app (IPKernelApp) was started with the server's connection file,
    # kernel-<id>.json.
    app = getattr(kernel, "parent", None)
    connection = str(getattr(app, "connection_file", "") or "")
    name = Path(connection).stem
    if not isinstance(key, bytes) or not key or not name.startswith("kernel-"):
        return None
    kernel_id = name.removeprefix("kernel-")
    said = b"conch-handover:" + kernel_id.encode()
    return ThisKernel(kernel_id, hmac.new(key, said, hashlib.sha256).hexdigest())


@dataclass
class _Tee:
    """Writes go on to the cell's own output, and the start of them is kept, all counted."""

    to: TextIO
    kept: list[str] = field(default_factory=list)
    size: int = 0
    total: int = 0

    def write(self, text: str) -> int:
        self.to.write(text)
        self.total += len(text)
        room = GIVE_LIMIT - self.size
        if room > 0:
            self.kept.append(text[:room])
            self.size += min(room, len(text))
        return len(text)

    def flush(self) -> None:
        self.to.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.to, name)


@contextlib.contextmanager
def _interruptible() -> Any:
    """Stop's interrupt raises KeyboardInterrupt in the run, as in any cell. In a cell that
    awaits, ipykernel turns SIGINT into cancelling the cell's coroutine, which a run blocking
    the loop would only see once it ended; so Python's own handler, for the run's length."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)


@dataclass(frozen=True)
class Ran:
    output: str
    total: int
    failed: bool


def run_here(code: str, namespace: dict[str, Any]) -> Ran:
    """Run the approved code as a cell would: in `namespace`, its last expression's value shown,
    its output under this cell and kept; an error or Stop's KeyboardInterrupt said in its
    output (the run failed), never raised into the waiting cell."""
    out = _Tee(sys.stdout)
    err = _Tee(sys.stderr)
    failed = False
    with _interruptible(), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            tree = ast.parse(code, FILENAME)
            last = tree.body[-1] if tree.body else None
            if isinstance(last, ast.Expr):
                tree.body.pop()
            else:
                last = None
            # The code the user approved in the chat, exactly as shown there (docs/security.md).
            exec(compile(tree, FILENAME, "exec"), namespace)  # noqa: S102
            if isinstance(last, ast.Expr):
                shown = compile(ast.Expression(last.value), FILENAME, "eval")
                value = eval(shown, namespace)  # noqa: S307 (its last line, as a cell shows it)
                if value is not None:
                    print(repr(value))
        except (Exception, KeyboardInterrupt, SystemExit):
            failed = True
            kind, error, trace = sys.exc_info()
            lines = traceback.format_exception(kind, error, trace.tb_next if trace else None)
            sys.stderr.write("".join(lines))
    text = "".join(out.kept) + "".join(err.kept)
    return Ran(text[:GIVE_LIMIT], out.total + err.total, failed)
