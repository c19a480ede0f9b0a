"""Agents that work in the notebook: the chat's kernel and notebook as tools for your agents.

`rules.py` (pure: mode × taint × tool × calls so far → run / ask / refuse), `kernel.py` (the
chat's kernel, found through the server's own session and kernel managers, driven with
jupyter_client's async client; with `runs.py`, what a run is and gives back, and `handover.py`,
an approved run handed to a cell waiting in `answered()`), `reading.py` (the saved notebook plus
what the kernel ran since),
`service.py` (NotebookTools: one tool call from decision to `tool.ended`, Stop), made of rooms of
one job each over the chat's state (`tool_state.py`): `asking.py` (the user's yes or no),
`stuck.py` (a run Stop could not end), `writes.py` (the cell tools' writes and Undo).
May import: `core`, `store` and `providers` (what a tool call is); never `rounds`, which
offers these tools to a turn.
"""
