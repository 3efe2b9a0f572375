"""The entry point of the `prefixsim` command (and of `python -m prefixsim`).

`main` first opts in to the compiled hot modules (accel/: `opt_in`, a no-op where none are
built, and for the sweep workers the command starts), then loads the command line, so that
a compiled copy is imported wherever one exists for the current source
(docs/architecture.md "Compiled hot modules").
"""

import importlib

from prefixsim import accel


def main() -> None:
    accel.opt_in()  # before any hot module is imported
    importlib.import_module("prefixsim.cli").main()


if __name__ == "__main__":
    main()
