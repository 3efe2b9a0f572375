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

from prefixsim._version import __version__
from prefixsim.config import RunConfig, load_config
from prefixsim.pipeline import RunResult, simulate
from prefixsim.pipeline.api import run
from prefixsim.trace import Request, load_trace

Result = RunResult

__all__ = ["Request", "Result", "RunConfig", "RunResult", "__version__", "load_config",
           "load_trace", "run", "simulate"]
