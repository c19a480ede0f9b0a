"""Coding agents over ACP: Claude Code, Codex, Goose… run as processes that speak the Agent
Client Protocol, taking turns in a round like your other agents.

    rules.py       which permission passes, asks or is refused; the env, cwd and prompt (pure)
    connection.py  AgentProcess: one agent's process (its group), its sessions, close, resume
    sessions.py    CodingAgents: which process and session a turn runs on; the turn, Stop,
                   crash, hang, what it asks and what it does unasked
    mcp.py         the notebook's tools offered to each session over MCP

May import: core, store, providers, agents, notebook.
"""
