"""prefixsim: what will prefix caching do for my traffic?

The public API, for notebooks and scripts:

    import prefixsim
    result = prefixsim.run(trace={"path": "traces/demo_chat.jsonl"}, cache_only=True,
                           cache={"policy": "lru", "capacity_tokens": 20000})
    result.summary["cache_token_hit_rate"]; result.requests; result.timeseries
    requests = prefixsim.load_trace("traces/demo_chat.jsonl")

`run` takes a RunConfig, a YAML path or a mapping plus keyword sections; `load_config` reads
a YAML config; `simulate(config, requests)` is the lower-level call. See README.md.

Importing the package imports nothing else: each name is loaded when first used, so an
entry point can choose its speed machinery first. The compiled hot modules (built at
install, or by `prefixsim accelerate`) are an explicit opt-in (docs/architecture.md
"Compiled hot modules"): the CLI opts in at its entry point; a script calls
`prefixsim.accel.opt_in()` before it uses anything else (or sets PREFIXSIM_ACCEL=1).
"""

import importlib
from typing import Any

from prefixsim import accel as _accel
from prefixsim._version import __version__

_accel.install_if_asked()  # PREFIXSIM_ACCEL=1: before any hot module is imported (accel/)

# public name -> (module, attribute), loaded on first use
_API = {
    "RunConfig": ("prefixsim.config", "RunConfig"),
    "load_config": ("prefixsim.config", "load_config"),
    "RunResult": ("prefixsim.pipeline", "RunResult"),
    "Result": ("prefixsim.pipeline", "RunResult"),
    "run": ("prefixsim.pipeline", "run"),
    "simulate": ("prefixsim.pipeline", "simulate"),
    "Request": ("prefixsim.trace", "Request"),
    "load_trace": ("prefixsim.trace", "load_trace"),
}


def __getattr__(name: str) -> Any:
    if name not in _API:
        raise AttributeError(f"module 'prefixsim' has no attribute {name!r}")
    module, attribute = _API[name]
    value = getattr(importlib.import_module(module), attribute)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_API])


__all__ = ["Request", "Result", "RunConfig", "RunResult", "__version__", "load_config",
           "load_trace", "run", "simulate"]
