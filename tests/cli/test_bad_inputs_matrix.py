"""The bad-input matrix (docs/input-rules.md I1, I2): every numeric option of `run`
and every numeric or boolean field of a YAML run config, given values that must be refused
(negative, not finite, too large, text, the wrong kind), gives exit 2, no traceback, nothing
on disk, and one line naming the option or dotted key (a value Click's own type refuses
names the option).
Zero is added where zero is not a valid value. Trace, YAML-structure, output, sweep and
cluster cases are in test_input_refusals.py, test_output_safety.py, test_cli_errors.py
and tests/trace/."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from prefixsim.cli import app

DEMO = str(Path(__file__).parents[2] / "traces" / "demo_chat.jsonl")
BAD = ["-1", "nan", "inf", "1e400", "abc", "true"]
# option -> config key it names; "zero": 0 is refused too
OPTIONS = {
    "--block-size": ("trace.block_size", True), "--max-requests": ("trace.max_requests", True),
    "--cache-tokens": ("cache.capacity_tokens", False), "--ttl": ("cache.ttl_s", True),
    "--min-cacheable-tokens": ("cache.min_cacheable_tokens", False),
    "--host-cache-tokens": ("cache.host_capacity_tokens", False),
    "--host-bandwidth": ("cache.host_bandwidth_gb_s", True),
    "--disk-cache-tokens": ("cache.disk_capacity_tokens", False),
    "--disk-bandwidth": ("cache.disk_bandwidth_gb_s", True),
    "--tier-min-load-tokens": ("cache.tier_min_load_tokens", False),
    "--session-rate": ("trace.session_rate_per_s", True), "--tp": ("hardware.tp", True),
    "--memory-utilization": ("hardware.memory_utilization", True),
    "--replicas": ("engine.replicas", True),
    "--max-batched-tokens": ("scheduler.max_batched_tokens", True),
    "--max-num-seqs": ("scheduler.max_num_seqs", True),
    "--time-scale": ("engine.time_scale", True),
    "--sample-interval": ("engine.sample_interval_s", True),
    "--trace-seed": ("trace.seed", False),
}
OPTION_CASES = [(option, value) for option, (_, zero) in OPTIONS.items()
                for value in BAD + (["0"] if zero else [])]
# YAML: every key above as a YAML value of the wrong kind or out of range, plus booleans
YAML_BAD = ["-1", ".nan", ".inf", "1e400", "'5'", "true", "[1]", "{a: 1}"]
FLAGS = ["trace.skip_bad_lines", "cache_only", "cache.bounds", "engine.check_invariants"]
YAML_CASES = ([(key, value) for key, _ in OPTIONS.values() for value in YAML_BAD]
              + [(key, value) for key in FLAGS for value in ["1", "0", "'yes'", "[]"]])


def check(result, tmp_path: Path, names: tuple[str, ...], inputs: set[str]) -> None:
    """Exit 2, one line `prefixsim: error: ...` holding one of `names`, nothing written."""
    assert result.exit_code == 2, (result.output, result.exception)
    assert "Traceback" not in result.output and result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("prefixsim: error: "), result.stderr
    assert any(name in lines[0] for name in names), (names, lines[0])
    assert {p.name for p in tmp_path.iterdir()} == inputs


@pytest.mark.parametrize("option, value", OPTION_CASES)
def test_a_bad_option_value_is_refused_naming_it(option, value, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    key = OPTIONS[option][0]
    result = CliRunner().invoke(app, ["run", "--trace", DEMO, option, value])
    check(result, tmp_path, (key, option), set())


@pytest.mark.parametrize("key, value", YAML_CASES)
def test_a_bad_config_field_is_refused_naming_it(key, value, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    section, _, leaf = key.rpartition(".")
    text = f"{section}:\n  {leaf}: {value}\n" if section else f"{leaf}: {value}\n"
    (tmp_path / "run.yaml").write_text(text)
    result = CliRunner().invoke(app, ["run", "--config", "run.yaml", "--trace", DEMO])
    check(result, tmp_path, (key,), {"run.yaml"})


def test_the_matrix_is_the_size_of_the_issues():
    assert len(OPTION_CASES) + len(YAML_CASES) >= 205
