"""prefixsim: what will prefix caching do for my traffic?

The public API: load a config and a trace, run a simulation, get DataFrames and a summary.
"""

__version__ = "0.1.0"

from prefixsim.config import RunConfig, load_config  # noqa: E402
from prefixsim.simulate import RunResult, simulate  # noqa: E402
from prefixsim.trace import Request, load_trace  # noqa: E402

__all__ = ["Request", "RunConfig", "RunResult", "__version__", "load_config", "load_trace",
           "simulate"]
