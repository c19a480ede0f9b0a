"""Where the door sits in tornado's router and which of its paths mean what: pure, no server
(the door's answers over real HTTP are test_door_server.py's and test_door_http.py's)."""

from __future__ import annotations

import json
import logging

import pytest
from tornado import web
from tornado.httputil import HTTPHeaders, HTTPServerRequest, RequestStartLine

from conch_jupyter.a2a.wire import rpc_result
from conch_jupyter.door.http import (
    NOTHING,
    Answers,
    Door,
    DoorExchange,
    DoorRoute,
    agent_id_of,
    door_route,
    install_door,
    rpc_result_text,
    writes_debug,
)


@pytest.mark.parametrize(
    ("path", "route"),
    [
        (".well-known/agent-card.json", DoorRoute("card", "GET", None)),
        ("a2a/researcher/.well-known/agent-card.json", DoorRoute("card", "GET", "researcher")),
        ("a2a/researcher", DoorRoute("rpc", "POST", "researcher")),
        ("a2a/researcher/", DoorRoute("rpc", "POST", "researcher")),
        ("a2a/r%C3%A9searcher", DoorRoute("rpc", "POST", "r%C3%A9searcher")),
        ("a2a/" + "x" * 300, DoorRoute("rpc", "POST", "x" * 300)),
        ("a2a/" + "x" * 301, NOTHING),
        # The longest route there is, and one character more (not read, and not kept).
        ("a2a/" + "x" * 300 + "/.well-known/agent-card.json", DoorRoute("card", "GET", "x" * 300)),
        ("a2a/" + "x" * 301 + "/.well-known/agent-card.json", NOTHING),
        ("a2a", NOTHING),
        ("a2a/", NOTHING),
        ("a2a/researcher//", NOTHING),
        ("a2a/researcher/tasks", NOTHING),
        ("a2a/researcher/.well-known/agent.json", NOTHING),
        (".well-known/agent.json", NOTHING),
        (".well-known/", NOTHING),
        ("a2a/researcher/.well-known/agent-card.jsonx", NOTHING),
        (".well-known/jwks.json", DoorRoute("keys", "GET")),  # the key the cards are signed with
        ("a2a/researcher/.well-known/jwks.json", NOTHING),
        (".well-known/jwks.jsonx", NOTHING),
    ],
)
def test_each_door_path_means_one_thing(path: str, route: DoorRoute) -> None:
    assert door_route(path) == route


def test_an_agents_id_is_read_from_its_percent_encoding_and_must_be_utf8() -> None:
    assert agent_id_of("r%C3%A9searcher") == "résearcher"
    assert agent_id_of("a+b") == "a+b"  # a path, not a form: "+" is itself
    with pytest.raises(UnicodeDecodeError):
        agent_id_of("%FF%FE")


class Everything(web.RequestHandler):
    """Stands for the rest of the server: every other rule."""


@pytest.mark.parametrize("base_url", ["/", "/user/a.b+c/", "/user/a%40b/"])
def test_the_door_is_the_routers_first_rule_and_takes_only_its_own_paths(base_url: str) -> None:
    app = web.Application([(r"/.*", Everything)], base_url=base_url)
    door = install_door(app)
    assert app.default_router.rules[0].target is door

    def delegate(path: str) -> object:
        request = HTTPServerRequest(
            start_line=RequestStartLine("POST", path, "HTTP/1.1"),
            headers=HTTPHeaders({"Host": "127.0.0.1"}),
        )
        request.connection = None
        return app.find_handler(request)

    for path in ("a2a/researcher", ".well-known/agent-card.json", "a2a", "a2a/x/y/z"):
        found = delegate(base_url + path)
        assert isinstance(found, DoorExchange), path
        assert found.door is door
    for path in ("a2a2/x", "conch/api/a2a", "api/contents/a2a/x", "well-known"):
        assert not isinstance(delegate(base_url + path), DoorExchange), path
    # a regular-expression character in base_url stands for itself
    if "." in base_url:
        assert not isinstance(delegate(base_url.replace(".", "x") + "a2a/r"), DoorExchange)


def test_an_answers_headers_are_made_once_a_second_with_the_owners_but_not_their_csp() -> None:
    owners = {"X-Frame-Options": "DENY", "Content-Security-Policy": "frame-ancestors 'none'"}
    door = Door({"base_url": "/u/", "headers": owners})
    first = door.headers()
    assert door.headers() is first
    assert first["Date"].endswith(" GMT")
    assert first["X-Frame-Options"] == "DENY"
    assert first["Content-Security-Policy"] == "frame-ancestors 'none'; default-src 'none'"
    assert list(first)[-3:] == ["Content-Security-Policy", "Cache-Control", "Content-Type"]
    assert Door({"base_url": "/u/"}).headers()["Content-Security-Policy"] == (
        "frame-ancestors 'self'; report-uri /u/api/security/csp-report; default-src 'none'"
    )


def test_a_debug_line_is_written_only_where_a_handler_takes_it() -> None:
    logger = logging.getLogger("test_door_routing.writes_debug")
    logger.propagate = False
    logger.setLevel(logging.DEBUG)
    assert not writes_debug(logger)  # no handler (and lastResort takes warnings only)
    info = logging.NullHandler(logging.INFO)
    logger.addHandler(info)
    assert not writes_debug(logger)  # traitlets' way: the logger at DEBUG, the handler not
    everything = logging.NullHandler()
    logger.addHandler(everything)
    assert writes_debug(logger)
    logger.setLevel(logging.INFO)
    assert not writes_debug(logger)
    child = logging.getLogger("test_door_routing.writes_debug.child")
    logger.setLevel(logging.DEBUG)
    assert writes_debug(child)  # through its parent's handler
    for handler in (info, everything):
        logger.removeHandler(handler)


@pytest.mark.parametrize("request_id", [7, "abc", None, 'a "quoted" id'])
def test_a_result_made_already_is_sent_as_json_dumps_would_send_it(request_id: object) -> None:
    result = {"id": "t", "status": {"state": "TASK_STATE_COMPLETED"}, "text": "é “x”"}
    made = rpc_result_text(request_id, json.dumps(result).encode())  # type: ignore[arg-type]
    assert made == json.dumps(rpc_result(request_id, result)).encode()  # type: ignore[arg-type]


def test_kept_answers_hold_while_the_store_has_not_changed() -> None:
    answers, made = Answers(), []

    def make(text: str) -> object:
        made.append(text)
        return {"said": text}

    assert answers.text(("t1",), 1, lambda: make("first")) == b'{"said": "first"}'
    assert answers.text(("t1",), 1, lambda: make("second")) == b'{"said": "first"}'
    assert answers.text(("t2",), 1, lambda: make("other")) == b'{"said": "other"}'
    # Any commit (a new data_version) and everything is made again.
    assert answers.text(("t1",), 2, lambda: make("third")) == b'{"said": "third"}'
    assert made == ["first", "other", "third"]
    # Bounded: once full, it starts again.
    for n in range(Answers.LIMIT + 5):
        answers.text((n,), 2, lambda: make("many"))
    assert len(answers._texts) <= Answers.LIMIT
