"""Errors that reach the user as one line (exit code 2).

`InputError` carries where the bad input is (file, line, field) so the CLI can print a
single message that names it. Internal failures are ordinary exceptions and exit with 1.
"""

from __future__ import annotations


class InputError(Exception):
    """Invalid user input: a trace line, a config key, an option value or a missing file."""

    def __init__(
        self,
        message: str,
        *,
        file: str | None = None,
        line: int | None = None,
        field: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.file = file
        self.line = line
        self.field = field

    def __str__(self) -> str:
        where = ""
        if self.file is not None:
            where = str(self.file)
            if self.line is not None:
                where += f":{self.line}"
            where += ": "
        field = f"{self.field}: " if self.field else ""
        return f"{where}{field}{self.message}"
