"""`python -m prefixsim` runs the CLI."""

from prefixsim.cli import main

main()
