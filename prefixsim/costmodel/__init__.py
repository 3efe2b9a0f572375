"""Cost models: the CostModel protocol, its registry and the roofline model."""

from prefixsim.costmodel.protocol import COST_MODELS, CostModel, PrefillChunk, StepBatch

__all__ = ["COST_MODELS", "CostModel", "PrefillChunk", "StepBatch"]
