"""The run configuration: one frozen, validated model per component, nested in `RunConfig`.

`run_config.py` holds the trace and cache sections, the run config and its YAML reading and
writing; `serving.py` the sections of the timed mode (model, hardware, scheduler, router,
cost model, engine). Plug-in and preset names are checked here, when a config is read, so a
bad name fails before anything runs. Building plug-ins from the sections is
`pipeline/build.py`'s job. See docs/architecture.md.
"""

# every section, the timed mode's included (run_config.py nests them in RunConfig)
from prefixsim.config.run_config import (
    CacheConfig,
    CostModelConfig,
    EngineConfig,
    HardwareConfig,
    ModelConfig,
    RequestClassConfig,
    RouterConfig,
    RunConfig,
    SchedulerConfig,
    TraceConfig,
    build_config,
    config_to_yaml,
    load_config,
    read_config_file,
)

__all__ = [
    "CacheConfig", "CostModelConfig", "EngineConfig", "HardwareConfig", "ModelConfig",
    "RequestClassConfig", "RouterConfig", "RunConfig", "SchedulerConfig", "TraceConfig",
    "build_config", "config_to_yaml", "load_config", "read_config_file",
]
