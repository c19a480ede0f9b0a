"""The one error shape: every error Conch answers in words carries a code and a message the
same way, whichever side raised it, and keeps its own name for whoever catches it."""

from __future__ import annotations

import pytest

from conch_jupyter.a2a.outside.service import OutsideError
from conch_jupyter.agents.agent_store import AgentError
from conch_jupyter.client import ConchClientError, ConchNotFound
from conch_jupyter.core.errors import ConchError
from conch_jupyter.door.pairing import PairingError
from conch_jupyter.server_ext.base import ApiError

ERRORS = [
    AgentError("name_taken", "That name is taken."),
    PairingError("not_found", "There is no such pairing."),
    OutsideError("timeout", "Helper did not answer within 2 minutes."),
    ConchClientError(404, "not_found", "There is no such chat."),
    ApiError(413, "too_large", "The body is larger than 1 MB (100% of it)."),
]


@pytest.mark.parametrize("error", ERRORS, ids=lambda e: type(e).__name__)
def test_each_error_carries_a_code_and_a_message(error: ConchError) -> None:
    assert isinstance(error, ConchError)
    assert (error.code, error.message) in {
        ("name_taken", "That name is taken."),
        ("not_found", "There is no such pairing."),
        ("timeout", "Helper did not answer within 2 minutes."),
        ("not_found", "There is no such chat."),
        ("too_large", "The body is larger than 1 MB (100% of it)."),
    }
    if not isinstance(error, ApiError):  # tornado words its own str()
        assert str(error) == error.message
    with pytest.raises(type(error)):  # callers still catch it by its own name
        raise error


def test_the_api_error_is_still_tornados_and_keeps_its_status() -> None:
    error = ApiError(413, "too_large", "The body is larger than 1 MB (100% of it).")
    assert error.status_code == 413
    # tornado fills a log message's %s from `args`: they must stay empty, or a "%" in the
    # words would break the log line.
    assert error.args == ()
    assert "larger than 1 MB" in str(error)


def test_the_client_errors_keep_their_status() -> None:
    assert ConchClientError(502, "http_error", "HTTP 502").status == 502
    missing = ConchNotFound("No Jupyter server with Conch was found.")
    assert (missing.status, missing.code) == (0, "no_server")


def test_an_outside_error_still_says_whether_the_agent_answered() -> None:
    error = OutsideError("failed", "Helper could not do it (its task failed).", answered=True)
    assert (error.code, error.message, error.answered) == ("failed", str(error), True)
    assert OutsideError("timeout", "Helper did not answer.").answered is False
