"""Your MCP servers in the chat store: what each server is (its transport, program or address),
the names of its environment and headers (their values are sealed apart, never here), its tools
as it last listed them, and its last problem. A part the store holds (`store.mcp_servers`),
sharing its file: its writer, its reading connection and its clock.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, replace
from typing import Any, Literal

from .file import StoreFile
from .rows import row_id
from .writer import Pending, then

Transport = Literal["stdio", "http"]


@dataclass(frozen=True)
class McpServerRow:
    """One MCP server you added, as stored."""

    id: str
    name: str
    transport: Transport
    command: str | None
    args: tuple[str, ...]
    url: str | None
    env_names: tuple[str, ...]
    header_names: tuple[str, ...]
    tools: tuple[dict[str, Any], ...]  # {name, title, description, annotations, input_schema}
    started: float | None  # when it last started and listed its tools
    problem: str | None  # why it last failed, in words; None once it worked again
    created: float


_COLUMNS = (
    "id",
    "name",
    "transport",
    "command",
    "args",
    "url",
    "env_names",
    "header_names",
    "tools",
    "started",
    "problem",
    "created",
)
_LISTS = ("args", "env_names", "header_names", "tools")


def _row(raw: dict[str, Any]) -> McpServerRow:
    values = dict(raw)
    for name in _LISTS:
        try:
            loaded = json.loads(values[name] or "[]")
        except ValueError:
            loaded = []
        values[name] = tuple(loaded) if isinstance(loaded, list) else ()
    return McpServerRow(**values)


def _values(row: McpServerRow) -> tuple[Any, ...]:
    return tuple(
        json.dumps(list(getattr(row, c))) if c in _LISTS else getattr(row, c) for c in _COLUMNS
    )


class McpServers:
    """Your MCP servers, a part the store holds (`store.mcp_servers`)."""

    def __init__(self, file: StoreFile) -> None:
        self._file = file

    def list(self) -> list[McpServerRow]:
        rows = self._file.select("SELECT * FROM mcp_servers ORDER BY created, id", ())
        return [_row(r) for r in rows]

    def get(self, server_id: str) -> McpServerRow | None:
        rows = self._file.select("SELECT * FROM mcp_servers WHERE id = ?", (server_id,))
        return _row(rows[0]) if rows else None

    def by_name(self, name: str) -> McpServerRow | None:
        """The server of that name, case aside (names are unique that way)."""
        rows = self._file.select("SELECT * FROM mcp_servers WHERE name = ?", (name,))
        return _row(rows[0]) if rows else None

    def create(
        self,
        *,
        name: str,
        transport: Transport,
        command: str | None,
        args: tuple[str, ...],
        url: str | None,
        env_names: tuple[str, ...],
        header_names: tuple[str, ...],
    ) -> Pending[McpServerRow]:
        row = McpServerRow(
            row_id("mcp"),
            name,
            transport,
            command,
            args,
            url,
            env_names,
            header_names,
            (),
            None,
            None,
            self._file._clock(),
        )
        marks = ", ".join("?" * len(_COLUMNS))
        sql = f"INSERT INTO mcp_servers ({', '.join(_COLUMNS)}) VALUES ({marks})"  # noqa: S608

        def change(db: sqlite3.Connection) -> None:
            db.execute(sql, _values(row))

        return then(self._file._writer.change(change), lambda _: row)

    def save(self, row: McpServerRow) -> Pending[McpServerRow]:
        """Store the row as it is now (a change of its fields, its tools, its problem)."""
        sets = ", ".join(f"{c} = ?" for c in _COLUMNS[1:])
        sql = f"UPDATE mcp_servers SET {sets} WHERE id = ?"  # noqa: S608

        def change(db: sqlite3.Connection) -> None:
            db.execute(sql, (*_values(row)[1:], row.id))

        return then(self._file._writer.change(change), lambda _: row)

    async def note(
        self,
        server_id: str,
        *,
        tools: tuple[dict[str, Any], ...] | None = None,
        started: float | None = None,
        problem: str | None = None,
    ) -> McpServerRow | None:
        """What a start or a call found: its tools and when (`started`), or a problem."""
        found = self.get(server_id)
        if found is None:
            return None  # removed meanwhile
        row = replace(
            found,
            tools=found.tools if tools is None else tools,
            started=found.started if started is None else started,
            problem=problem,
        )
        return await self.save(row)

    def delete(self, server_id: str) -> Pending[bool]:
        def change(db: sqlite3.Connection) -> bool:
            return db.execute("DELETE FROM mcp_servers WHERE id = ?", (server_id,)).rowcount > 0

        return self._file._writer.change(change)
