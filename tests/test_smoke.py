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
