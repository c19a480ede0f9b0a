"""The one error shape Conch's own code raises: a `code` for programs and a `message` for a
person, the same pair the API answers with ({"error": {"code", "message"}}).

Each side keeps its own subclass name (AgentError, PairingError, OutsideError, ApiError,
ConchClientError), so callers catch what they mean; whatever reads an error reads these two.
Nothing here imports anything, so the kernel side can use it as the server side does.
"""

from __future__ import annotations


class ConchError(Exception):
    """Something that could not be done, said in words (`message`) with a code (`code`)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
