"""Coding agents over ACP: Claude Code, Codex, Goose… run as processes that speak the Agent
Client Protocol, taking turns in a round like your other agents.

    rules.py     which permission passes, asks or is refused; the env, cwd and prompt (pure)
    sessions.py  CodingAgents: one ACP session per chat and agent, a turn, Stop, crash, hang

May import: core, store, providers, agents, notebook.
"""
