"""The run flags made from config fields, by hand: quantities with units, help texts and
their defaults, choices, the dotted overrides and the small parsers of --goodput and
KEY=VALUE (prefixsim/cli/config_options.py)."""

import enum
from typing import Literal

import click
import pytest
from fakes import refusal
from pydantic import Field

from prefixsim.cli import config_options as options
from prefixsim.cli.config_options import (
    Quantity,
    config_dests,
    config_overrides,
    dest,
    help_text,
    parse_goodput,
    parse_params,
)
from prefixsim.config.flags import FlaggedField
from prefixsim.config.units import examples
from prefixsim.errors import InputError


def flagged(key, default=None, annotation=int, **meta):
    info = Field(default)
    info.annotation = annotation
    return FlaggedField(key, info, {"help": "Some words", "flag": "--x", **meta})


def test_quantities_read_units_and_refuse_in_click_words():
    tokens = Quantity("tokens", integer=True, least=1)
    assert tokens.name == "TOKENS"
    assert (Quantity("gib", False).name, Quantity("milliseconds", False).name) == ("GIB", "MS")
    assert tokens.convert("5k", None, None) == 5000
    assert tokens.convert("1200", None, None) == 1200
    assert tokens.convert(7, None, None) == 7 and tokens.convert(2.5, None, None) == 2.5
    seconds = Quantity("seconds", integer=False)
    assert seconds.convert("5m", None, None) == 300.0
    with pytest.raises(click.BadParameter, match="must be >= 1, got '0'"):
        tokens.convert("0", None, None)
    with pytest.raises(click.BadParameter, match="expected a number, or one with a unit"):
        tokens.convert("lots", None, None)
    with pytest.raises(click.BadParameter):
        tokens.convert(True, None, None)  # a flag's bool is no number
    assert Quantity("tokens", True).convert("0", None, None) == 0  # no least: any


class Colour(enum.Enum):
    RED = "red"
    BLUE = "blue"


def test_help_texts_end_with_the_keys_and_a_default_worth_saying():
    assert help_text(flagged("cache.ttl_s")) == "Some words (cache.ttl_s)."
    assert help_text(flagged("a.flag", default=False)) == "Some words (a.flag)."
    assert help_text(flagged("a.map", default={})) == "Some words (a.map)."
    assert help_text(flagged("hardware.tp", default=1)) == "Some words (hardware.tp; 1)."
    assert help_text(flagged("a.f", default=0.50)) == "Some words (a.f; 0.5)."
    assert help_text(flagged("a.e", default=Colour.RED)) == "Some words (a.e; red)."
    assert help_text(flagged("a.b", default=3, also=["c.d", "e.f"])) == \
        "Some words (a.b and c.d and e.f; 3)."
    assert help_text(flagged("a.b", default=3, shown_default="the GPU's")) == \
        "Some words (a.b; the GPU's)."
    assert help_text(flagged("a.b", default=0)) == "Some words (a.b; 0)."


def test_choices_of_enums_and_literals():
    assert options._choices(Colour) == ["red", "blue"]
    assert options._choices(Colour | None) == ["red", "blue"]
    assert options._choices(Literal["a", "b"]) == ["a", "b"]
    assert options._choices(int) is None and options._choices(int | None) is None


def test_dests_and_sections():
    assert dest(flagged("cache.pool.ttl_s")) == "cache_pool_ttl_s"
    assert dest(flagged("cache.pool.ttl_s", dest="pool_ttl")) == "pool_ttl"
    cache = config_dests("cache")
    assert "cache_ttl_s" in cache and "cache_policy" in cache
    assert not any(name.startswith("trace_") for name in cache)
    both = config_dests("trace", "cache")
    assert both[:len(config_dests("trace"))] == config_dests("trace")


