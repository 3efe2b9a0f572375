"""Cost models: the CostModel protocol, its registry, the roofline and the fitted model."""

from prefixsim.costmodel.fitted import FittedCostModel  # registers "fitted"
from prefixsim.costmodel.protocol import COST_MODELS, CostModel, PrefillChunk, StepBatch
from prefixsim.costmodel.roofline import Roofline, RooflineParams

__all__ = ["COST_MODELS", "CostModel", "FittedCostModel", "PrefillChunk", "Roofline",
           "RooflineParams", "StepBatch"]
