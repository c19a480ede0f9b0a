"""Hostile input on the A2A side, under hypothesis: the door's JSON-RPC reading, card and answer
parsing, and paste reading each either succeed or refuse in their own documented way — never any
other exception, never a hang. Then the door itself on a real server: never a 5xx.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conch_jupyter.a2a.door.calls import Call, Refusal, read_call
from conch_jupyter.a2a.outside.paste import Paste, PasteError, read_paste
from conch_jupyter.a2a.reading import CardInfo, Outcome, parse_card, parse_outcome
from conch_jupyter.a2a.wire import WireError

from ..support.jupyter_process import JupyterProcess

pytestmark = pytest.mark.timeout(600)

EXAMPLES = int(os.environ.get("CONCH_FUZZ_EXAMPLES", "150"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=40)
json_values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4)
    ),
    max_leaves=25,
)
METHODS = [
    "SendMessage",
    "message/send",
    "GetTask",
    "tasks/get",
    "ListTasks",
    "CancelTask",
    "tasks/cancel",
    "GetExtendedAgentCard",
    "SendStreamingMessage",
    "CreateTaskPushNotificationConfig",
]
# Requests shaped almost like real calls, so the fuzz reaches past the envelope checks.
calls = st.fixed_dictionaries(
    {"jsonrpc": st.just("2.0") | scalars, "method": st.sampled_from(METHODS) | scalars},
    optional={
        "id": scalars,
        "params": st.fixed_dictionaries(
            {},
            optional={
                "message": st.fixed_dictionaries(
                    {},
                    optional={
                        "messageId": scalars,
                        "role": st.sampled_from(["ROLE_USER", "user", "ROLE_AGENT"]) | scalars,
                        "parts": st.lists(
                            st.fixed_dictionaries({}, optional={"text": scalars, "kind": scalars})
                            | json_values,
                            max_size=3,
                        )
                        | json_values,
                        "contextId": scalars,
                        "taskId": scalars,
                    },
                ),
                "id": scalars,
                "historyLength": scalars,
                "pageSize": scalars,
                "pageToken": scalars,
                "configuration": json_values,
            },
        )
        | json_values,
    },
)
card_like = st.fixed_dictionaries(
    {},
    optional={
        "name": scalars,
        "description": scalars,
        "version": scalars,
        "url": st.sampled_from(["http://127.0.0.1:1/a2a", "file:///etc/passwd", "data:,x"])
        | scalars,
        "preferredTransport": st.sampled_from(["JSONRPC", "GRPC"]) | scalars,
        "supportedInterfaces": st.lists(
            st.fixed_dictionaries(
                {},
                optional={
                    "url": scalars,
                    "protocolBinding": st.sampled_from(["JSONRPC", "HTTP+JSON"]) | scalars,
                    "protocolVersion": scalars,
                },
            )
            | json_values,
            max_size=3,
        )
        | json_values,
        "provider": st.fixed_dictionaries({}, optional={"organization": scalars}) | json_values,
    },
)
answer_like = st.fixed_dictionaries(
    {},
    optional={
        "task": json_values
        | st.fixed_dictionaries(
            {},
            optional={
                "id": scalars,
                "status": st.fixed_dictionaries({}, optional={"state": scalars}) | json_values,
                "artifacts": json_values,
            },
        ),
        "message": json_values,
        "kind": st.sampled_from(["task", "message"]) | scalars,
        "status": json_values,
        "parts": json_values,
        "id": scalars,
    },
)


def attempt(expected: type[Exception], fn: Any, *args: Any) -> Any:
    """What `fn` returns, or the refusal it raises; any other exception fails the test."""
    try:
        return fn(*args)
    except expected as refusal:
        return refusal


@FUZZ
@given(
    body=calls.map(lambda c: json.dumps(c).encode()) | st.binary(max_size=200),
    content_type=st.sampled_from(
        ["application/json", "application/json; charset=utf-8", "text/plain", None]
    ),
    version=st.sampled_from(["1.0", "0.3", "", None, "2.0", "1.0.1"]),
)
def test_the_door_reads_any_body_into_a_call_or_a_refusal(
    body: bytes, content_type: str | None, version: str | None
) -> None:
    call = attempt(Refusal, read_call, body, content_type, version)
    if isinstance(call, Refusal):
        assert -32700 <= call.rpc_code <= -32000
        assert call.words
    else:
        assert isinstance(call, Call)


@FUZZ
@given(raw=card_like | json_values)
def test_any_card_is_read_or_refused_in_words(raw: Any) -> None:
    card = attempt(WireError, parse_card, raw)
    if isinstance(card, WireError):
        assert str(card)
    else:
        assert isinstance(card, CardInfo)
        # Lenient on purpose: a relative endpoint is joined to where the card came from, and
        # only then checked for scheme and host (cards.find_agent, tested in test_a2a_client).
        assert isinstance(card.endpoint, str)
        assert "\x00" not in card.name + card.description + card.organization


@FUZZ
@given(raw=answer_like | json_values)
def test_any_answer_is_an_outcome_or_refused_in_words(raw: Any) -> None:
    outcome = attempt(WireError, parse_outcome, raw)
    if isinstance(outcome, WireError):
        assert str(outcome)
    else:
        assert isinstance(outcome, Outcome)
        assert outcome.state.startswith("TASK_STATE_")
        assert len(outcome.text) <= 16_000


@FUZZ
@given(
    paste=st.text(max_size=300)
    | st.builds(
        lambda url, sep, key: f"{url}{sep}{key}",
        st.sampled_from(
            ["http://127.0.0.1:8888/a2a/x", "https://example.org", "ftp://x", "javascript:alert(1)"]
        ),
        st.sampled_from(["\n", " ", "\nKey: ", " key=", "\nBearer ", "\ttoken="]),
        st.text(max_size=60),
    )
)
def test_any_paste_is_read_or_refused_in_words(paste: str) -> None:
    found = attempt(PasteError, read_paste, paste)
    if isinstance(found, PasteError):
        assert str(found)
    else:
        assert isinstance(found, Paste)
        assert found.address.scheme in ("http", "https")
        assert not found.key or ("\n" not in found.key and " " not in found.key)


@pytest.fixture(scope="module")
def door(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[JupyterProcess, str]]:
    root: Path = tmp_path_factory.mktemp("fuzz-door")
    process = JupyterProcess(root / "data", root / "root")
    process.start()
    try:
        with process.client() as http:
            key = http.post(
                process.api("pairings"), json={"agents": ["researcher"], "remote": False}
            ).json()["key"]
        yield process, key
    finally:
        process.stop()
    assert "Traceback" not in process.log(), process.log()[-3000:]


@FUZZ
@given(
    body=calls.map(lambda c: json.dumps(c).encode()) | st.binary(max_size=200),
    keyed=st.booleans(),
    path=st.sampled_from(
        ["a2a/researcher", "a2a/writer", "a2a/nobody", ".well-known/agent-card.json"]
    ),
)
def test_the_door_never_answers_5xx(
    door: tuple[JupyterProcess, str], body: bytes, keyed: bool, path: str
) -> None:
    server, key = door
    headers = {"Content-Type": "application/json", "A2A-Version": "1.0"}
    if keyed:
        headers["Authorization"] = f"Bearer {key}"
    with httpx.Client(timeout=30, trust_env=False) as http:
        method = "GET" if path.endswith(".json") else "POST"
        r = http.request(method, f"{server.url}{path}", content=body, headers=headers)
    assert r.status_code < 500, r.text
    if r.status_code == 200 and method == "POST":
        answer = r.json()
        assert answer["jsonrpc"] == "2.0"
        assert ("result" in answer) != ("error" in answer)
