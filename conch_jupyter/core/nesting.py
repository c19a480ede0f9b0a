"""How deep a parsed JSON value nests, measured without recursion: JSON from elsewhere (an
outside agent's card or answer) is read only within a depth, and nothing that walks a value
afterwards (copying, canonical JSON, cleaning) can exhaust the stack.

A leaf: pure, of the standard library.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

# Deeper than any card or answer Conch reads; far within Python's recursion limit, so every
# recursive walk of a value this deep is safe.
JSON_DEPTH = 64


def nests_deeper(value: Any, limit: int = JSON_DEPTH) -> bool:
    """Whether `value` holds lists or objects more than `limit` deep (a bare scalar is 0 deep,
    `[]` and `{}` are 1). Iterative: any depth is measured without recursion."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        children: Iterable[Any]
        if isinstance(item, dict):
            children = item.values()
        elif isinstance(item, list | tuple):
            children = item
        else:
            continue
        if depth + 1 > limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False
