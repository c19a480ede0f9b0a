"""The Host and Origin checks at the door answer as Jupyter's own: the Host rule the door runs
itself (local_host, for its cost: see door/http.py), the Origin check JupyterHandler's
check_origin called on the door's exchange, which is no Jupyter handler. Each case is put to the
door and to Jupyter's method on a bare stand-in, which must agree: they would part if Jupyter's
rule changed, or the exchange lacked something check_origin reads."""

from __future__ import annotations

import logging
from pathlib import Path
from types import SimpleNamespace

import pytest
from jupyter_server.base.handlers import JupyterHandler
from tornado.httputil import HTTPHeaders, HTTPServerRequest, RequestStartLine

from conch_jupyter.door.http import Door, DoorExchange, local_host

LOCAL = ["localhost"]
QUIET = logging.getLogger("test_door_checks")


def exchange(headers: dict[str, str], method: str = "POST", **settings: object) -> DoorExchange:
    """The door's exchange for a request with these headers, under these Jupyter settings."""
    version = "HTTP/1.1" if "Host" in headers else "HTTP/1.0"  # 1.1 must say its Host
    request = HTTPServerRequest(
        start_line=RequestStartLine(method, "/a2a/researcher", version),
        headers=HTTPHeaders(headers),
    )
    return DoorExchange(Door({"log_function": None, **settings}), request)


def origin_allowed(
    origin: str | None, host: str | None, allow_origin: str, allow_origin_pat: str | None
) -> bool:
    """The door's answer to a request with this Origin and Host, under these CORS settings."""
    headers = {k: v for k, v in (("Origin", origin), ("Host", host)) if v is not None}
    door = exchange(headers, allow_origin=allow_origin, allow_origin_pat=allow_origin_pat)
    return door._origin_allowed()


def jupyters_host_answer(host: str, local_hostnames: list[str]) -> bool:
    """JupyterHandler.check_host itself, on a stand-in with just what it reads."""
    handler = SimpleNamespace(
        settings={"local_hostnames": local_hostnames},
        request=SimpleNamespace(host=host),
        log=QUIET,
    )
    return bool(JupyterHandler.check_host(handler))  # type: ignore[arg-type]


def jupyters_origin_answer(
    origin: str | None, host: str | None, allow_origin: str, pattern: str | None
) -> bool:
    """JupyterHandler.check_origin itself, for a request with no token (as every door's)."""
    headers = {k: v for k, v in (("Origin", origin), ("Host", host)) if v is not None}
    handler = SimpleNamespace(
        allow_origin=allow_origin,
        allow_origin_pat=pattern,
        skip_check_origin=lambda: False,
        request=SimpleNamespace(headers=headers, path="/a2a/researcher"),
        log=QUIET,
    )
    return bool(JupyterHandler.check_origin(handler))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("host", "allowed"),
    [
        ("localhost", True),
        ("localhost:8888", True),
        ("127.0.0.1:8888", True),
        ("127.1.2.3", True),
        ("[::1]:8888", True),
        ("[::1]", True),
        ("evil.example", False),
        ("evil.example:8888", False),
        ("localhost.evil.example", False),
        ("10.0.0.5:8888", False),
        ("[2001:db8::1]:80", False),
        ("", False),
    ],
)
def test_the_host_rule_is_jupyters(host: str, allowed: bool) -> None:
    assert local_host(host, LOCAL) is allowed
    assert jupyters_host_answer(host, LOCAL) is allowed


def test_the_host_rule_takes_the_owners_local_hostnames_and_unix_sockets(tmp_path: Path) -> None:
    socket = tmp_path / "jupyter.sock"
    socket.write_text("")
    encoded = str(socket).replace("/", "%2F")
    for host, names, allowed in [
        ("notebook.lan:8888", ["localhost", "notebook.lan"], True),
        ("notebook.lan:8888", LOCAL, False),
        (encoded, LOCAL, True),
        (encoded.replace("jupyter.sock", "missing.sock"), LOCAL, False),
    ]:
        assert local_host(host, names) is allowed, host
        assert jupyters_host_answer(host, names) is allowed, host


@pytest.mark.parametrize(
    ("origin", "host", "allow_origin", "pattern", "allowed"),
    [
        (None, "localhost:8888", "", None, True),  # a script
        ("http://localhost:8888", None, "", None, True),
        ("http://localhost:8888", "localhost:8888", "", None, True),  # the page's own host
        ("HTTP://LOCALHOST:8888", "localhost:8888", "", None, True),
        ("https://evil.example", "localhost:8888", "", None, False),
        ("https://evil.example", "localhost:8888", "*", None, True),
        ("https://app.example", "localhost:8888", "https://app.example", None, True),
        ("https://evil.example", "localhost:8888", "https://app.example", None, False),
        ("https://a.app.example", "localhost:8888", "", r"https://.*\.app\.example", True),
        ("https://evil.example", "localhost:8888", "", r"https://.*\.app\.example", False),
    ],
)
def test_the_origin_rule_is_jupyters(
    origin: str | None, host: str | None, allow_origin: str, pattern: str | None, allowed: bool
) -> None:
    assert origin_allowed(origin, host, allow_origin, pattern) is allowed
    assert jupyters_origin_answer(origin, host, allow_origin, pattern) is allowed


def test_a_preflight_is_checked_like_any_request() -> None:
    # Jupyter skips the Origin check for OPTIONS (a CORS preflight) and for a token's request; the
    # door skips it for neither: no browser gets in, and it never asks the identity provider.
    evil = {"Origin": "https://evil.example", "Host": "localhost:8888"}
    assert not exchange(evil, method="OPTIONS")._origin_allowed()
    assert exchange({"Host": "localhost:8888"}, method="OPTIONS")._origin_allowed()
