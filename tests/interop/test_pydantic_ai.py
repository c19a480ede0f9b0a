"""Conch and an agent framework that serves A2A: a pydantic-ai agent behind FastA2A's
`agent_to_a2a` (pydantic-ai 2's own way to serve one), added as an outside agent and asked in a
chat. Its model is pydantic-ai's FunctionModel, so nothing leaves this machine. It answers with a
submitted task that Conch follows with GetTask until it is done.
"""

from __future__ import annotations

import pytest

from ..support.api import Api
from .chat import add_outside, ask_in_chat, ended, outside_answers
from .tools import PY, python_env, serving

pytestmark = pytest.mark.timeout(900)  # the first run builds the venv

PYDANTIC_AI = ["fasta2a[pydantic-ai]==2.1.1", "pydantic-ai-slim==2.68.0", "uvicorn==0.38.0"]


async def test_a_pydantic_ai_agent_as_an_outside_agent(api: Api) -> None:
    python = str(python_env("pydantic-ai", PYDANTIC_AI))
    async with serving(python, str(PY / "pydantic_ai_server.py")) as served:
        added = await add_outside(api, f"http://127.0.0.1:{served.port}")
        assert (added["name"], added["version"]) == ("Cartographer", "1.0")
        chat = await ask_in_chat(api, "Cartographer", "draw the coast of Fife")
    assert outside_answers(chat) == ["Cartographer heard: @Cartographer draw the coast of Fife"]
    assert ended(chat) == ("done", 1)
