"""Agents that work in the notebook: the chat's kernel and notebook as tools for your agents.

`rules.py` (pure: mode × taint × tool × calls so far → run / ask / refuse), `kernel.py` (the
chat's kernel, found through the server's own session and kernel managers, driven with
jupyter_client's async client), `reading.py` (the saved notebook plus what the kernel ran since),
`service.py` (NotebookTools: one tool call from decision to `tool.ended`, the user's yes or no,
Stop).
May import: `core`, `store` and `providers` (what a tool call is); never `rounds`, which
offers these tools to a turn.
"""
