"""A click group that imports a subcommand's module only when that subcommand is used.

`prefixsim --help` lists every subcommand with its one-line help from a table
(`LazyCommand`: name, module, short help) instead of importing the modules, so it loads
neither the simulator nor pandas, matplotlib, numpy, simpy or pyarrow (docs/architecture.md
"cli/"; a test checks the table's short help against each command's own). Resolving a name
imports its module, which registers the command on the group as every subcommand module
does. Parsing and behaviour are click's.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import click


@dataclass(frozen=True)
class LazyCommand:
    """A subcommand `name` registered by importing `module`; `short_help` is what the
    group's --help lists for it."""

    name: str
    module: str
    short_help: str

    def listed(self, limit: int) -> str:
        """The short help cut to `limit` characters as click cuts a command's."""
        return click.Command(self.name, help=self.short_help).get_short_help_str(limit)


class LazyGroup(click.Group):
    """A click.Group whose subcommands in `lazy` are imported on first use."""

    def __init__(self, *args: Any, lazy: Sequence[LazyCommand] = (), **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy = {entry.name: entry for entry in lazy}

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(self.commands) | set(self.lazy))

    def get_command(self, ctx: click.Context | None, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in self.lazy:
            importlib.import_module(self.lazy[cmd_name].module)
        return self.commands.get(cmd_name)

    def load_all(self) -> dict[str, click.Command]:
        """Every subcommand, imported (for tests and tools that walk the commands)."""
        for name in self.lazy:
            self.get_command(None, name)
        return dict(self.commands)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        names = self.list_commands(ctx)
        limit = formatter.width - 6 - max((len(name) for name in names), default=0)
        rows = []
        for name in names:  # the same limit and shortening as click.Group's own listing
            command = self.commands.get(name)
            if command is not None:
                if command.hidden:
                    continue
                rows.append((name, command.get_short_help_str(limit)))
            else:
                rows.append((name, self.lazy[name].listed(limit)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)
