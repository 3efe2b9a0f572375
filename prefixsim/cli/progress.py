"""Progress of the long commands, on stderr: a bar on a terminal, a plain line otherwise.

On a terminal a tqdm bar; when stderr is a file or a pipe (CI, nohup, a log) one line
`prefixsim: DESC: N/TOTAL UNIT (P%), S s` at most every LINE_EVERY_S seconds of wall time
and one when done, so a long run in a log still shows it is alive. `--quiet` shows neither.
The simulator never reads the clock; only this CLI module does.
"""

from __future__ import annotations

import sys
import time
from typing import Any

import click
from tqdm import tqdm

LINE_EVERY_S = 30.0


class Progress:
    """`update(n)`, `reset(total)`, `set_postfix(mapping)` and `close()` like tqdm's."""

    def __init__(self, desc: str, unit: str, total: int | None = None, quiet: bool = False,
                 leave: bool = False) -> None:
        self.desc, self.unit, self.total = desc, unit, total
        self.count = 0
        self.postfix = ""
        self.bar: Any = None
        self.lines = not quiet and not sys.stderr.isatty()
        if not quiet and not self.lines:
            self.bar = tqdm(total=total, unit=unit, desc=desc, leave=leave)
        self.started = self.shown = time.monotonic()

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def update(self, n: int = 1) -> None:
        self.count += n
        if self.bar is not None:
            self.bar.update(n)
        elif self.lines and time.monotonic() - self.shown >= LINE_EVERY_S:
            self._line()

    def reset(self, total: int | None) -> None:
        self.total, self.count = total, 0
        if self.bar is not None:
            self.bar.reset(total=total)

    def set_postfix(self, values: dict[str, object]) -> None:
        self.postfix = ", ".join(f"{k} {v}" for k, v in values.items())
        if self.bar is not None:
            self.bar.set_postfix(values, refresh=False)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None
        elif self.lines and time.monotonic() - self.started >= LINE_EVERY_S:
            self._line(done=True)
            self.lines = False

    def _line(self, done: bool = False) -> None:
        self.shown = now = time.monotonic()
        count = f"{self.count:,}" + (f"/{self.total:,}" if self.total else "")
        share = f" ({self.count / self.total:.0%})" if self.total else ""
        extra = f", {self.postfix}" if self.postfix else ""
        state = ", done" if done else ""
        click.echo(f"prefixsim: {self.desc}: {count} {self.unit}{share}{extra}, "
                   f"{now - self.started:.0f} s{state}", err=True)
