"""The README's main command works end to end on the bundled demo trace."""

import json

from click.testing import CliRunner

from prefixsim.cli import app


def test_demo_replay_writes_results(tmp_path):
    out = tmp_path / "demo"
    result = CliRunner().invoke(
        app,
        ["run", "--trace", "traces/demo_chat.jsonl", "--cache-only", "--cache-tokens", "20000",
         "--ttl", "300", "-o", str(out), "--quiet"],
    )
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["completed"] == 264
    assert 0 < summary["cache_token_hit_rate"] < 1
    assert (out / "requests.parquet").exists() and (out / "config.yaml").exists()


def test_readme_main_command_timed(tmp_path):
    """The README's main command: a timed replay of the demo trace on 2 replicas."""
    out = tmp_path / "demo"
    result = CliRunner().invoke(
        app,
        ["run", "--trace", "traces/demo_chat.jsonl", "--model", "llama-3.1-8b", "--gpu",
         "h100-sxm", "--replicas", "2", "--router", "prefix_aware", "-o", str(out)],
    )
    assert result.exit_code == 0, result.output
    assert "mean_ttft_ms" in result.output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["mode"] == "timed" and summary["completed"] == 264
    assert summary["mean_ttft_ms"] > 0 and 0 < summary["cache_token_hit_rate"] < 1
    assert (out / "timeseries.parquet").exists()
