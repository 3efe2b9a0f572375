"""Traces: the request record and the readers that produce it from files."""

from prefixsim.trace import mooncake as _mooncake  # noqa: F401  (registers the reader)
from prefixsim.trace.readers import DEFAULT_BLOCK_SIZES, READERS, detect_format, load_trace
from prefixsim.trace.record import Request

__all__ = ["DEFAULT_BLOCK_SIZES", "READERS", "Request", "detect_format", "load_trace"]
