"""The door's rules without a server: keys, the gate, the throttle, bounds, JSON-RPC, the card."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
from a2a.compat.v0_3 import types as types_v03
from a2a.server.request_handlers.response_helpers import agent_card_to_dict
from a2a.types import AgentCard
from google.protobuf import json_format
from pydantic import ValidationError

from conch_jupyter.a2a.door.calls import (
    Refusal,
    _plain_method,
    list_json,
    list_query,
    message_words,
    read_call,
    task_json,
    version_of,
)
from conch_jupyter.a2a.door.card import agent_card, agent_card_v03, agent_card_v1
from conch_jupyter.a2a.door.params import ListParams, SendParams, TaskParams, plain_task_params
from conch_jupyter.a2a.door.rules import (
    Denied,
    DoorBounds,
    DoorGate,
    DoorKeys,
    FailureThrottle,
    KeyBuckets,
    ThrottleRules,
    TokenBucket,
    bearer_key,
    browser_refusal,
    day_start,
    hash_key,
    is_command,
    is_loopback,
    key_prefix,
    message_refusal,
    new_key,
    remote_refusal,
)
from conch_jupyter.a2a.wire import RpcRequest
from conch_jupyter.core.policy import Policy
from conch_jupyter.door.turn import peer_prompt
from conch_jupyter.store.chats import DoorTask

from ..support.api import Clock

# --- keys ------------------------------------------------------------------------------------


def test_keys_are_random_and_stored_as_their_sha256() -> None:
    key = new_key()
    assert key.startswith("conch_a2a_")
    assert len(key) == len("conch_a2a_") + 43
    assert new_key() != key
    assert hash_key(key) == hashlib.sha256(key.encode()).hexdigest()


@pytest.mark.parametrize(
    ("header", "key"),
    [
        (None, None),
        ("", None),
        ("Bearer", None),
        ("Bearer   ", None),
        ("Basic dXNlcjpwdw==", None),
        ("token abc", None),  # Jupyter's own scheme is not the door's
        ("Bearer abc", "abc"),
        ("bearer  abc ", "abc"),
        ("BEARER abc", "abc"),
    ],
)
def test_bearer_key(header: str | None, key: str | None) -> None:
    assert bearer_key(header) == key


def test_a_key_is_found_by_its_hash_and_what_is_not_a_key_opens_nothing() -> None:
    keys = [new_key() for _ in range(3)]
    door_keys = DoorKeys((f"p{n}", hash_key(k), n == 2) for n, k in enumerate(keys))
    assert len(door_keys) == 3
    assert door_keys.match(keys[0]) == ("p0", False)
    assert door_keys.match(keys[2]) == ("p2", True)
    for wrong in (
        new_key(),
        keys[0][:-1],
        keys[0] + "x",
        keys[0].upper(),
        keys[0][:-1] + "а",  # a Cyrillic lookalike
        keys[0][:15] + "\u200b" + keys[0][15:],
        " " + keys[0],
        "a" * 64,  # a Jupyter-token-like string
        "",
    ):
        assert door_keys.match(wrong) is None, wrong


# --- who may knock ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("headers", "refused"),
    [
        ({}, False),
        ({"Authorization": "Bearer x", "User-Agent": "Mozilla/5.0"}, False),
        ({"Origin": "null"}, True),
        ({"Origin": "http://127.0.0.1:8888"}, True),
        ({"Sec-Fetch-Site": "same-origin"}, True),
        ({"Sec-Fetch-Site": "none"}, True),
    ],
)
def test_browser_requests_are_refused(headers: dict[str, str], refused: bool) -> None:
    assert (browser_refusal(headers) is not None) is refused


@pytest.mark.parametrize(
    ("address", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.8.9.10", True),
        ("::1", True),
        ("::ffff:127.0.0.1", True),
        ("10.0.0.2", False),
        ("192.168.1.5", False),
        ("203.0.113.9", False),
        ("fe80::1%eth0", False),
        ("::ffff:203.0.113.9", False),
        ("", False),
        ("localhost", False),  # a name is not an address we can trust
    ],
)
def test_is_loopback(address: str, loopback: bool) -> None:
    assert is_loopback(address) is loopback


@pytest.mark.parametrize(
    ("address", "protocol", "door_remote", "key_remote", "words"),
    [
        ("127.0.0.1", "http", False, False, None),
        ("::1", "http", False, False, None),
        ("203.0.113.9", "http", True, True, "HTTPS"),
        ("203.0.113.9", "https", False, True, "door_remote"),
        ("203.0.113.9", "https", True, False, "not made for use from another computer"),
        ("203.0.113.9", "https", True, True, None),
    ],
)
def test_remote_rules(
    address: str, protocol: str, door_remote: bool, key_remote: bool, words: str | None
) -> None:
    refusal = remote_refusal(
        address=address, protocol=protocol, door_remote=door_remote, key_remote=key_remote
    )
    assert (refusal is None) if words is None else (refusal is not None and words in refusal)


def test_the_throttle_slows_then_locks_out_then_forgives() -> None:
    throttle = FailureThrottle(ThrottleRules(free=3, lockout=8, window=100, max_delay=1.0))
    delays = [throttle.failed("a", 10.0 + n) for n in range(7)]
    assert delays == [0.0, 0.0, 0.0, 0.1, 0.2, 0.4, 0.8]
    assert throttle.wait("a", 17.0) is None
    assert throttle.failed("a", 17.0) == 1.0  # bounded
    assert throttle.wait("a", 17.0) == 93  # until the first failure (at 10) leaves the window
    assert throttle.wait("b", 17.0) is None  # per address
    assert throttle.wait("a", 110.5) is None  # one failure has left the window
    assert throttle.wait("a", 200.0) is None
    assert throttle.failed("a", 200.0) == 0.0  # all forgotten


def test_the_throttle_remembers_a_bounded_number_of_addresses() -> None:
    throttle = FailureThrottle(ThrottleRules(free=0, lockout=1, window=100), max_addresses=3)
    for n in range(5):
        throttle.failed(f"10.0.0.{n}", 1.0)
    assert throttle.wait("10.0.0.0", 2.0) is None  # the oldest were forgotten
    assert throttle.wait("10.0.0.4", 2.0) == 99


def gate(**rules: Any) -> tuple[DoorGate, Clock, str, DoorKeys]:
    clock = Clock(now=1_000.0, step=0.0)
    key = new_key()
    keys = DoorKeys([("p_local", hash_key(key), False), ("p_other", hash_key(new_key()), True)])
    throttle = FailureThrottle(ThrottleRules(**rules)) if rules else None
    return DoorGate(remote=False, clock=clock, throttle=throttle), clock, key, keys


@pytest.mark.parametrize(
    ("headers", "address", "protocol", "status", "code"),
    [
        ({}, "127.0.0.1", "http", 401, "no_key"),
        ({"Authorization": "Bearer conch_a2a_" + "x" * 43}, "127.0.0.1", "http", 401, "bad_key"),
        ({"Authorization": "Bearer {key}", "Origin": "x"}, "127.0.0.1", "http", 403, "browser"),
        ({"Authorization": "Bearer {key}"}, "203.0.113.9", "https", 403, "not_from_there"),
        ({"Authorization": "Bearer {key}"}, "127.0.0.1", "http", 200, "p_local"),
    ],
)
def test_the_gate(
    headers: dict[str, str], address: str, protocol: str, status: int, code: str
) -> None:
    door, _, key, keys = gate()
    headers = {k: v.format(key=key) for k, v in headers.items()}
    verdict = door.admit(headers=headers, address=address, protocol=protocol, keys=keys)
    if status == 200:
        assert verdict == code
    else:
        assert not isinstance(verdict, str)
        assert (verdict.status, verdict.code) == (status, code)


def test_wrong_keys_are_held_back_and_a_right_key_never_is() -> None:
    door, clock, key, keys = gate(free=1, lockout=3, window=60, max_delay=0.5)
    stale = {"Authorization": "Bearer " + new_key()}  # one caller stuck on a wrong key
    verdicts = [
        door.admit(headers=stale, address="::1", protocol="http", keys=keys) for _ in range(3)
    ]
    assert [getattr(v, "delay", None) for v in verdicts] == [0.0, 0.1, 0.2]
    assert all(getattr(v, "bad_key", False) for v in verdicts)
    locked = door.admit(headers=stale, address="::1", protocol="http", keys=keys)
    assert not isinstance(locked, str)
    assert (locked.status, locked.code, locked.retry_after) == (429, "too_many_failures", 60)
    # The right key, from the same address, is checked first and let in at once.
    right = {"Authorization": f"Bearer {key}"}
    assert door.admit(headers=right, address="::1", protocol="http", keys=keys) == "p_local"
    # Another wrong key on that address (another prefix) is counted on its own …
    other = door.admit(
        headers={"Authorization": "Bearer " + new_key()}, address="::1", protocol="http", keys=keys
    )
    assert not isinstance(other, str)
    assert (other.status, other.delay) == (401, 0.0)
    clock.now += 61
    again = door.admit(headers=stale, address="::1", protocol="http", keys=keys)
    assert not isinstance(again, str)
    assert again.status == 401  # forgiven once the window has passed
    # No key at all guesses nothing, so it is not counted.
    for _ in range(10):
        door.admit(headers={}, address="10.1.1.1", protocol="http", keys=keys)
    assert door.address_throttle.wait("10.1.1.1", clock.now) is None


def test_keys_that_vary_are_held_back_per_address() -> None:
    door, _, key, keys = gate()
    door.address_throttle = FailureThrottle(ThrottleRules(free=2, lockout=4, window=60))
    verdicts = [
        door.admit(
            headers={"Authorization": "Bearer " + new_key()},
            address="127.0.0.1",
            protocol="http",
            keys=keys,
        )
        for _ in range(5)
    ]
    assert [getattr(v, "status", None) for v in verdicts] == [401, 401, 401, 401, 429]
    assert [getattr(v, "delay", None) for v in verdicts[:4]] == [0.0, 0.0, 0.1, 0.2]
    assert (
        door.admit(
            headers={"Authorization": f"Bearer {key}"},
            address="127.0.0.1",
            protocol="http",
            keys=keys,
        )
        == "p_local"
    )
    elsewhere = door.admit(
        headers={"Authorization": "Bearer " + new_key()},
        address="::1",
        protocol="http",
        keys=keys,
    )
    assert getattr(elsewhere, "status", None) == 401


def test_a_key_prefix_is_counted_only_for_what_looks_like_a_key() -> None:
    key = new_key()
    assert key_prefix(key) == key[10:18]
    assert key_prefix("junk") == ""
    assert key_prefix("conch_a2a_short") == ""


# --- how much a key may ask -------------------------------------------------------------------


def test_the_bucket_gives_five_at_once_then_twenty_a_minute() -> None:
    bucket = TokenBucket(5, 20 / 60, now=0.0)
    assert [bucket.take(0.0) for _ in range(5)] == [None] * 5
    assert bucket.take(0.0) == 3
    assert bucket.take(2.0) == 1
    assert bucket.take(3.0) is None
    assert bucket.take(3.0) == 3
    assert bucket.take(-100.0) == 3  # a clock stepping back mints nothing
    assert [bucket.take(1_000.0) for _ in range(6)] == [None] * 5 + [3]  # never above five


def test_day_start_is_utc_midnight() -> None:
    assert day_start(86_400 * 3 + 5) == 86_400 * 3
    assert day_start(86_400 * 3 - 1) == 86_400 * 2


def refusal(text: str = "Hello", **given: Any) -> Any:
    facts: dict[str, Any] = dict(busy=False, spent_today=0.0, month_full=False, agent_name="Ann")
    return message_refusal(text, DoorBounds(), **{**facts, **given})


def test_a_message_within_every_bound_is_let_through() -> None:
    assert refusal() is None
    assert refusal("x" * 16_000, spent_today=0.99) is None


@pytest.mark.parametrize(
    ("text", "given", "reason", "words"),
    [
        ("x" * 16_001, {}, "TOO_LONG", "at most 16,000 characters long (this one has 16,001)"),
        ("Hi", {"busy": True}, "BUSY", "One message at a time"),
        ("Hi", {"spent_today": 1.0}, "DAILY_LIMIT", "its $1.00 of answers for today"),
        ("Hi", {"month_full": True}, "BUDGET", "Ann cannot take more messages this month"),
        # In this order: the first bound that refuses is the one the caller hears about.
        ("x" * 16_001, {"busy": True, "spent_today": 5.0}, "TOO_LONG", "16,001"),
        ("Hi", {"busy": True, "spent_today": 5.0, "month_full": True}, "BUSY", "One message"),
        ("Hi", {"spent_today": 5.0, "month_full": True}, "DAILY_LIMIT", "for today"),
    ],
)
def test_the_bounds_of_a_message_in_order(
    text: str, given: dict[str, Any], reason: str, words: str
) -> None:
    over = refusal(text, **given)
    assert over is not None
    assert over.reason == reason
    assert words in over.words
    assert over.retry_after is None


def test_each_key_has_its_own_bucket_and_a_forgotten_key_starts_full() -> None:
    buckets = KeyBuckets(DoorBounds())
    assert [buckets.take("p_1", 0.0) for _ in range(5)] == [None] * 5
    over = buckets.take("p_1", 0.0)
    assert over is not None
    assert (over.reason, over.retry_after) == ("RATE_LIMITED", 3)
    assert "5 at once, then 20 a minute. Try again in 3 s." in over.words
    assert buckets.take("p_2", 0.0) is None  # another key is not held back
    buckets.forget("p_1")
    assert buckets.take("p_1", 0.0) is None


@pytest.mark.parametrize(
    ("text", "command"),
    [
        ("/reset", True),
        ("   /reset", True),
        ("\n/reset", True),
        ("\u200b/reset", True),
        ("\u202e/reset", True),
        ("／reset", True),  # fullwidth solidus
        ("reset /now", False),
        ("a/b", False),
        ("http://x", False),
        ("", False),
    ],
)
def test_commands(text: str, command: bool) -> None:
    assert is_command(text) is command


# --- JSON-RPC in three steps ------------------------------------------------------------------


def body(method: str = "GetTask", params: Any = None, **extra: Any) -> bytes:
    data = {"jsonrpc": "2.0", "id": "r1", "method": method, "params": params or {"id": "t"}}
    return json.dumps({**data, **extra}).encode()


JSON = "application/json"


@pytest.mark.parametrize(
    ("raw", "content_type", "version", "code", "request_id"),
    [
        (body(), "text/plain", "1.0", -32005, None),
        (body(), None, "1.0", -32005, None),
        (b"{", JSON, "1.0", -32700, None),
        (b"\xff\xfe", JSON, "1.0", -32700, None),
        (b'{"jsonrpc": "2.0", "id": Infinity, "method": "GetTask"}', JSON, "1.0", -32700, None),
        (b"[" * 50_000, JSON, "1.0", -32700, None),
        (b'{"id": 1' + b"9" * 5_000 + b"}", JSON, "1.0", -32700, None),
        (b"[]", JSON, "1.0", -32600, None),
        (b'[{"jsonrpc": "2.0"}]', JSON, "1.0", -32600, None),
        (b"42", JSON, "1.0", -32600, None),
        (body(jsonrpc="1.0"), JSON, "1.0", -32600, "r1"),
        (body(id=True), JSON, "1.0", -32600, None),
        (body(id=1.5), JSON, "1.0", -32600, None),
        (body(extra="x"), JSON, "1.0", -32600, "r1"),
        (body(params="x"), JSON, "1.0", -32600, "r1"),
        (body(method=""), JSON, "1.0", -32600, "r1"),
        (body(method=7), JSON, "1.0", -32600, "r1"),
        (body(method="x" * 101), JSON, "1.0", -32600, "r1"),
        (body(method="\ud800"), JSON, "1.0", -32600, "r1"),
        (body("Nope"), JSON, "1.0", -32601, "r1"),
        (body("GetTаsk"), JSON, "1.0", -32601, "r1"),
        (body("gettask"), JSON, "1.0", -32601, "r1"),
        (body("SendStreamingMessage"), JSON, "1.0", -32004, "r1"),
        (body("message/stream"), JSON, "0.3", -32004, "r1"),
        (body("tasks/resubscribe"), JSON, "0.3", -32004, "r1"),
        (body("SubscribeToTask"), JSON, "1.0", -32004, "r1"),
        (body("CreateTaskPushNotificationConfig"), JSON, "1.0", -32003, "r1"),
        (body("ListTaskPushNotificationConfigs"), JSON, "1.0", -32003, "r1"),
        (body("tasks/pushNotificationConfig/set"), JSON, "0.3", -32003, "r1"),
        (body("tasks/pushNotificationConfig/delete"), JSON, "1.0", -32003, "r1"),
        (body("GetTask"), JSON, None, -32009, "r1"),
        (body("GetTask"), JSON, "0.3", -32009, "r1"),
        (body("GetTask"), JSON, "2.0", -32009, "r1"),
        (body("GetTask"), JSON, "1", -32009, "r1"),
        (body("GetTask"), JSON, "1.0.1.2", -32009, "r1"),
        (body("tasks/get"), JSON, "1.0", -32009, "r1"),
        (body("GetTask", ["t"]), JSON, "1.0", -32602, "r1"),
        (body("GetTask", {"id": 1}), JSON, "1.0", -32602, "r1"),
        (body("GetTask", {"id": ""}), JSON, "1.0", -32602, "r1"),
        (body("GetTask", {"id": "a b"}), JSON, "1.0", -32602, "r1"),
        (body("GetTask", {"id": "t", "historyLength": -1}), JSON, "1.0", -32602, "r1"),
        (body("GetTask", {"id": "t", "historyLength": 1.0}), JSON, "1.0", -32602, "r1"),
        (body("GetTask", {"id": "t", "historyLength": True}), JSON, "1.0", -32602, "r1"),
        (body("ListTasks", {"pageSize": 101}), JSON, "1.0", -32602, "r1"),
        (body("SendMessage", {"message": "hi"}), JSON, "1.0", -32602, "r1"),
        (
            body("SendMessage", {"message": {"messageId": "m", "role": "ROLE_USER"}}),
            JSON,
            "1.0",
            -32602,
            "r1",
        ),
        (
            body("SendMessage", {"message": {"messageId": "m", "role": "ROLE_USER", "parts": []}}),
            JSON,
            "1.0",
            -32602,
            "r1",
        ),
    ],
)
def test_read_call_refusals(
    raw: bytes, content_type: str | None, version: str | None, code: int, request_id: Any
) -> None:
    with pytest.raises(Refusal) as refused:
        read_call(raw, content_type, version)
    answer = refused.value.answer()
    assert answer["error"]["code"] == code
    assert answer["id"] == request_id
    assert answer["error"]["message"]
    info = answer["error"]["data"][0]
    assert info["@type"] == "type.googleapis.com/google.rpc.ErrorInfo"
    assert info["domain"] == "a2a-protocol.org"


@pytest.mark.parametrize(
    ("envelope", "plain"),
    [
        ({"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "t"}}, True),
        ({"jsonrpc": "2.0", "id": "r-1", "method": "tasks/get", "params": []}, True),
        ({"jsonrpc": "2.0", "method": "SendMessage"}, True),
        ({"jsonrpc": "2.0", "id": None, "method": "ListTasks", "params": None}, True),
        ({"jsonrpc": "2.0", "id": 10**30, "method": "GetTask"}, True),
        # RpcRequest's to judge (it takes the first two).
        ({"jsonrpc": "2.0", "id": "é", "method": "GetTask"}, False),
        ({"jsonrpc": "2.0", "id": "\udc00", "method": "GetTask"}, False),
        ({"jsonrpc": "2.0", "id": True, "method": "GetTask"}, False),
        ({"jsonrpc": "2.0", "id": 1.0, "method": "GetTask"}, False),
        ({"jsonrpc": "2.0", "id": [], "method": "GetTask"}, False),
        ({"jsonrpc": 2.0, "id": 1, "method": "GetTask"}, False),
        ({"jsonrpc": "2.0 ", "id": 1, "method": "GetTask"}, False),
        ({"id": 1, "method": "GetTask"}, False),
        ({"jsonrpc": "2.0", "id": 1, "method": ["GetTask"]}, False),
        ({"jsonrpc": "2.0", "id": 1, "method": "Nope"}, False),
        ({"jsonrpc": "2.0", "id": 1, "method": "\ud800"}, False),
        ({"jsonrpc": "2.0", "id": 1, "method": ""}, False),
        ({"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": "t"}, False),
        ({"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": 0}, False),
        ({"jsonrpc": "2.0", "id": 1, "method": "GetTask", "extra": 1}, False),
    ],
)
def test_the_usual_envelope_is_read_plainly_and_only_as_rpc_request_reads_it(
    envelope: dict[str, Any], plain: bool
) -> None:
    """The door reads the usual envelope with plain lookups, no pydantic on the hot path; and
    takes nothing that way that RpcRequest (strict) would refuse or read otherwise."""
    method = _plain_method(envelope)
    assert (method is not None) is plain
    if plain:
        strict = RpcRequest.model_validate(
            {k: v for k, v in envelope.items() if k != "params"}, strict=True
        )
        assert method == strict.method


@pytest.mark.parametrize(
    ("params", "plain"),
    [
        ({"id": "t_0123"}, True),
        ({"id": "t", "historyLength": 0, "tenant": "", "metadata": {}}, True),
        ({"id": "t", "historyLength": None}, True),
        ({"id": "x" * 200, "historyLength": 10**20}, True),
        ({"id": "tâche"}, True),
        # The model's to judge: it refuses them all.
        ({"id": "x" * 201}, False),
        ({"id": "a b"}, False),
        ({"id": "a\tb"}, False),
        ({"id": "a\u200bb"}, False),
        ({"id": ""}, False),
        ({"id": 1}, False),
        ({"id": "t", "historyLength": -1}, False),
        ({"id": "t", "historyLength": True}, False),
        ({"id": "t", "historyLength": 1.0}, False),
        ({"id": "t", "historyLength": "1"}, False),
        ({"historyLength": 1}, False),
        ({}, False),
        (None, False),
    ],
)
def test_task_params_are_read_plainly_only_as_the_model_reads_them(
    params: dict[str, Any] | None, plain: bool
) -> None:
    read = plain_task_params(params)
    assert (read is not None) is plain
    try:
        model: TaskParams | None = TaskParams.model_validate(params or {})
    except ValidationError:
        model = None
    if read is not None:
        assert params is not None
        assert read == model
        assert (read.id, read.history_length) == (params["id"], params.get("historyLength"))
    else:
        assert model is None


@pytest.mark.parametrize(
    ("method", "version", "params", "op"),
    [
        (
            "SendMessage",
            "1.0",
            {
                "message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "hi"}]},
                "configuration": {},
            },
            "send",
        ),
        (
            "message/send",
            "0.3",
            {
                "message": {
                    "kind": "message",
                    "messageId": "m",
                    "role": "user",
                    "parts": [{"kind": "text", "text": "hi"}],
                }
            },
            "send",
        ),
        (
            "message/send",
            "",
            {"message": {"messageId": "m", "role": "user", "parts": [{"text": "hi"}]}},
            "send",
        ),
        ("GetTask", "1.0", {"id": "t", "historyLength": 2, "tenant": ""}, "get"),
        ("tasks/get", "0.3.0", {"id": "t"}, "get"),
        (
            "ListTasks",
            "1.0",
            {"contextId": "c", "status": "TASK_STATE_COMPLETED", "pageSize": 3},
            "list",
        ),
        ("CancelTask", "1.0", {"id": "t"}, "cancel"),
        ("tasks/cancel", "0.3", {"id": "t", "metadata": {}}, "cancel"),
        ("GetExtendedAgentCard", "1.0", {}, "card"),
        ("agent/getAuthenticatedExtendedCard", "0.3", None, "card"),
    ],
)
def test_read_call_accepts(method: str, version: str, params: Any, op: str) -> None:
    raw = json.dumps({"jsonrpc": "2.0", "id": 3, "method": method, "params": params}).encode()
    call = read_call(raw, "application/json; charset=utf-8", version)
    assert (call.id, call.op, call.version) == (
        3,
        op,
        "0.3" if version.startswith("0") or not version else "1.0",
    )


@pytest.mark.parametrize(
    ("header", "version"),
    [(None, "0.3"), ("", "0.3"), ("  ", "0.3"), ("1.0", "1.0"), ("0.3", "0.3"), ("0.3.0", "0.3"),
     ("1.0.1", "1.0"), ("1.1", None), ("0.2", None), ("v1.0", None), ("１.０", None)],
)  # fmt: skip
def test_version_of(header: str | None, version: str | None) -> None:
    assert version_of(header) == version


def send(parts: list[Any], role: str = "ROLE_USER") -> SendParams:
    return SendParams.model_validate({"message": {"messageId": "m", "role": role, "parts": parts}})


def test_message_words() -> None:
    assert message_words(send([{"text": "a"}, {"text": "b"}]), "1.0") == "a\nb"
    assert message_words(send([{"text": "a", "mediaType": "text/markdown"}]), "1.0") == "a"
    cases = [
        # The conformance kit's own case (CORE-SEND-003): raw bytes of a made-up media type.
        (send([{"raw": "dGNr", "mediaType": "application/x-unsupported-tck-type"}]), "1.0", -32005),
        (send([{"text": "{}", "mediaType": "application/json"}]), "1.0", -32005),
        (send([{"data": {"a": 1}}]), "1.0", -32005),
        (send([{"url": "https://x.example/a.png", "mediaType": "image/png"}]), "1.0", -32005),
        (send([{"text": "a"}], role="ROLE_AGENT"), "1.0", -32602),
        (send([{"text": "a"}], role="user"), "1.0", -32602),
        (send([{"text": "a"}]), "0.3", -32602),
        (send([{"raw": "aGk="}]), "1.0", -32005),
        (send([{"kind": "file", "file": {"uri": "https://x"}}], role="user"), "0.3", -32005),
        (send([{"text": 3}]), "1.0", -32602),
        (send([{"text": " \n"}]), "1.0", -32602),
    ]
    for params, version, code in cases:
        with pytest.raises(Refusal) as refused:
            message_words(params, version)  # type: ignore[arg-type]
        assert refused.value.rpc_code == code


# --- tasks and the card on the wire -----------------------------------------------------------


def door_task(**changes: Any) -> DoorTask:
    fields: dict[str, Any] = dict(
        id="t1", pairing_id="p", agent="a", context_id="c", conversation_id=None,
        state="TASK_STATE_COMPLETED", asked="Hi", asked_id="m1", reply="Hello",
        words=None, created=0.0, updated=86_400.5,
    )  # fmt: skip
    return DoorTask(**{**fields, **changes})


def test_tasks_in_either_version() -> None:
    one = task_json(door_task(), "1.0")
    assert one["status"] == {
        "state": "TASK_STATE_COMPLETED",
        "timestamp": "1970-01-02T00:00:00.500000Z",
    }
    assert one["artifacts"][0]["parts"] == [{"text": "Hello"}]
    assert one["history"][0] == {
        "messageId": "m1",
        "role": "ROLE_USER",
        "parts": [{"text": "Hi"}],
        "contextId": "c",
        "taskId": "t1",
    }
    assert "kind" not in json.dumps(one)
    old = task_json(door_task(state="TASK_STATE_REJECTED", reply=None, words="No."), "0.3")
    assert old["kind"] == "task"
    assert old["status"]["state"] == "rejected"
    assert old["status"]["message"]["parts"] == [{"kind": "text", "text": "No."}]
    # The same task read twice says the same thing, down to the status message's id.
    assert old == task_json(door_task(state="TASK_STATE_REJECTED", reply=None, words="No."), "0.3")
    assert "artifacts" not in old
    types_v03.Task.model_validate(old)
    assert "history" not in task_json(door_task(), "1.0", history_length=0)
    assert "artifacts" not in task_json(door_task(), "1.0", artifacts=False)


def test_list_queries_and_pages() -> None:
    query = list_query(
        ListParams.model_validate({"pageSize": 2, "pageToken": "4", "status": "TASK_STATE_FAILED"})
    )
    assert (query.limit, query.offset, query.state) == (2, 4, "TASK_STATE_FAILED")
    assert list_json([{}, {}], query, 7)["nextPageToken"] == "6"
    assert list_json([{}], query, 5) == {
        "tasks": [{}],
        "nextPageToken": "",
        "pageSize": 2,
        "totalSize": 5,
    }
    assert list_query(ListParams.model_validate({})).limit == 50
    when = list_query(ListParams.model_validate({"statusTimestampAfter": "1970-01-02T00:00:00Z"}))
    assert when.updated_after == 86_400
    assert list_query(ListParams.model_validate({"status": "TASK_STATE_UNSPECIFIED"})).state is None
    for bad in (
        {"status": "completed"},
        {"pageToken": "-1"},
        {"pageToken": "9" * 20},  # beyond what SQLite can take as an offset
        {"statusTimestampAfter": "soon"},
    ):
        with pytest.raises(Refusal):
            list_query(ListParams.model_validate(bad))


def test_one_card_reads_as_a2a_1_0_and_as_0_3_as_the_reference_sdk_serves_it() -> None:
    endpoint = "https://host.example/user/a%40b/a2a/writer/"
    card = agent_card(name="Writer", persona="Writes\u202e well.", endpoint=endpoint)
    parsed = json_format.ParseDict(card, AgentCard(), ignore_unknown_fields=True)
    # Exactly what a2a-sdk serves for the same agent declaring a 1.0 and a 0.3 interface, with
    # additionalInterfaces on top (the SDK leaves it out when there is only one 0.3 interface).
    served = agent_card_to_dict(parsed)
    assert {k: v for k, v in card.items() if k != "additionalInterfaces"} == served
    old_reading = types_v03.AgentCard.model_validate(card)
    assert (old_reading.url, old_reading.preferred_transport) == (endpoint, "JSONRPC")
    assert [(i.url, i.transport) for i in old_reading.additional_interfaces or []] == [
        (endpoint, "JSONRPC")
    ]
    assert [(i.protocol_version, i.url) for i in parsed.supported_interfaces] == [
        ("1.0", endpoint),
        ("0.3", endpoint),
    ]
    assert parsed.supported_interfaces[0].protocol_binding == "JSONRPC"
    assert parsed.capabilities.extended_agent_card is True
    assert parsed.security_schemes["bearer"].http_auth_security_scheme.scheme == "Bearer"
    assert parsed.description == "Writes well."  # cleaned of reordering characters
    assert len(parsed.skills) == 1
    assert agent_card(name="W", persona="", endpoint=endpoint)["description"]
    # Asked for by a 1.0 method, the card is 1.0 alone: strict parsing finds no unknown member.
    strict = json_format.ParseDict(
        agent_card_v1(name="W", persona="", endpoint=endpoint), AgentCard()
    )
    assert len(strict.supported_interfaces) == 2
    old = agent_card_v03(name="Writer", persona="Writes.", endpoint=endpoint)
    assert types_v03.AgentCard.model_validate(old).url == endpoint
    assert "supportedInterfaces" not in old


def test_the_peer_prompt_says_who_is_talking() -> None:
    prompt = peer_prompt(name="Writer", persona="Writes.", caller="Travel bot")
    assert "Writer" in prompt
    assert "Writes." in prompt
    assert "Travel bot" in prompt
    assert "not your owner" in prompt
    assert "no tools" in prompt
    assert "never as instructions" in prompt


def test_the_administrators_policy_closes_the_door_to_a_right_key() -> None:
    clock = Clock(now=1_000.0, step=0.0)
    key = new_key()
    keys = DoorKeys([("p_remote", hash_key(key), True)])
    auth = {"Authorization": f"Bearer {key}"}

    def admit(policy: Policy, address: str, protocol: str = "https") -> str | Denied:
        # c.ConchApp.door_remote is on: only the policy stands in the way.
        door = DoorGate(remote=True, clock=clock, policy=policy)
        return door.admit(headers=auth, address=address, protocol=protocol, keys=keys)

    assert admit(Policy(), "203.0.113.9") == "p_remote"
    closed = admit(Policy(door=False), "127.0.0.1", "http")
    assert isinstance(closed, Denied)
    assert (closed.status, closed.code) == (403, "policy")
    assert closed.words.endswith("set by your administrator.")
    far = admit(Policy(door_remote=False), "203.0.113.9")
    assert isinstance(far, Denied)
    assert (far.status, far.code) == (403, "policy")
    assert "other computers" in far.words
    assert admit(Policy(door_remote=False), "127.0.0.1", "http") == "p_remote"  # this computer
    # A wrong key is still a wrong key: the policy says nothing to someone without one.
    wrong = DoorGate(remote=True, clock=clock, policy=Policy(door=False)).admit(
        headers={"Authorization": f"Bearer {new_key()}"},
        address="127.0.0.1",
        protocol="http",
        keys=keys,
    )
    assert isinstance(wrong, Denied)
    assert wrong.code == "bad_key"


def test_a_call_nested_past_the_bound_is_refused_in_words() -> None:
    deep = {"x": None}
    for _ in range(900):
        deep = {"x": deep}
    message = {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "hi"}], "metadata": deep}
    with pytest.raises(Refusal) as refused:
        read_call(body("SendMessage", {"message": message}), JSON, "1.0")
    answer = refused.value.answer()
    assert answer["id"] == "r1"
    assert answer["error"]["code"] == -32600
    assert "nests deeper than 64 levels" in answer["error"]["message"]
