"""A click command whose --help lists its options under section headings.

Click prints one flat "Options:" list; `SectionedCommand(sections=[(title, [param names])])`
prints one list per section instead, in the order given (the help option is named "help"),
and anything not listed under "Other options" (a test checks `run` lists every option).
Only the help text changes: option names, parsing and behaviour are click's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import click


class SectionedCommand(click.Command):
    """A click.Command with `sections`: (heading, parameter names) pairs for --help."""

    def __init__(self, *args: Any, sections: Sequence[tuple[str, Sequence[str]]] = (),
                 **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.sections = [(title, list(names)) for title, names in sections]

    def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        records = {}
        help_option = self.get_help_option(ctx)
        for param in self.get_params(ctx):
            if isinstance(param, click.Argument):
                continue  # in the usage line and the docstring, as click lists them
            record = param.get_help_record(ctx)
            if record is not None:  # the help option is listed as "help", whatever click names it
                records["help" if param is help_option else param.name] = record
        placed: set[str | None] = set()
        for title, names in self.sections:
            rows = [records[name] for name in names if name in records]
            placed.update(names)
            if rows:
                with formatter.section(title):
                    formatter.write_dl(rows)
        rest = [record for name, record in records.items() if name not in placed]
        if rest:
            with formatter.section("Other options"):
                formatter.write_dl(rest)
