"""Cost models: the CostModel protocol, its registry, the per-operator roofline (default),
the whole-step roofline and the fitted model."""

from prefixsim.costmodel.fitted import FittedCostModel  # registers "fitted"
from prefixsim.costmodel.protocol import (
    COST_MODELS,
    NO_OVERHEADS,
    CostModel,
    CostModelBase,
    PrefillChunk,
    ServingOverheads,
    StepBatch,
    chunk_time_function,
)
from prefixsim.costmodel.roofline import Roofline, ServingParams
from prefixsim.costmodel.step_roofline import StepRoofline, StepRooflineParams

__all__ = ["COST_MODELS", "NO_OVERHEADS", "CostModel", "CostModelBase", "FittedCostModel",
           "PrefillChunk", "ServingOverheads", "Roofline", "ServingParams", "StepBatch",
           "StepRoofline", "StepRooflineParams", "chunk_time_function"]
