"""One running MCP server, through the official SDK's client (`mcp.Client`): a stdio server as a
process of its own, or a Streamable HTTP server at its URL. Conch writes no MCP framing.

Theory of operation: the SDK's client is an async context that must be entered and left in one
task, so each connection holds it open in a task of its own (`_hold`) until it is closed; calls
come from the turns' tasks. A call cancelled by its caller (Stop, the deadline) is cancelled at
the server too: the SDK sends `notifications/cancelled` for a request its caller abandoned.

A stdio server runs in a process group of its own (the SDK starts it in a new session). The SDK
ends the group only when the leader does not exit by itself once its stdin closes; a leader that
exits leaves its children running. So Conch ends the whole group itself once the SDK is done
(on close, on a crash, when the server stops). To know the group, the server is started through
a one-line launcher that writes its own pid (the group's id, as the leader of a new session) to
a private file and then becomes the server (exec keeps the pid).

The server's environment is the SDK's short default one (HOME, PATH, USER…) plus what you set;
never the kernel key or the Jupyter token (values equal to those are left out).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import sys
import tempfile
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any

import httpx2
import mcp_types
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError
from mcp_types.jsonrpc import CONNECTION_CLOSED

from ..store.mcp_servers import McpServerRow

START_SECONDS = 20.0
STDERR_TAIL = 400
_LAUNCH = (
    "import os,sys\n"
    "fd=os.open(sys.argv[1],os.O_WRONLY|os.O_CREAT|os.O_TRUNC,0o600)\n"
    "os.write(fd,str(os.getpid()).encode());os.close(fd)\n"
    "os.execvp(sys.argv[2],sys.argv[2:])\n"
)


class ServerProblem(Exception):
    """The server would not start, hung, crashed or answered garbage: `words` say which.
    No ConchError: it is never an HTTP answer; the turn (a note, a tool line) and the server's
    row (`problem`) say it in words."""

    def __init__(self, words: str) -> None:
        super().__init__(words)
        self.words = words


@dataclass(frozen=True)
class Target:
    """How to reach one server: its row, with its sealed values opened."""

    row: McpServerRow
    env: Mapping[str, str]
    headers: Mapping[str, str]


def end_group(pgid: int | None) -> None:
    """End a stdio server's whole process group (SIGKILL: the SDK's grace has passed)."""
    if pgid is None or pgid <= 1:
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class Connection:
    """One server, started once and held open until `close` (or until it breaks)."""

    def __init__(
        self,
        target: Target,
        *,
        secrets: Collection[str] = (),
        on_tools_changed: Callable[[], None] | None = None,
        client_version: str = "",
    ) -> None:
        self.target = target
        self.name = target.row.name
        self._secrets = {s for s in secrets if s}
        self._on_tools_changed = on_tools_changed
        self._version = client_version
        self._client: Client | None = None
        self._task: asyncio.Task[None] | None = None
        self._ready: asyncio.Future[None] | None = None
        self._closing = asyncio.Event()
        self._dir: tempfile.TemporaryDirectory[str] | None = None
        self._stderr: Any = None
        self.pgid: int | None = None
        self._pidfile: str | None = None
        self.broken: str | None = None  # why it no longer works, once it broke

    # --- life ---

    async def start(self, seconds: float = START_SECONDS) -> list[Any]:
        """Start the server and list its tools (the SDK's Tool objects); ServerProblem if not."""
        loop = asyncio.get_running_loop()
        self._ready = loop.create_future()
        # Read even when nobody waits any more (a start that timed out fails later).
        self._ready.add_done_callback(lambda f: f.cancelled() or f.exception())
        self._task = asyncio.create_task(self._hold(), name=f"conch-mcp-{self.name}")
        try:
            await asyncio.wait_for(asyncio.shield(self._ready), seconds)
            self._read_pgid()
            return await self.list_tools(seconds)
        except asyncio.TimeoutError:
            await self.close()
            raise ServerProblem(
                f"The MCP server {self.name} did not answer within {seconds:g} seconds of starting."
            ) from None
        except ServerProblem:
            await self.close()
            raise
        except asyncio.CancelledError:
            await self.close()
            raise

    async def list_tools(self, seconds: float = START_SECONDS) -> list[Any]:
        client = self._live()
        tools: list[Any] = []
        cursor: str | None = None
        try:
            for _ in range(20):  # pages; a server that pages forever is cut off
                page = await asyncio.wait_for(client.list_tools(cursor=cursor), seconds)
                tools.extend(page.tools)
                cursor = page.next_cursor
                if not cursor:
                    break
        except asyncio.TimeoutError:
            raise self._broke(f"did not list its tools within {seconds:g} seconds") from None
        except (MCPError, ValueError, OSError, httpx2.HTTPError) as error:
            raise self._broke(f"could not list its tools: {_said(error)}") from None
        return tools

    async def call(self, tool: str, arguments: Mapping[str, Any]) -> Any:
        """Call one tool (the SDK's CallToolResult). Cancelling the caller cancels it at the
        server. ServerProblem when the server broke (crashed, garbage, gone)."""
        client = self._live()
        try:
            return await client.call_tool(tool, dict(arguments))
        except MCPError as error:
            gone = self._task is None or self._task.done() or not self._leader_alive()
            if error.code == CONNECTION_CLOSED or gone:
                raise self._broke(f"stopped answering ({_said(error)})") from None
            words = f"The MCP server {self.name} refused the call: {_said(error)}"
            raise ServerProblem(words) from None
        except (ValueError, OSError, httpx2.HTTPError) as error:
            raise self._broke(f"answered with something that is not MCP: {_said(error)}") from None

    async def close(self) -> None:
        """Leave the SDK's client (it closes the pipes or the HTTP session), then end the whole
        process group of a stdio server."""
        self._closing.set()
        task, self._task = self._task, None
        if task is not None and not task.done():
            try:
                await asyncio.wait_for(asyncio.shield(task), 8.0)
            except (asyncio.TimeoutError, Exception):
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task
        end_group(self.pgid)
        self._client = None
        if self._stderr is not None:
            with contextlib.suppress(OSError):
                self._stderr.close()
            self._stderr = None
        if self._dir is not None:
            self._dir.cleanup()
            self._dir = None

    @property
    def alive(self) -> bool:
        return self._client is not None and self.broken is None and not self._closing.is_set()

    # --- inside ---

    def _live(self) -> Client:
        if self._client is None or self.broken is not None:
            raise ServerProblem(self.broken or f"The MCP server {self.name} is not running.")
        return self._client

    def _broke(self, what: str) -> ServerProblem:
        tail = self._stderr_tail()
        words = f"The MCP server {self.name} {what}." + (f" It said: {tail}" if tail else "")
        self.broken = words
        return ServerProblem(words)

    async def _hold(self) -> None:
        ready = self._ready
        assert ready is not None
        try:
            async with self._client_for() as client:
                self._client = client
                if not ready.done():
                    ready.set_result(None)
                await self._closing.wait()
        except BaseException as error:  # the SDK's own task groups raise groups of errors
            if not ready.done():
                ready.set_exception(self._start_problem(error))
            elif self.broken is None and not self._closing.is_set():
                self.broken = f"The MCP server {self.name} stopped: {_said(error)}"
            if isinstance(error, asyncio.CancelledError):
                raise
        finally:
            self._client = None
            end_group(self._read_pgid())
            if not self._closing.is_set() and self.broken is None:
                self.broken = f"The MCP server {self.name} stopped."

    def _client_for(self) -> Client:
        row = self.target.row
        info = mcp_types.Implementation(name="conch-jupyter", version=self._version or "0")
        common: dict[str, Any] = {
            "mode": "legacy",  # the initialize handshake every server speaks
            "cache": None,  # a tool list is fetched afresh when asked
            "client_info": info,
            "message_handler": self._on_message,
        }
        if row.transport == "http":
            assert row.url is not None
            http = httpx2.AsyncClient(
                headers=dict(self.target.headers), timeout=httpx2.Timeout(30.0, read=300.0)
            )
            return Client(_HttpTransport(row.url, http), **common)
        command = row.command or ""
        if shutil.which(command) is None:
            raise ServerProblem(
                f"The program {command!r} of the MCP server {self.name} is not found."
            )
        self._dir = tempfile.TemporaryDirectory(prefix="conch-mcp-")
        pidfile = os.path.join(self._dir.name, "pid")
        self._pidfile = pidfile
        env = {k: v for k, v in self.target.env.items() if v not in self._secrets}
        # Kept open while the server runs (its stderr), closed by close().
        self._stderr = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")  # noqa: SIM115
        params = StdioServerParameters(
            command=sys.executable,
            args=["-c", _LAUNCH, pidfile, command, *row.args],
            env=env,
        )
        return _stdio_client(params, self._stderr, common)

    def _leader_alive(self) -> bool:
        """Whether a stdio server's first process still runs (an HTTP server: always)."""
        pgid = self._read_pgid()
        if pgid is None:
            return self.target.row.transport == "http"
        try:
            os.kill(pgid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        waited = _reaped(pgid)
        return not waited

    def _read_pgid(self) -> int | None:
        if self.pgid is None and self._pidfile is not None:
            with contextlib.suppress(OSError, ValueError), open(self._pidfile) as file:
                self.pgid = int(file.read().strip() or "0") or None
        return self.pgid

    def _start_problem(self, error: BaseException) -> ServerProblem:
        if isinstance(error, ServerProblem):
            return error
        found = _leaf(error)
        if isinstance(found, ServerProblem):
            return found
        tail = self._stderr_tail()
        words = f"The MCP server {self.name} did not start: {_said(found)}"
        return ServerProblem(words + (f" It said: {tail}" if tail else ""))

    def _stderr_tail(self) -> str:
        file = self._stderr
        if file is None:
            return ""
        try:
            file.flush()
            file.seek(0)
            text = file.read()
            file.seek(0, os.SEEK_END)
        except (OSError, ValueError):
            return ""
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        return " / ".join(lines[-3:])[-STDERR_TAIL:]

    async def _on_message(self, message: Any) -> None:
        changed = isinstance(message, mcp_types.ToolListChangedNotification)
        if changed and self._on_tools_changed is not None:
            self._on_tools_changed()
        await asyncio.sleep(0)


def _reaped(pid: int) -> bool:
    """Whether `pid`, a child of ours, is a zombie (exited, not yet reaped by the SDK)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as file:
            return file.read().rsplit(")", 1)[-1].split()[0] == "Z"
    except (OSError, IndexError):
        return False


def _stdio_client(params: StdioServerParameters, errlog: Any, common: dict[str, Any]) -> Client:
    """The SDK's client over its stdio transport, the server's stderr kept in `errlog`."""
    from mcp.client.stdio import stdio_client

    return Client(stdio_client(params, errlog=errlog), **common)


def _HttpTransport(url: str, http: httpx2.AsyncClient) -> Any:
    """The SDK's Streamable HTTP transport with your headers (its own client otherwise)."""
    from mcp.client.streamable_http import streamable_http_client

    return _Owning(streamable_http_client(url, http_client=http), http)


class _Owning:
    """A transport that closes the HTTP client it was given once it is left."""

    def __init__(self, inner: Any, http: httpx2.AsyncClient) -> None:
        self._inner = inner
        self._http = http

    async def __aenter__(self) -> Any:
        return await self._inner.__aenter__()

    async def __aexit__(self, *exc: Any) -> Any:
        try:
            return await self._inner.__aexit__(*exc)
        finally:
            await self._http.aclose()


def _leaf(error: BaseException) -> BaseException:
    """The first real error inside exception groups."""
    inner = getattr(error, "exceptions", None)  # an exception group (3.11's, or anyio's)
    while isinstance(inner, tuple) and inner and isinstance(inner[0], BaseException):
        error = inner[0]
        inner = getattr(error, "exceptions", None)
    return error


def _said(error: BaseException) -> str:
    error = _leaf(error)
    text = str(error).strip() or type(error).__name__
    return (
        f"{type(error).__name__}: {text}"[:300] if not isinstance(error, MCPError) else text[:300]
    )
