"""Unit suffixes on config values and `prefixsim run` flags (config/units.py), and the
"did you mean" of an unknown name (registry.py `unknown_name`)."""

from __future__ import annotations

import pytest
import yaml
from cli_helpers import DEMO, invoke, one_line_error
from hypothesis import given
from hypothesis import strategies as st

from prefixsim.config import load_config
from prefixsim.config.units import quantity, unit_of
from prefixsim.errors import InputError
from prefixsim.registry import Registry, unknown_name


@pytest.mark.parametrize("text, unit, expected", [
    ("5k", "tokens", 5000), ("2M", "tokens", 2_000_000), ("2.5K", "tokens", 2500),
    ("1.5G", "tokens", 1_500_000_000), ("300s", "seconds", 300.0), ("5m", "seconds", 300.0),
    ("1h", "seconds", 3600.0), ("2 min", "seconds", 120.0), ("250ms", "seconds", 0.25),
    ("2s", "milliseconds", 2000.0), ("40GiB", "gib", 40.0), ("512MiB", "gib", 0.5),
    ("1GB", "gib", 1e9 / 2**30),
])
def test_known_answers(text, unit, expected):
    assert quantity(text, unit, integer=unit == "tokens") == expected


@pytest.mark.parametrize("text, unit", [
    ("5x", "tokens"), ("k", "tokens"), ("5m", "tokens"), ("5kk", "tokens"), ("300", "seconds"),
    ("1.2345k", "tokens"), ("5GiB", "seconds"), ("1e400h", "seconds"), ("--5k", "tokens"),
])
def test_refused(text, unit):
    with pytest.raises(ValueError):
        quantity(text, unit, integer=unit == "tokens")


def test_bare_numbers_only_when_asked():
    assert quantity("1200", "tokens", integer=True, bare=True) == 1200
    with pytest.raises(ValueError, match="expected a number"):
        quantity("1200", "tokens", integer=True)


@given(st.integers(0, 10**9), st.sampled_from([("k", 10**3), ("M", 10**6), ("G", 10**9)]))
def test_whole_suffixed_counts_scale_exactly(number, suffix):
    letter, scale = suffix
    assert quantity(f"{number}{letter}", "tokens", integer=True) == number * scale


@given(st.floats(0.001, 1e6, allow_nan=False))
def test_minutes_are_sixty_seconds(number):
    text = repr(number)
    assert quantity(text + "m", "seconds") == pytest.approx(60 * quantity(text + "s", "seconds"))


def test_units_follow_field_names():
    assert [unit_of(n) for n in ("capacity_tokens", "ttl_s", "goodput_ttft_ms",
                                 "activation_reserve_gib", "session_rate_per_s",
                                 "read_gb_s", "replicas")] == \
        ["tokens", "seconds", "milliseconds", "gib", None, None, None]


def test_yaml_takes_units(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({
        "trace": {"path": str(DEMO)},
        "cache": {"capacity_tokens": "5k", "ttl_s": "5m", "pool": {"ttl_s": "1h"}},
        "hardware": {"activation_reserve_gib": "512MiB"},
        "engine": {"goodput_ttft_ms": "2s"}}))
    config = load_config(path)
    assert (config.cache.capacity_tokens, config.cache.ttl_s, config.cache.pool.ttl_s) == \
        (5000, 300.0, 3600.0)
    assert config.hardware.activation_reserve_gib == 0.5
    assert config.engine.goodput_ttft_ms == 2000.0


