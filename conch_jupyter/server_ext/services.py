"""The one typed accessor handlers use to reach Conch's services (kept in the tornado settings)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import httpx

from ..agents import AgentStore
from ..hub import Hub
from ..service import RoundService
from ..store import Store


@dataclass
class ConchServices:
    data_dir: Path
    store: Store
    agents: AgentStore
    hub: Hub
    rounds: RoundService
    http: httpx.AsyncClient
    kernel_key: str = field(repr=False)

    async def close(self) -> None:
        await self.rounds.close()
        self.hub.close()
        await self.http.aclose()
        self.store.close()
