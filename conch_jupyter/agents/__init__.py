"""Your agents: who they are and which model each asks, kept in `agents/agents.json` (`file`)
with their keys sealed, and served as `AgentStore` (`agent_store`).

May import: `core` and `providers` (what a provider is); nothing else of conch_jupyter.
"""

from .agent_store import Agent, AgentError, AgentStore

__all__ = ["Agent", "AgentError", "AgentStore"]
