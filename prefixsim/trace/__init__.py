"""Traces: the request record, the readers that produce it from files, page-size
conversion, writers and the synthetic workload generator."""

# Importing a reader module registers it (and its content sniffer); order = detection order.
from prefixsim.trace import bailian as _bailian  # noqa: F401
from prefixsim.trace import kvcache_tester as _kvcache_tester  # noqa: F401
from prefixsim.trace import lengths as _lengths  # noqa: F401
from prefixsim.trace import mooncake as _mooncake  # noqa: F401
from prefixsim.trace import parquet as _parquet  # noqa: F401
from prefixsim.trace import ragpulse as _ragpulse  # noqa: F401
from prefixsim.trace import tokenids as _tokenids  # noqa: F401
from prefixsim.trace.readers import (
    DEFAULT_BLOCK_SIZES,
    READERS,
    ReadOptions,
    TraceData,
    detect_format,
    load_trace,
    read_trace,
)
from prefixsim.trace.record import Request

__all__ = ["DEFAULT_BLOCK_SIZES", "READERS", "ReadOptions", "Request", "TraceData",
           "detect_format", "load_trace", "read_trace"]