def test_overrides_from_parsed_flags():
    overrides = config_overrides({"cache_ttl_s": 30.0, "cache_pool_capacity_tokens": "5k",
                                  "router_params": ("staleness_s=5",),
                                  "engine_goodput_ttft_ms": ("ttft:200",)})
    assert overrides["cache.ttl_s"] == 30.0
    assert overrides["cache.pool.capacity_tokens"] == 5000
    assert overrides["router.params"] == {"staleness_s": 5}
    assert overrides["engine.goodput_ttft_ms"] == 200
    assert overrides["cache.policy"] is None  # not given: the file's value stands
    assert config_overrides({"cache_pool_capacity_tokens": "unbounded"})[
        "cache.pool.capacity_tokens"] == "unbounded"


def test_tokens_or_unbounded_refusal_word_for_word():
    field = flagged("cache.capacity_tokens", flag="--cache-tokens")
    assert options._tokens_or_unbounded(field, None) == {"cache.capacity_tokens": None}
    assert options._tokens_or_unbounded(field, "2.5M") == {"cache.capacity_tokens": 2_500_000}
    with pytest.raises(InputError) as error:
        options._tokens_or_unbounded(field, "many")
    assert (error.value.field, error.value.message) == (
        "--cache-tokens", f"expected a number of tokens ({examples('tokens')}) or "
        "'unbounded', got 'many'")


def test_goodput_targets():
    assert parse_goodput(()) == {}
    assert parse_goodput(("ttft:500 tpot:50",)) == {"engine.goodput_ttft_ms": 500,
                                                    "engine.goodput_tpot_ms": 50}
    assert parse_goodput(("ttft:2s,", "tpot:0.1s")) == {"engine.goodput_ttft_ms": 2000,
                                                        "engine.goodput_tpot_ms": 100}
    for item, message in [("e2e:5", "expected ttft:MS or tpot:MS, got 'e2e:5'"),
                          ("ttft", "not a number of milliseconds: 'ttft'"),
                          ("ttft:soon", "not a number of milliseconds: 'ttft:soon'")]:
        with pytest.raises(InputError) as error:
            parse_goodput((item,))
        assert (error.value.field, error.value.message) == ("--goodput", message)


def test_key_value_params():
    assert parse_params((), "--router-param") is None
    assert parse_params(("a=1", "b=x", "c=[1, 2]", "d="), "--p") == {
        "a": 1, "b": "x", "c": [1, 2], "d": None}
    assert parse_params(("a=b=c",), "--p") == {"a": "b=c"}
    for item in ("novalue", "=5"):
        with pytest.raises(InputError) as error:
            parse_params((item,), "--p")
        assert (error.value.field, error.value.message) == (
            "--p", f"expected KEY=VALUE, got {item!r}")
    with pytest.raises(InputError) as error:
        parse_params(("k=[1",), "--p")
    assert error.value.field == "--p" and error.value.message.startswith("k: not a YAML value")


def test_quantities_keep_whole_numbers_whole_and_name_the_option():
    tokens = Quantity("tokens", integer=True, least=1)
    assert type(tokens.convert("1.5k", None, None)) is int
    assert tokens.convert("1", None, None) == 1  # the least value itself is allowed
    assert Quantity("gib", False).convert("40GiB", None, None) == 40.0
    param, ctx = click.Option(["--n"]), click.Context(click.Command("c"))
    for value in ("2.5", "0"):
        with pytest.raises(click.BadParameter) as error:
            tokens.convert(value, param, ctx)
        assert error.value.param is param and error.value.ctx is ctx
    with pytest.raises(InputError):
        options._tokens_or_unbounded(flagged("cache.pool.capacity_tokens"), "2.5")
    assert type(options._tokens_or_unbounded(flagged("k"), "1.5k")["k"]) is int
    with pytest.raises(InputError) as error:
        options._params(flagged("router.params", flag="--router-param"), ("bad",))
    assert error.value.field == "--router-param"


def test_sections_named_in_the_metadata():
    assert "cache_only" in config_dests("run") and "cache_only" not in config_dests("cache_only")
    assert "engine_sample_interval_s" in config_dests("output")
    assert "engine_sample_interval_s" not in config_dests("engine")


