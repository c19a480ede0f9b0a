"""The a2a-sdk 0.3 client, used as its users use it: `ClientFactory.connect` on the address a
person was given, then card, send, get and cancel (0.3 has no list).

Run by tests/interop/test_a2a_sdk_0_3.py in a venv of its own (a2a-sdk 0.3 cannot share the test
venv): `python sdk03_client.py ADDRESS KEY TEXT`. Prints one JSON object: each step's result as
0.3 JSON, or the error it raised ({"error": type name, "message": ...}).
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import httpx
from a2a.client import ClientConfig, ClientFactory
from a2a.types import Message, Part, Role, TaskIdParams, TaskQueryParams, TextPart


def _failure(error: BaseException) -> dict[str, Any]:
    return {"error": type(error).__name__, "message": str(error)[:500]}


async def main(address: str, key: str, text: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    headers = {"Authorization": f"Bearer {key}"}
    async with httpx.AsyncClient(headers=headers, timeout=30) as http:
        try:
            client = await ClientFactory.connect(
                address, client_config=ClientConfig(streaming=False, httpx_client=http)
            )
        except Exception as error:
            return {"connect": _failure(error)}
        out["card"] = (await client.get_card()).model_dump(mode="json", exclude_none=True)
        message = Message(
            message_id="sdk03-1",
            role=Role.user,
            parts=[Part(root=TextPart(text=text))],
            context_id="sdk03-context",
        )
        try:
            events = [event async for event in client.send_message(message)]
            last = events[-1]
            task = last[0] if isinstance(last, tuple) else last
            out["send"] = task.model_dump(mode="json", exclude_none=True)
        except Exception as error:
            out["send"] = _failure(error)
            return out
        task_id = out["send"].get("id", "")
        for step, work in (
            ("get", lambda: client.get_task(TaskQueryParams(id=task_id))),
            ("getAgain", lambda: client.get_task(TaskQueryParams(id=task_id))),
            ("cancel", lambda: client.cancel_task(TaskIdParams(id=task_id))),
            ("missing", lambda: client.get_task(TaskQueryParams(id="no-such-task"))),
        ):
            try:
                out[step] = (await work()).model_dump(mode="json", exclude_none=True)
            except Exception as error:
                out[step] = _failure(error)
        await client.close()
    return out


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(*sys.argv[1:4]))))
