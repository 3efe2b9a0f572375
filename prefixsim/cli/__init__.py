"""The command line: `app`, the `prefixsim` command group, whose subcommand modules are
imported when a subcommand is used (cli/lazy_group.py), so that `--help` is quick."""

from prefixsim.cli.app import app


def main() -> None:
    """Run the command line (the `prefixsim` command is prefixsim/__main__.py's `main`,
    which opts in to the compiled hot modules first)."""
    app(prog_name="prefixsim")


__all__ = ["app", "main"]
