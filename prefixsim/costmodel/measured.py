"""Element-wise, collective and CPU-overhead times read from a profile's measured tables
(docs/cost-models.md "Reading the tables").

- Element-wise kernels (`ELEMENTWISE_OPS`): each table was measured at one per-GPU row
  width (`elementwise_widths`); a run whose width differs (another TP or model) reads it at
  tokens x run width / table width, the same number of elements.
- All-reduce: the table of the run's GPU count, read at the message size in bytes.
- CPU overhead: the table by batch size (sequences in the step), the first segment's line
  extended below the smallest batch measured.

Leaves out: send/recv (no pipeline parallelism in the engine; the tables are kept for
reference) and anything the profile has no table for (fitted.py falls back).
"""

from __future__ import annotations

from prefixsim.costmodel.operators import LayerDims
from prefixsim.costmodel.profile_parts import ELEMENTWISE_OPS, Collectives, CpuOverhead
from prefixsim.costmodel.profile_parts import ElementwiseTable as ElementwiseTableSpec
from prefixsim.costmodel.tables import Table1D


def elementwise_widths(dims: LayerDims) -> dict[str, int]:
    """Elements per token each element-wise kernel touches on one GPU: the hidden row for
    norms, residual adds and the embedding gather; query and key heads for the rotary
    embedding; the gate and up halves (2 x intermediate per GPU) for the activation."""
    h = dims.hidden_size
    return {"input_norm": h, "post_attention_norm": h, "residual_add": h, "embedding": h,
            "rope": (dims.num_heads + dims.num_kv_heads) * dims.head_dim,
            "activation": 2 * dims.intermediate_size}


class ElementwiseTimes:
    """Seconds of a layer's and a step's element-wise kernels for `dims`."""

    def __init__(self, tables: dict[str, ElementwiseTableSpec], dims: LayerDims) -> None:
        widths = elementwise_widths(dims)
        self.tables = {op: Table1D(tables[op].tokens, tables[op].time_s)
                       for op in ELEMENTWISE_OPS}
        self.stretch = {op: widths[op] / tables[op].width for op in ELEMENTWISE_OPS}
        self.exact = all(s == 1.0 for s in self.stretch.values())

    def op_s(self, op: str, tokens: int) -> float:
        return self.tables[op].time_s(tokens * self.stretch[op])

    def layer_s(self, tokens: int) -> float:
        """Two norms, the rotary embedding, the activation and two residual adds."""
        op = self.op_s
        return (op("input_norm", tokens) + op("post_attention_norm", tokens)
                + op("rope", tokens) + op("activation", tokens)
                + 2 * op("residual_add", tokens))

    def head_s(self, tokens: int) -> float:
        """The embedding gather and the final norm of a step."""
        return self.op_s("embedding", tokens) + self.op_s("input_norm", tokens)


class AllReduceTimes:
    """Seconds of one all-reduce on `tp` GPUs from the profile's measured table."""

    def __init__(self, collectives: Collectives | None, tp: int) -> None:
        tables = {} if collectives is None else {t.num_gpus: t for t in collectives.all_reduce}
        self.measured_gpus = sorted(tables)
        table = tables.get(tp)
        self.table = None if table is None else Table1D(table.bytes, table.time_s)

    @property
    def measured(self) -> bool:
        return self.table is not None

    def time_s(self, num_bytes: float) -> float:
        assert self.table is not None
        return self.table.time_s(num_bytes) if num_bytes > 0 else 0.0


class CpuTimes:
    """Per-step CPU seconds by batch size from the profile's table."""

    def __init__(self, cpu: CpuOverhead) -> None:
        self.table = Table1D(cpu.batch_sizes, cpu.time_s, extend_low=True)

    def time_s(self, num_seqs: int) -> float:
        return self.table.time_s(num_seqs)
