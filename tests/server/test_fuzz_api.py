"""Hostile input on the REST API: whatever the body, never a 500, always the one error shape."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ..support.jupyter_process import JupyterProcess

pytestmark = pytest.mark.timeout(600)

# The short version runs in every test run; CONCH_FUZZ_EXAMPLES raises it for a long soak.
EXAMPLES = int(os.environ.get("CONCH_FUZZ_EXAMPLES", "60"))

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=50),
    lambda inner: (
        st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=10), inner, max_size=5)
    ),
    max_leaves=20,
)
# Bodies shaped almost like the real ones: the right keys with any values, plus strays.
agent_like = st.fixed_dictionaries(
    {},
    optional={
        "name": json_values,
        "persona": json_values,
        "instructions": json_values,
        "provider": st.fixed_dictionaries(
            {},
            optional={
                "kind": json_values,
                "model": json_values,
                "base_url": json_values,
                "api_key": json_values,
            },
        )
        | json_values,
        "price": st.fixed_dictionaries(
            {}, optional={"input_per_mtok": json_values, "output_per_mtok": json_values}
        )
        | json_values,
        "extra": json_values,
    },
)
message_like = st.fixed_dictionaries({}, optional={"text": json_values, "more": json_values})
raw_bodies = st.binary(max_size=300) | st.text(max_size=300).map(str.encode)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JupyterProcess]:
    root: Path = tmp_path_factory.mktemp("fuzz")
    process = JupyterProcess(root / "data", root / "root")
    process.start()
    try:
        yield process
    finally:
        process.stop()
    assert "Traceback" not in process.log(), process.log()[-3000:]


@pytest.fixture(scope="module")
def http(server: JupyterProcess) -> Iterator[httpx.Client]:
    with server.client() as client:
        yield client


@pytest.fixture(scope="module")
def chat_id(server: JupyterProcess, http: httpx.Client) -> str:
    return str(http.post(server.api("conversations"), json={}).json()["id"])


def check(response: httpx.Response) -> None:
    assert response.status_code < 500, response.text
    if response.status_code >= 400:
        error = response.json()["error"]
        assert isinstance(error["code"], str)
        assert isinstance(error["message"], str)
        assert error["message"]


FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@FUZZ
@given(body=agent_like | json_values)
def test_agent_bodies(server: JupyterProcess, http: httpx.Client, body: Any) -> None:
    check(http.post(server.api("agents"), content=json.dumps(body)))
    check(http.patch(server.api("agents/writer"), content=json.dumps(body)))


@FUZZ
@given(body=message_like | json_values)
def test_message_bodies(
    server: JupyterProcess, http: httpx.Client, chat_id: str, body: Any
) -> None:
    check(http.post(server.api(f"conversations/{chat_id}/messages"), content=json.dumps(body)))
    check(http.post(server.api("conversations"), content=json.dumps(body)))


@FUZZ
@given(raw=raw_bodies)
def test_raw_bytes(server: JupyterProcess, http: httpx.Client, chat_id: str, raw: bytes) -> None:
    for path in ("agents", "conversations", f"conversations/{chat_id}/messages", "agents/writer"):
        method = "PATCH" if path == "agents/writer" else "POST"
        check(http.request(method, server.api(path), content=raw))


@FUZZ
@given(segment=st.text(min_size=1, max_size=40))
def test_odd_ids_in_paths(server: JupyterProcess, http: httpx.Client, segment: str) -> None:
    ident = quote(segment, safe="")
    for method, path in (
        ("GET", f"agents/{ident}"),
        ("DELETE", f"agents/{ident}"),
        ("GET", f"conversations/{ident}"),
        ("POST", f"conversations/{ident}/round/stop"),
        ("POST", f"conversations/{ident}/kernel/restart"),
    ):
        check(http.request(method, server.api(path)))
