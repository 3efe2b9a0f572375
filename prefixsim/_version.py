"""The package version, in one place (read by pyproject metadata users and the summary)."""

__version__ = "0.1.0"
