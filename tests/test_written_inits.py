"""Frozen dataclasses built on the hot paths write their `__init__` out (compiled it runs as
C, where the one `dataclass` generates stays interpreted; docs/architecture.md "Compiled hot
modules"). Each must be exactly what `dataclass` would generate: the fields in order, the
same defaults, every field set, frozen after."""

from __future__ import annotations

import dataclasses
import inspect

import pytest

from prefixsim.costmodel.protocol import PrefillChunk, StepBatch
from prefixsim.engine.scheduler import StepPlan
from prefixsim.trace.record import Request

WRITTEN = [
    (PrefillChunk, (5, 7), {"emits_token": False}),
    (StepBatch, ((PrefillChunk(1, 2),),), {"decode_contexts": (9, 10)}),
    (StepPlan, ([], [("state", 3)]), {}),
    (Request, (3, 1.5, 100, 7, (11, 12), 64), {"session_id": "s", "namespace": "n"}),
]


@pytest.mark.parametrize(("cls", "args", "kwargs"), WRITTEN,
                         ids=lambda v: getattr(v, "__name__", ""))
def test_a_written_init_is_the_one_dataclass_would_generate(cls, args, kwargs):
    fields = dataclasses.fields(cls)
    parameters = list(inspect.signature(cls).parameters.values())
    assert [p.name for p in parameters] == [f.name for f in fields]
    for parameter, field in zip(parameters, fields, strict=True):
        expected = inspect.Parameter.empty if field.default is dataclasses.MISSING \
            else field.default
        assert parameter.default == expected, field.name
    made = cls(*args, **kwargs)
    given = dict(zip([f.name for f in fields][:len(args)], args, strict=True)) | kwargs
    for field in fields:
        assert getattr(made, field.name) == given.get(field.name, field.default), field.name
    assert made == cls(**given)
    try:
        assert hash(made) == hash(cls(**given))
    except TypeError:  # a field holds a list (StepPlan): unhashable, as generated
        pass
    assert dataclasses.replace(made) == made
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(made, fields[0].name, None)
