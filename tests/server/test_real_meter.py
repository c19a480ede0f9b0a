"""The meter with the real Claude Code adapter (issue 37): `claude-agent-acp` (pinned in
tests/support/acp_adapters) against a scripted Anthropic model on loopback. Its cost figure starts
again for every session it opens, so a turn after the session was taken up again (the idle end,
then `session/resume` or `session/load` on a new process) or opened anew (after Stop) was billed
$0: every turn is billed what its own reports show.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ..support import real_agents
from ..support.api import Api, settled, wait_for
from ..support.real_agents import Script
from ..support.scripted_models import ScriptedModels
from .test_acp_rounds import coding_chat, conch_of, replies
from .test_real_agents import add_real
from .test_rounds_server import say

pytestmark = [pytest.mark.adapters, pytest.mark.timeout(240)]


@pytest.fixture(scope="module", autouse=True)
def _adapters() -> None:
    real_agents.ensure_adapters()  # `npm ci` once, when missing


@pytest.fixture
def conch_config() -> dict[str, Any]:
    return {"acp_quiet_seconds": 120.0}


@pytest.fixture
def script(models: ScriptedModels) -> Script:
    scripted = Script(calls={}, after="Done.")
    models.responder = scripted
    return scripted


async def test_claudes_turn_after_its_session_was_taken_up_again_is_billed(
    api: Api, models: ScriptedModels, script: Script, tmp_path: Path, jp_serverapp: Any
) -> None:
    coding = conch_of(jp_serverapp).coding
    coding.idle_seconds = 0.5
    await add_real(api, "claude", models, tmp_path / "home")
    chat_id = await coding_chat(api, mode="ask")
    await say(api, chat_id, "@Claude hello")
    chat = await settled(api, chat_id, 180)
    assert replies(chat, "claude") == ["Hello from the model."]
    [first] = chat["spend"]
    assert first["usd"] > 0
    process = coding.process_of("claude")
    [session] = [s for s in coding._chats.values() if s.chat == chat_id]
    kept = session.session_id

    async def ended_idle() -> bool:
        return coding.process_of("claude") is None and process.process.returncode is not None

    await wait_for(ended_idle, 60)
    await say(api, chat_id, "@Claude hello again")
    chat = await settled(api, chat_id, 180)
    assert replies(chat, "claude")[-1] == "Hello from the model."
    assert session.session_id == kept  # taken up again on the new process
    [_, second] = chat["spend"]
    assert second["usd"] > 0  # its own reports, from the new opening's $0
    assert chat["spent_usd"] == pytest.approx(first["usd"] + second["usd"])
