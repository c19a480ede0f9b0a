"""An agent served by a2a-sdk 0.3, as its users build one: an AgentExecutor under the SDK's
DefaultRequestHandler in its Starlette app, run by uvicorn on loopback.

Run by tests/interop/test_a2a_sdk_0_3.py in a venv of its own: `python sdk03_server.py`. Prints
{"port": N} once it listens; answers every message with "Archivist heard: <the words>" as a
completed task with the answer as an artifact, and "slow" messages only after a minute (for Stop,
which must cancel the task; both are printed: {"working": task id}, {"canceled": task id}).
"""

from __future__ import annotations

import asyncio
import json
import socket

import uvicorn
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.apps import A2AStarletteApplication
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import AgentCapabilities, AgentCard, AgentSkill, Part, TextPart
from a2a.utils import new_task


class Archivist(AgentExecutor):
    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.message is not None
        task = context.current_task or new_task(context.message)
        await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        words = context.get_user_input()
        if "slow" in words:
            await updater.start_work()
            print(json.dumps({"working": task.id}), flush=True)
            await asyncio.sleep(60)
        await updater.add_artifact([Part(root=TextPart(text=f"Archivist heard: {words}"))])
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.task_id is not None
        assert context.context_id is not None
        print(json.dumps({"canceled": context.task_id}), flush=True)
        await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()


def main() -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    card = AgentCard(
        name="Archivist",
        description="An agent built with a2a-sdk 0.3.",
        url=f"http://127.0.0.1:{port}/",
        version="1.0.0",
        capabilities=AgentCapabilities(streaming=False),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[AgentSkill(id="echo", name="Echo", description="Says what it heard.", tags=[])],
    )
    handler = DefaultRequestHandler(agent_executor=Archivist(), task_store=InMemoryTaskStore())
    app = A2AStarletteApplication(agent_card=card, http_handler=handler).build()
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    print(json.dumps({"port": port}), flush=True)
    server.run(sockets=[sock])


if __name__ == "__main__":
    main()
