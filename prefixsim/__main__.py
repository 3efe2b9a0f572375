"""The entry point of the `prefixsim` command (and of `python -m prefixsim`).

`main` first opts in to the compiled hot modules (accel/: `opt_in`, a no-op where none are
built, and for the sweep workers the command starts), then loads the command line, so that
a compiled copy is imported wherever one exists for the current source
(docs/architecture.md "Compiled hot modules"). Ctrl-C while the command line loads (its
imports take a few seconds) exits with 130 and one line, not a traceback
(docs/input-rules.md I18).
"""

import importlib
import sys

from prefixsim import accel

INTERRUPTED_EXIT = 130  # 128 + SIGINT, as a shell reports a command ended by Ctrl-C


def main() -> None:
    try:
        accel.opt_in()  # before any hot module is imported
        cli = importlib.import_module("prefixsim.cli")
    except KeyboardInterrupt:
        print("prefixsim: interrupted while starting", file=sys.stderr)
        sys.exit(INTERRUPTED_EXIT)
    cli.main()


if __name__ == "__main__":
    main()
