"""prefixsim: what will prefix caching do for my traffic?

The public API, for notebooks and scripts:

    import prefixsim
    result = prefixsim.run(trace={"path": "traces/demo_chat.jsonl"}, cache_only=True,
                           cache={"policy": "lru", "capacity_tokens": 20000})
    result.summary["cache_token_hit_rate"]; result.requests; result.timeseries
    requests = prefixsim.load_trace("traces/demo_chat.jsonl")

`run` takes a RunConfig, a YAML path or a mapping plus keyword sections; `load_config` reads
a YAML config; `simulate(config, requests)` is the lower-level call. See README.md.
"""

from prefixsim import accel as _accel

_accel.install()  # before any hot module is imported: compiled copies, if built (accel/)

from prefixsim._version import __version__  # noqa: E402
from prefixsim.config import RunConfig, load_config  # noqa: E402
from prefixsim.pipeline import RunResult, run, simulate  # noqa: E402
from prefixsim.trace import Request, load_trace  # noqa: E402

Result = RunResult

__all__ = ["Request", "Result", "RunConfig", "RunResult", "__version__", "load_config",
           "load_trace", "run", "simulate"]
