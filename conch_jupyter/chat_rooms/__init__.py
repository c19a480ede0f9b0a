"""Rooms in Jupyter Chat: Conch's face in jupyterlab-chat's `.chat` documents (issue 33).

Owns the translation both ways (`rooms.ChatRooms`: a person's message in, the round's happenings
out as chat messages) and its pure words (`words`: who wrote a message, Conch's commands, the
lines Conch posts, every one sealed for the chat). It holds no rule of a round: the rounds do.
Loaded only where jupyterlab-chat is installed (`conch-jupyter[chat]`). May import: `core`,
`store`, `agents`, `notebook` (the questions waiting) and `rounds`; only `server_ext` imports it.
"""
