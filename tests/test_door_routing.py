"""Where the door sits in tornado's router and which of its paths mean what: pure, no server
(the door's answers over real HTTP are test_door_server.py's and test_door_http.py's)."""

from __future__ import annotations

import logging

import pytest
from tornado import web
from tornado.httputil import HTTPHeaders, HTTPServerRequest, RequestStartLine

from conch_jupyter.server_ext.door_handlers import (
    NOTHING,
    Door,
    DoorExchange,
    DoorRoute,
    agent_id_of,
    door_route,
    install_door,
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
        ("a2a", NOTHING),
        ("a2a/", NOTHING),
        ("a2a/researcher//", NOTHING),
        ("a2a/researcher/tasks", NOTHING),
        ("a2a/researcher/.well-known/agent.json", NOTHING),
        (".well-known/agent.json", NOTHING),
        (".well-known/", NOTHING),
        ("a2a/researcher/.well-known/agent-card.jsonx", NOTHING),
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


def test_the_date_header_is_made_once_a_second() -> None:
    door = Door({})
    first = door.date()
    assert first.endswith(" GMT")
    assert door.date() is first


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
