"""Conch's leaves: what every other package shares, importing nothing of Conch's own.

Owns the one error base (`errors`), files written atomically and read with words for what is
wrong with them (`files`), sealed secrets (`sealed`), text from elsewhere made safe (`text`),
names compared as people read them (`names`), the SSE reader (`sse`), Markdown drawn sealed
(`render`), Markdown sealed for Jupyter Chat (`chat_seal`) and deadlines (`deadlines`).
May import: the standard library and third-party packages, and other modules of this package;
nothing else of conch_jupyter.
"""
