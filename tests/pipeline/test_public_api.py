"""The notebook API (`prefixsim.run`, `prefixsim.load_trace`): every way of giving a config
runs the same thing, and gives what `prefixsim run` writes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

import prefixsim
from prefixsim.cli import app
from prefixsim.errors import InputError

DEMO = str(Path(__file__).resolve().parents[2] / "traces" / "demo_chat.jsonl")
VOLATILE = {"wall_time_s", "command", "simulated_s_per_wall_s"}


def _figures(summary: dict) -> dict:
    return {k: v for k, v in summary.items() if k not in VOLATILE}


def test_keyword_sections_match_the_cli(tmp_path):
    result = prefixsim.run(trace={"path": DEMO}, cache_only=True,
                           cache={"policy": "s3fifo", "capacity_tokens": 20000, "ttl_s": 300})
    out = tmp_path / "cli"
    cli = CliRunner().invoke(app, ["run", "--trace", DEMO, "--cache-only", "--policy", "s3fifo",
                                   "--cache-tokens", "20000", "--ttl", "300", "-o", str(out),
                                   "--quiet"])
    assert cli.exit_code == 0, cli.output
    written = json.loads((out / "summary.json").read_text())
    assert _figures(result.summary) == _figures(written)
    assert len(result.requests) == written["num_requests"] == 264
    assert not result.timeseries.empty
    assert isinstance(result, prefixsim.Result) and result.config.cache.policy == "s3fifo"


def test_a_yaml_file_a_mapping_and_overrides_agree(tmp_path):
    base = {"trace": {"path": DEMO}, "cache_only": True, "cache": {"capacity_tokens": 5000}}
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(base))
    a = prefixsim.run(path, overrides={"cache.policy": "fifo"})
    b = prefixsim.run(base, cache={"policy": "fifo"})  # merged into the mapping's section
    c = prefixsim.run(prefixsim.load_config(path), overrides={"cache.policy": "fifo"})
    assert _figures(a.summary) == _figures(b.summary) == _figures(c.summary)
    assert a.summary["cache_capacity_tokens"] == 5000
    assert a.summary["cache_policy"] == "fifo"


def test_given_requests_are_replayed_as_they_are():
    requests = prefixsim.load_trace(DEMO)[:10]
    result = prefixsim.run(trace={"path": DEMO}, cache_only=True, requests=requests)
    assert result.summary["num_requests"] == 10
    assert list(result.requests["request_id"]) == [r.request_id for r in requests]


def test_bad_values_name_the_key():
    with pytest.raises(InputError, match="cache.capacity_tokens"):
        prefixsim.run(trace={"path": DEMO}, cache={"capacity_tokens": -1})
