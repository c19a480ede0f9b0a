"""The one error tree: every error Conch answers in words carries a code, a message and its HTTP
status the same way, whichever side raised it, and keeps its own name for whoever catches it;
every other exception class in the package is control flow, listed here with its reason."""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path

import pytest

import conch_jupyter
from conch_jupyter.a2a.door.calls import Refusal
from conch_jupyter.a2a.door.rules import Denied
from conch_jupyter.a2a.outside.service import OutsideError
from conch_jupyter.agents.agent_store import AgentError
from conch_jupyter.client import ConchClientError, ConchNotFound
from conch_jupyter.core.errors import ConchError
from conch_jupyter.core.files import StoreError
from conch_jupyter.door.http import DoorError
from conch_jupyter.door.pairing import PairingError
from conch_jupyter.notebook.asking import NotAsking
from conch_jupyter.notebook.stuck import KernelActionRefused
from conch_jupyter.rounds.driver import ChatNotFound
from conch_jupyter.server_ext.base import ApiError
from conch_jupyter.store.chats import NotFound
from conch_jupyter.store.writer import StoreClosed

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


# --- the tree: every exception class in the package is a ConchError, or says why not ---------

# Control flow that never leaves the module that raises it: no words for anyone, so no code
# and no status. Each says why in its own docstring too.
INTERNAL = {
    "conch_jupyter.rounds.engine.RoundError": "an event fed at the wrong time: the driver's bug",
    "conch_jupyter.notebook.runs.NoKernel": "the notebook tools answer the call in words",
    "conch_jupyter.notebook.runs.KernelBusy": "the notebook tools answer the call in words",
    "conch_jupyter.notebook.documents.Held": "the notebook tools answer the call in words",
    "conch_jupyter.store.writer._BatchBroken": "the writer retries the batch one change at a time",
    "conch_jupyter.a2a.signing.SignatureError": "it becomes words in a card's check, no answer",
    "conch_jupyter.mcp_servers.connection.ServerProblem": "the turn and the row say it in words",
}


def exception_classes() -> dict[str, type[BaseException]]:
    """Every exception class defined in conch_jupyter, by its qualified name."""
    found: dict[str, type[BaseException]] = {}
    for module_info in pkgutil.walk_packages(conch_jupyter.__path__, "conch_jupyter."):
        module = importlib.import_module(module_info.name)
        for value in vars(module).values():
            if (
                isinstance(value, type)
                and issubclass(value, BaseException)
                and value.__module__ == module.__name__
            ):
                found[f"{value.__module__}.{value.__qualname__}"] = value
    return found


def test_every_exception_class_is_in_the_tree_or_says_why_not() -> None:
    classes = exception_classes()
    assert len(classes) > 20  # the walk found the package's errors
    outside_the_tree = {name for name, cls in classes.items() if not issubclass(cls, ConchError)}
    assert outside_the_tree == set(INTERNAL), "a new error: derive it from ConchError"
    for name in INTERNAL:
        assert "No ConchError" in (classes[name].__doc__ or ""), f"{name} must say why"
    for name, cls in classes.items():
        if not issubclass(cls, ConchError):
            continue
        assert isinstance(cls.status, int), name
        assert 200 <= cls.status < 600, name
        for code, status in cls.statuses.items():
            assert isinstance(code, str), name
            assert code, name
            assert 400 <= status < 600, name


# What each error is answered with, as the API and the door answer today.
ANSWERED = [
    (NotFound("c1"), 404, "not_found", "There is no such chat."),
    (ChatNotFound("c1"), 404, "not_found", "There is no such chat."),
    (
        StoreError("Could not save x: disk full.", "x"),
        503,
        "storage",
        "Could not save x: disk full.",
    ),
    (
        StoreClosed(Path("conch.sqlite3")),
        503,
        "shutting_down",
        "Conch has stopped: the Jupyter server is shutting down.",
    ),
    (AgentError("not_found", "No such agent."), 404, "not_found", "No such agent."),
    (AgentError("name_taken", "Taken."), 409, "name_taken", "Taken."),
    (AgentError("invalid_name", "No name."), 400, "invalid_name", "No name."),
    (PairingError("not_found", "There is no such pairing."), 404, "not_found", None),
    (PairingError("invalid", "Give the pairing at least one agent."), 400, "invalid", None),
    (OutsideError("not_found", "x"), 404, "not_found", None),
    (OutsideError("exists", "x"), 409, "exists", None),
    (OutsideError("name_taken", "x"), 409, "name_taken", None),
    (OutsideError("invalid_paste", "x"), 400, "invalid_paste", None),
    (OutsideError("invalid_name", "x"), 400, "invalid_name", None),
    (OutsideError("refused", "x"), 400, "refused", None),
    (OutsideError("no_card", "x"), 422, "no_card", None),
    (NotAsking("call-1"), 409, "not_asking", "That run is no longer asking."),
    (KernelActionRefused("not_stuck", "Nothing is stuck."), 409, "not_stuck", None),
    (ConchClientError(502, "http_error", "HTTP 502"), 502, "http_error", None),
    (ApiError(413, "too_large", "The body is larger than 1 MB."), 413, "too_large", None),
    (DoorError(Denied(429, "too_many", "Slow down.")), 429, "too_many", "Slow down."),
    (Refusal(-32001, "There is no such task."), 200, "task_not_found", None),
]


@pytest.mark.parametrize(("error", "status", "code", "words"), ANSWERED, ids=str)
def test_each_error_carries_its_own_status(
    error: ConchError, status: int, code: str, words: str | None
) -> None:
    assert (error.status, error.code) == (status, code)
    if words is not None:
        assert error.message == words


def test_the_log_names_what_the_caller_is_not_told() -> None:
    assert str(NotFound("c1")) == "There is no chat with the id “c1”."
    assert "conch.sqlite3 is closed" in str(StoreClosed(Path("conch.sqlite3")))
    assert Refusal(-32001, "There is no such task.").rpc_code == -32001
