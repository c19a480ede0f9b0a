"""A pydantic-ai agent served over A2A the way that framework does it: `agent_to_a2a` from
FastA2A (pydantic-ai 2's A2A server) under uvicorn, with pydantic-ai's FunctionModel standing in
for a hosted model, so it runs here with no network.

Run by tests/interop/test_pydantic_ai.py in a venv of its own: `python pydantic_ai_server.py`.
Prints {"port": N} once it listens; answers "Cartographer heard: <the words>".
"""

from __future__ import annotations

import json
import socket

import uvicorn
from fasta2a.pydantic_ai import agent_to_a2a
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, FunctionModel


def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    asked = [
        part.content
        for message in messages
        for part in getattr(message, "parts", [])
        if isinstance(part, UserPromptPart) and isinstance(part.content, str)
    ]
    return ModelResponse(parts=[TextPart(f"Cartographer heard: {asked[-1] if asked else ''}")])


def main() -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    agent = Agent(FunctionModel(answer), name="Cartographer")
    app = agent_to_a2a(agent, url=f"http://127.0.0.1:{port}", description="Draws maps.")
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    print(json.dumps({"port": port}), flush=True)
    server.run(sockets=[sock])


if __name__ == "__main__":
    main()
