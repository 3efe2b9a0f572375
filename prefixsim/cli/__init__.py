"""The command line. Importing a subcommand module registers it on `app`."""

from prefixsim.cli import accelerate as _accelerate  # noqa: F401
from prefixsim.cli import calibrate as _calibrate  # noqa: F401
from prefixsim.cli import capacity as _capacity  # noqa: F401
from prefixsim.cli import curve as _curve  # noqa: F401
from prefixsim.cli import profile as _profile  # noqa: F401
from prefixsim.cli import report as _report  # noqa: F401
from prefixsim.cli import run as _run  # noqa: F401
from prefixsim.cli import sweep as _sweep  # noqa: F401
from prefixsim.cli import trace as _trace  # noqa: F401
from prefixsim.cli import tune as _tune  # noqa: F401
from prefixsim.cli.app import app


def main() -> None:
    """Run the command line (the `prefixsim` command is prefixsim/__main__.py's `main`,
    which opts in to the compiled hot modules first)."""
    app(prog_name="prefixsim")


__all__ = ["app", "main"]