def test_yaml_errors_name_the_field(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(f"trace: {{path: {DEMO}}}\ncache: {{capacity_tokens: 1.5kk}}\n")
    result = invoke("run", "--config", path, "--cache-only", "-o", tmp_path / "o")
    one_line_error(result, "cache.capacity_tokens", "1.5kk", "5k")


def test_flags_take_units(tmp_path):
    out = tmp_path / "o"
    result = invoke("run", "--trace", DEMO, "--cache-only", "--cache-tokens", "5k", "--ttl",
                    "5m", "-o", out, "--quiet")
    assert result.exit_code == 0, result.output
    written = yaml.safe_load((out / "config.yaml").read_text())
    assert written["cache"]["capacity_tokens"] == 5000 and written["cache"]["ttl_s"] == 300.0
    same = invoke("run", "--trace", DEMO, "--cache-only", "--cache-tokens", "5000", "--ttl",
                  "300", "-o", tmp_path / "p", "--quiet")
    assert same.exit_code == 0
    assert (out / "summary.json").read_text().count("token_hit_rate") > 0


def test_flag_errors_name_the_flag(tmp_path):
    result = invoke("run", "--trace", DEMO, "--cache-only", "--ttl", "5parsecs",
                    "-o", tmp_path / "o")
    assert result.exit_code == 2 and "--ttl" in result.stderr and "5m" in result.stderr


def test_curve_capacities_take_units():
    result = invoke("curve", "--trace", DEMO, "--capacities", "5k,20k", "--json")
    assert result.exit_code == 0, result.output
    assert '"capacity_tokens": 5000' in result.stdout
    assert '"capacity_tokens": 20000' in result.stdout


# ------------------------------------------------------------------ did you mean
def test_registry_suggests_the_closest_name():
    registry: Registry[object] = Registry("router")
    for name in ("round_robin", "prefix_aware"):
        registry.register(name)(object)
    with pytest.raises(ValueError, match=r"did you mean 'prefix_aware'\? valid: prefix_aware, "
                                         "round_robin"):
        registry.check("prefix-aware")
    assert "did you mean" not in unknown_name("router", "zzz", ["round_robin"])


@pytest.mark.parametrize(("name", "hint"), [
    ("h100", "did you mean 'h100-pcie' or 'h100-sxm'? "),  # it was 'h200'
    ("H100", "did you mean 'h100-pcie' or 'h100-sxm'? "),
    ("l", ""),                                             # four begin with it: the list
    ("h2", "did you mean 'h200'? "),
    ("h20", "did you mean 'h200'? "),
    ("mi300", "did you mean 'mi300x'? "),
    ("b100", "did you mean 'b200'? "),                       # none begins: the closest
])
def test_a_name_begun_suggests_those_it_begins(name, hint):
    gpus = ["a100-80g", "b200", "h100-pcie", "h100-sxm", "h200", "l4", "l40s", "l4x", "lz",
            "mi300x"]
    assert unknown_name("gpu", name, gpus) == \
        f"unknown gpu {name!r} ({hint}valid: {', '.join(gpus)})"


@pytest.mark.parametrize(("yaml_text", "message"), [
    ("cache: {capacity: 5}", "cache.capacity: unknown key (did you mean "
                             "'cache.capacity_tokens'?)"),
    ("trace: {pth: x}", "trace.pth: unknown key (did you mean 'trace.path'?)"),
    ("cach: {}", "cach: unknown key (did you mean 'cache'?)"),
    ("engine: {replica: 2}", "engine.replica: unknown key (did you mean 'engine.replicas'?)"),
    ("cache: {zzz: 1}", "cache.zzz: unknown key"),
])
def test_an_unknown_config_key_names_the_one_meant(tmp_path, yaml_text, message):
    (tmp_path / "c.yaml").write_text(yaml_text + "\n")
    with pytest.raises(InputError) as info:
        load_config(str(tmp_path / "c.yaml"), {})
    assert str(info.value) == f"{tmp_path / 'c.yaml'}:1: {message}"  # with its line


@pytest.mark.parametrize("flag, typo, suggested, field", [
    ("--policy", "lur", "lru", "cache.policy"),
    ("--model", "lama-3.1-8b", "llama-3.1-8b", "model"),
    ("--gpu", "h20", "h200", "hardware"),
    ("--router", "round-robin", "round_robin", "router.name"),
])
def test_run_suggests_names(tmp_path, flag, typo, suggested, field):
    result = invoke("run", "--trace", DEMO, flag, typo, "-o", tmp_path / "o")
    one_line_error(result, field, f"did you mean {suggested!r}?")


# ------------------------------------------------------------------ exact texts and edges
def test_digits_may_be_grouped_with_underscores():
    assert quantity("1_000k", "tokens", integer=True) == 1_000_000
    assert quantity("1_500", "tokens", integer=True, bare=True) == 1500


def test_a_float_product_near_a_whole_number_is_that_number():
    # 4.1 * 1e6 is 4099999.9999999995 in binary floating point: still 4.1M tokens
    assert 4.1 * 1e6 != 4_100_000
    assert quantity("4.1M", "tokens", integer=True) == 4_100_000
    assert quantity("4.1G", "tokens", integer=True) == 4_100_000_000


def test_whole_numbers_allow_one_part_in_a_billion():
    # the tolerance is 1e-9 of the value, and never less than 1e-9 absolute
    assert quantity("1.0000000005", "tokens", integer=True, bare=True) == 1
    with pytest.raises(ValueError, match="whole number"):
        quantity("1.0000000015", "tokens", integer=True, bare=True)


def test_refusal_texts_word_for_word():
    with pytest.raises(ValueError) as info:
        quantity("5x", "tokens")
    assert str(info.value) == ("expected a number, or one with a unit (5k, 2M; units: k, K, "
                               "M, G, T), got '5x'")
    with pytest.raises(ValueError) as info:
        quantity("1e400h", "seconds")
    assert str(info.value) == "must be finite, got '1e400h'"
    with pytest.raises(ValueError) as info:
        quantity("1.2345k", "tokens", integer=True)
    assert str(info.value) == "expected a whole number of tokens, got '1.2345k' = 1234.5"
