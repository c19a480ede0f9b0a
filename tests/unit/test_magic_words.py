"""%conch's words as IPython reads them (issue 23, item 3): a question ending in `?` is a message,
never IPython's help for its last word; `%conch?` alone is still the magic's help, and a
`%%conch` cell's body is the magic's own text."""

from __future__ import annotations

import pytest
from IPython.core.inputtransformer2 import TransformerManager

from conch_jupyter.magic import questions_sent


def read(cell: str) -> str:
    manager = TransformerManager()
    manager.cleanup_transforms.append(questions_sent)
    return str(manager.transform_cell(cell))


@pytest.mark.parametrize(
    ("cell", "python"),
    [
        (
            "%conch @Researcher what is in this notebook?\n",
            "get_ipython().run_line_magic('conch', '@Researcher what is in this notebook?')\n",
        ),
        ("%conch why?", "get_ipython().run_line_magic('conch', 'why?')\n"),
        (
            "if True:\n    %conch and you?  \nx = 1\n",
            "if True:\n    get_ipython().run_line_magic('conch', 'and you?')\nx = 1\n",
        ),
        ('%conch it\'s "this"?\n', "get_ipython().run_line_magic('conch', 'it\\'s \"this\"?')\n"),
    ],
)
def test_a_question_is_sent_as_written(cell: str, python: str) -> None:
    assert read(cell) == python


def test_without_the_transformer_ipython_reads_it_as_help() -> None:
    # What the transformer is for: IPython alone asks for the help of "notebook".
    assert TransformerManager().transform_cell("%conch what is in this notebook?\n") == (
        "get_ipython().run_line_magic('pinfo', 'notebook')\n"
    )


@pytest.mark.parametrize(
    ("cell", "python"),
    [
        ("%conch?\n", "get_ipython().run_line_magic('pinfo', '%conch')\n"),
        ("%conch stop\n", "get_ipython().run_line_magic('conch', 'stop')\n"),
        (
            "%%conch\n%conch what?\n",
            "get_ipython().run_cell_magic('conch', '', '%conch what?\\n')\n",
        ),
        ("x = 1  # %conch not a magic?\n", "x = 1  # %conch not a magic?\n"),
    ],
)
def test_everything_else_reads_as_before(cell: str, python: str) -> None:
    assert read(cell) == python