def test_each_kind_of_field_becomes_its_kind_of_option():
    command = click.command()(options.config_options(lambda **kwargs: None))
    params = {param.name: param for param in command.params}
    assert list(params) == [dest(field) for field in options._flagged()]
    for field in options._flagged():
        assert params[dest(field)].help == help_text(field)
        assert params[dest(field)].opts[0] == field.meta["flag"]
    ttl, tokens = params["cache_ttl_s"].type, params["cache_capacity_tokens"].type
    assert isinstance(ttl, Quantity) and (ttl.unit, ttl.integer) == ("seconds", False)
    assert isinstance(tokens, Quantity) and (tokens.unit, tokens.integer) == ("tokens", True)
    assert isinstance(params["model_config_path"].type, click.Path)
    assert params["model_config_path"].type.dir_okay is False
    assert list(params["cache_ttl_mode"].type.choices) == ["sliding", "fixed"]
    formats = params["trace_format"].type  # choices from the metadata
    assert isinstance(formats, click.Choice) and "mooncake" in formats.choices
    assert list(params["load_type"].type.choices)[:2] == ["trace", "poisson"]  # a Literal
    assert params["cache_policy"].type is click.STRING  # a registry name, checked later
    cache_only = params["cache_only"]
    assert cache_only.is_flag and cache_only.default is None
    router = params["router_params"]
    assert router.multiple and router.metavar == "KEY=VALUE"
    assert router.type is click.STRING and not router.is_flag
    pool = params["cache_pool_capacity_tokens"]
    assert pool.type is click.STRING and not pool.multiple
    seed = params["trace_seed"].type  # an int with a least value in the metadata
    assert isinstance(seed, click.IntRange) and seed.min == 0
    assert params["hardware_tp"].type is click.INT
    assert params["cache_host_bandwidth_gb_s"].type is click.FLOAT
    assert not params["cache_ttl_s"].multiple and not params["cache_ttl_s"].is_flag


# ------------------------------------------------ an error about a flag's value names the flag
GIVEN = {"cache.ttl_s": "--ttl", "router.params": "--router-param"}


@pytest.mark.parametrize("error, expected", [
    (InputError("must be > 0, got -1.0", field="cache.ttl_s"),
     "--ttl (cache.ttl_s): must be > 0, got -1.0"),
    (InputError("no such parameter", field="router.params.stale"),  # below the flag's key
     "--router-param (router.params.stale): no such parameter"),
    (InputError("bad", field="cache"), "cache: bad"),  # above it: not the flag's value alone
    (InputError("bad", field="cache.ttl"), "cache.ttl: bad"),  # a prefix, not a key
    (InputError("bad", field="cache.policy"), "cache.policy: bad"),  # no flag given
    (InputError("bad"), "bad"),
    (InputError("bad", file="run.yaml", line=3, field="cache.ttl_s"),  # the file's own value
     "run.yaml:3: cache.ttl_s: bad"),
])
def test_an_error_names_the_flag_that_gave_its_value(error, expected):
    assert str(options.named_by_flag(error, GIVEN)) == expected


def test_a_flags_bad_value_is_named_by_the_flag_with_or_without_a_file(tmp_path):
    config = tmp_path / "run.yaml"
    config.write_text("cache:\n  policy: lru\n  capacity_tokens: 1000\n")
    for path in (None, str(config)):
        error = refusal(options.load_flagged_config, path, {"cache_ttl_s": -1.0})
        assert error == "--ttl (cache.ttl_s): must be > 0, got -1.0"
    config.write_text("cache:\n  policy: lru\n  capacity_tokens: -5\n")
    error = refusal(options.load_flagged_config, str(config), {"cache_ttl_s": 30.0})
    assert error == f"{config}:3: cache.capacity_tokens: must be >= 0, got -5"
    # a flag left out (None) gave nothing, so the file's bad value keeps its file and line
    error = refusal(options.load_flagged_config, str(config), {"cache_capacity_tokens": None})
    assert error == f"{config}:3: cache.capacity_tokens: must be >= 0, got -5"
    # the flag over the file's bad value: the flag's value stands, accepted
    config_ok = options.load_flagged_config(str(config), {"cache_capacity_tokens": "2k"})
    assert config_ok.cache.capacity_tokens == 2000
