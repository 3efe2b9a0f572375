"""Which config fields become `prefixsim run` flags (config/flags.py): `option`'s metadata
and the walk over the sections, called directly (the CLI calls them when it is imported)."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import Field

from prefixsim.config import RunConfig
from prefixsim.config.flags import FlaggedField, _sections, flagged_fields, option
from prefixsim.config.run_config import CacheConfig, PoolConfig, RequestClassConfig
from prefixsim.config.section import Section


class _Inner(Section):
    depth: int = option(3, "--depth", "How deep", ge=1, metavar="N")
    note: str = Field("x", description="no flag")


class _Outer(Section):
    name: str = option("a", "--name", "The name", choices=["a", "b"], section="run")
    inner: _Inner | None = None
    many: list[_Inner] = Field(default_factory=list)
    table: dict[str, _Inner] = Field(default_factory=dict)
    plain: int = 1


def test_option_splits_flag_metadata_from_pydantic_arguments():
    info = option(3, "--depth", "How deep", ge=1, metavar="N", min=1)
    assert info.default == 3 and info.description == "How deep"
    assert info.json_schema_extra == {"cli": {"flag": "--depth", "help": "How deep",
                                              "metavar": "N", "min": 1}}
    assert any(getattr(m, "ge", None) == 1 for m in info.metadata)  # ge went to pydantic
    with pytest.raises(ValueError):
        _Inner(depth=0)


def test_flagged_fields_walk_nested_sections_in_field_order():
    found = list(flagged_fields(_Outer))
    assert [f.key for f in found] == ["name", "inner.depth"]
    assert found[0].meta == {"flag": "--name", "help": "The name", "choices": ["a", "b"],
                             "section": "run"}
    assert found[1].meta == {"flag": "--depth", "help": "How deep", "metavar": "N"}
    assert found[1].field is _Inner.model_fields["depth"]
    assert (found[0].top, found[1].top) == ("name", "inner")


def test_a_field_s_metadata_is_a_copy():
    first = next(flagged_fields(_Outer))
    first.meta["flag"] = "--changed"
    assert next(flagged_fields(_Outer)).meta["flag"] == "--name"


@pytest.mark.parametrize(("annotation", "sections"), [
    (PoolConfig | None, [PoolConfig]),
    (CacheConfig, [CacheConfig]),
    (list[RequestClassConfig], []),
    (dict[str, Any], []),
    (tuple[float, float] | None, []),
    (int, []),
    (str | None, []),
])
def test_sections_of_an_annotation(annotation, sections):
    assert _sections(annotation) == sections


def test_the_run_config_s_flags():
    found = {f.key: f for f in flagged_fields(RunConfig)}
    assert list(found)[0] == "trace.path"
    assert found["cache.pool.capacity_tokens"].meta["flag"] == "--pool-tokens"
    assert found["cache.pool.capacity_tokens"].top == "cache"
    assert found["cache_only"].meta["section"] == "run"
    assert not any(key.startswith("cache.classes") for key in found)
    assert isinstance(found["load.type"], FlaggedField)
    assert len({f.meta["flag"] for f in found.values()}) == len(found)  # no flag twice
