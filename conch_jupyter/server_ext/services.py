"""The one typed accessor handlers use to reach Conch's services (kept in the tornado settings)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import httpx

from ..a2a.door.rules import DoorGate
from ..a2a.outside.service import OutsideAgents
from ..agents.agent_store import AgentStore
from ..coding.mcp import McpEndpoint
from ..coding.sessions import CodingAgents
from ..core.policy import NO_POLICY, Policy
from ..door.pairing import PairingStore
from ..door.service import PeerService
from ..door.signer import DoorSigner
from ..mcp_servers.service import McpServerService
from ..notebook.service import NotebookTools
from ..rounds.driver import RoundService
from ..store.chats import Store
from ..store.hub import Hub


@dataclass
class ConchServices:
    data_dir: Path
    store: Store
    agents: AgentStore
    hub: Hub
    rounds: RoundService
    http: httpx.AsyncClient
    pairings: PairingStore  # the A2A door: who may come in,
    door_gate: DoorGate  # the rules at the door,
    peers: PeerService  # and your agents answering them
    outside: OutsideAgents  # agents elsewhere that your chats can mention
    tools: NotebookTools  # your agents' hands in the chat's notebook and kernel
    coding: CodingAgents  # coding agents over ACP: their processes and sessions
    mcp: McpEndpoint  # the notebook's tools, as each coding agent's session is offered them
    mcp_servers: McpServerService  # your MCP servers, whose tools your agents are offered
    door_signer: DoorSigner  # the door's key, which signs its cards
    kernel_key: str = field(repr=False)
    policy: Policy = NO_POLICY  # what the administrator locked (c.ConchApp.policy)

    async def close(self) -> None:
        await self.rounds.close()
        await self.coding.close()  # every coding agent's process ends
        await self.mcp.close()  # the SDK's server behind the notebook's tools for them
        await self.mcp_servers.close()  # every MCP server's connection (and process group)
        await self.tools.close()  # stuck runs no longer followed, then the kernels' clients
        await self.peers.close()
        await self.outside.aclose()
        self.hub.close()
        await self.http.aclose()
        self.store.close()
