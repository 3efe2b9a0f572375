"""Cost models: the CostModel protocol, its registry and the roofline model."""

from prefixsim.costmodel.protocol import COST_MODELS, CostModel, PrefillChunk, StepBatch
from prefixsim.costmodel.roofline import Roofline, RooflineParams

__all__ = ["COST_MODELS", "CostModel", "PrefillChunk", "Roofline", "RooflineParams",
           "StepBatch"]
