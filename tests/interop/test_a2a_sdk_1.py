"""Conch and the Python a2a-sdk 1.x (the reference implementation), both ways, in the test venv.

Its client is given the address exactly as the pairing's paste prints it (`create_client`) and
calls every method it has at the door; its server (tests/a2a_peers.Peer: an AgentExecutor under
the SDK's DefaultRequestHandler and JSON-RPC routes) is added as an outside agent and asked in a
chat. More of both directions: test_door_server.py and test_outside*.py.
"""

from __future__ import annotations

import httpx
import pytest
from a2a.client import ClientConfig, create_client
from a2a.types import (
    CancelTaskRequest,
    GetExtendedAgentCardRequest,
    GetTaskRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    TaskState,
)
from a2a.utils.errors import TaskNotCancelableError, TaskNotFoundError

from ..support.a2a_peers import Peer
from ..support.api import Api
from .chat import add_outside, ask_in_chat, ended, outside_answers, pairing

pytestmark = pytest.mark.timeout(120)


async def test_the_1_x_client_at_the_door(api: Api) -> None:
    address, key = await pairing(api, "writer")
    headers = {"Authorization": f"Bearer {key}"}
    async with httpx.AsyncClient(headers=headers, timeout=30) as http:
        client = await create_client(
            address, client_config=ClientConfig(streaming=False, httpx_client=http)
        )
        card = await client.get_extended_agent_card(GetExtendedAgentCardRequest())
        assert card.name == "Writer"
        message = Message(
            message_id="sdk1-1", role=Role.ROLE_USER, parts=[Part(text="What is a conch?")]
        )
        results = [r async for r in client.send_message(SendMessageRequest(message=message))]
        task = results[-1].task
        assert task.status.state == TaskState.TASK_STATE_COMPLETED
        assert "What is a conch?" in task.artifacts[0].parts[0].text
        got = await client.get_task(GetTaskRequest(id=task.id))
        assert got == await client.get_task(GetTaskRequest(id=task.id))
        assert got.artifacts == task.artifacts
        listed = await client.list_tasks(ListTasksRequest())
        assert [t.id for t in listed.tasks] == [task.id]
        with pytest.raises(TaskNotCancelableError):
            await client.cancel_task(CancelTaskRequest(id=task.id))
        with pytest.raises(TaskNotFoundError):
            await client.get_task(GetTaskRequest(id="no-such-task"))
        # A refusal's words are the status message, which keeps its id from read to read.
        command = Message(message_id="sdk1-2", role=Role.ROLE_USER, parts=[Part(text="/help")])
        results = [r async for r in client.send_message(SendMessageRequest(message=command))]
        refused = results[-1].task
        assert refused.status.state == TaskState.TASK_STATE_REJECTED
        reads = [await client.get_task(GetTaskRequest(id=refused.id)) for _ in range(2)]
        ids = {r.status.message.message_id for r in [refused, *reads]}
        assert len(ids) == 1, ids
        await client.close()


async def test_the_1_x_server_as_an_outside_agent(api: Api) -> None:
    with Peer(name="Helper", behaviour="echo") as peer:
        added = await add_outside(api, peer.address)
        assert (added["name"], added["version"]) == ("Helper", "1.0")
        chat = await ask_in_chat(api, "Helper", "which trains run on Sunday?")
    assert outside_answers(chat) == ["You said: @Helper which trains run on Sunday?"]
    assert ended(chat) == ("done", 1)
