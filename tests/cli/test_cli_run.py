"""`prefixsim run --cache-only` and `prefixsim trace inspect` on good input: where results
go, how the YAML config and flags combine, and that config.yaml reproduces the run.

Uses the bundled demo trace (traces/demo_chat.jsonl, 264 requests) and tiny hand-made traces.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml
from click.testing import CliRunner

from prefixsim.cli import app

REPO = Path(__file__).parents[2]
DEMO = REPO / "traces" / "demo_chat.jsonl"

# summary keys that depend on the wall clock or on the command line, not on the replay
VOLATILE = {"wall_time_s", "command"}


def run_ok(*args: str) -> str:
    result = CliRunner().invoke(app, ["run", *args])
    assert result.exit_code == 0, (result.output, result.exception)
    return result.stdout


def summary(folder: Path) -> dict:
    return json.loads((folder / "summary.json").read_text())


def tiny_trace(path: Path) -> Path:
    """P=512: r0 [1,2] (600 tokens), r1 [1,2] again at 1 s, r2 [1,3] at 2 s (1000 tokens).
    Unbounded: r1 hits 599 (L-1), r2 hits page 1 = 512. Query 600+600+1000 = 2200."""
    rows = [
        {"timestamp": 0, "input_length": 600, "output_length": 3, "hash_ids": [1, 2]},
        {"timestamp": 1000, "input_length": 600, "output_length": 3, "hash_ids": [1, 2]},
        {"timestamp": 2000, "input_length": 1000, "output_length": 3, "hash_ids": [1, 3]},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_known_answer_summary_and_requests(tmp_path):
    trace = tiny_trace(tmp_path / "tiny.jsonl")
    out = tmp_path / "out"
    run_ok("--trace", str(trace), "--cache-only", "-o", str(out), "--quiet")
    s = summary(out)
    assert (s["completed"], s["total_input_tokens"], s["cache_query_tokens"]) == (3, 2200, 2200)
    assert s["cache_hit_tokens"] == 599 + 512
    assert s["cache_token_hit_rate"] == (599 + 512) / 2200
    assert s["cache_request_hit_rate"] == 2 / 3
    assert (s["cache_evictions"], s["cache_expirations"]) == (0, 0)
    # pages held: 1 (512), 2 (88), 3 (488)
    assert s["cache_peak_tokens"] == 512 + 88 + 488
    assert s["prefixsim_version"] and s["wall_time_s"] >= 0
    rows = pd.read_parquet(out / "requests.parquet")
    assert list(rows["request_id"]) == [0, 1, 2]
    assert list(rows["arrival_s"]) == [0.0, 1.0, 2.0]
    assert list(rows["input_tokens"]) == [600, 600, 1000]
    assert list(rows["cached_tokens"]) == [0, 599, 512]


def test_output_dir_is_written_into_directly(tmp_path):
    out = tmp_path / "deep" / "er"
    stdout = run_ok("--trace", str(DEMO), "--cache-only", "-o", str(out))
    assert sorted(p.name for p in out.iterdir()) == ["config.yaml", "requests.parquet",
                                                     "summary.json", "timeseries.parquet"]
    assert f"results: {out}" in stdout and "cache_token_hit_rate" in stdout
    # both request hit rates (any hit; the mean share), as the report's table shows the second
    assert "cache_request_hit_rate:" in stdout and "cache_request_weighted_hit_rate:" in stdout
    first = summary(out)
    # an existing folder is written into again (files replaced), no staging folder left
    run_ok("--trace", str(DEMO), "--cache-only", "--cache-tokens", "20000", "-o", str(out),
           "--quiet")
    assert summary(out)["cache_capacity_tokens"] == 20000 != first["cache_capacity_tokens"]
    assert sorted(p.name for p in out.parent.iterdir()) == ["er"]


def test_default_results_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    run_ok("--trace", str(DEMO), "--cache-only", "--quiet")
    (folder,) = (tmp_path / "results").iterdir()
    assert re.fullmatch(r"\d{8}-\d{6}-demo_chat-lru-cache-only", folder.name), folder.name
    assert summary(folder)["completed"] == 264
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results"]


def test_config_file_with_flags_overriding(tmp_path):
    """The file sets capacity 1000 and TTL 60 s; --cache-tokens 20000 wins over the file,
    the TTL and the trace come from the file."""
    config = tmp_path / "run.yaml"
    config.write_text(yaml.safe_dump({
        "trace": {"path": str(DEMO)},
        "cache": {"capacity_tokens": 1000, "ttl_s": 60},
        "cache_only": True,
    }))
    out = tmp_path / "out"
    run_ok("--config", str(config), "--cache-tokens", "20000", "-o", str(out), "--quiet")
    effective = yaml.safe_load((out / "config.yaml").read_text())
    assert effective["cache"]["capacity_tokens"] == 20000
    assert effective["cache"]["ttl_s"] == 60
    assert effective["cache_only"] is True
    assert effective["trace"]["format"] == "mooncake" and effective["trace"]["block_size"] == 512
    s = summary(out)
    assert s["cache_capacity_tokens"] == 20000 and s["cache_ttl_s"] == 60
    assert s["cache_peak_tokens"] <= 20000


def test_written_config_reproduces_the_run(tmp_path):
    first = tmp_path / "first"
    run_ok("--trace", str(DEMO), "--cache-only", "--cache-tokens", "30000", "--ttl", "120",
           "--ttl-mode", "fixed", "--max-requests", "200", "-o", str(first), "--quiet")
    second = tmp_path / "second"
    run_ok("--config", str(first / "config.yaml"), "-o", str(second), "--quiet")
    a, b = summary(first), summary(second)
    assert {k: v for k, v in a.items() if k not in VOLATILE} == {
        k: v for k, v in b.items() if k not in VOLATILE}
    assert a["completed"] == 200 and a["cache_expirations"] > 0
    assert (first / "config.yaml").read_text() == (second / "config.yaml").read_text()
    pd.testing.assert_frame_equal(pd.read_parquet(first / "requests.parquet"),
                                  pd.read_parquet(second / "requests.parquet"))


def test_trace_inspect_json_has_requests(tmp_path):
    result = CliRunner().invoke(app, ["trace", "inspect", str(DEMO), "--json"])
    assert result.exit_code == 0, result.output
    stats = json.loads(result.stdout)
    assert stats["requests"] == 264
    tiny = tiny_trace(tmp_path / "tiny.jsonl")
    result = CliRunner().invoke(app, ["trace", "inspect", str(tiny), "--json"])
    stats = json.loads(result.stdout)
    assert stats["requests"] == 3
    assert stats["unbounded_token_hit_rate"] == (599 + 512) / 2200


def test_python_dash_m_prefixsim_runs(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "prefixsim", "run", "--trace", str(DEMO), "--cache-only",
         "--cache-tokens", "20000", "-o", "out", "--quiet"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    s = summary(tmp_path / "out")
    assert s["completed"] == 264
    assert s["command"] == f"prefixsim run --trace {DEMO} --cache-only --cache-tokens 20000 " \
        "-o out --quiet"


def test_a_lengths_only_trace_says_why_nothing_hits(tmp_path):
    """An Azure CSV has prompt lengths and no prefix ids: the run says so beside its zero
    hit rate, and names the synthetic prefix model when one is asked for."""
    path = tmp_path / "azure.csv"
    path.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n"
                    "2023-11-16 18:15:46.6805900,374,44\n2023-11-16 18:15:50.99,396,109\n")
    plain = run_ok("--trace", str(path), "--cache-only", "-o", str(tmp_path / "plain"))
    assert summary(tmp_path / "plain")["cache_token_hit_rate"] == 0.0
    assert "note: this trace holds prompt lengths only, no prefix ids" in plain
    assert "--prefix-model shared:TOKENS" in plain
    shared = run_ok("--trace", str(path), "--cache-only", "--prefix-model", "shared:64",
                    "-o", str(tmp_path / "shared"))
    assert summary(tmp_path / "shared")["cache_token_hit_rate"] > 0
    assert "note: the cache hits come from a synthetic prefix model, synthetic shared:64" \
        in shared
    demo = run_ok("--trace", str(DEMO), "--cache-only", "-o", str(tmp_path / "demo"))
    assert "prefix model" not in demo and "prefix ids" not in demo


def test_the_trace_as_an_argument_is_the_trace_flag(tmp_path):
    """`prefixsim run TRACE` (as a newcomer types it; it was refused as an extra argument)
    replays the same as `--trace TRACE`; both at once name the same file or are refused in
    one line, exit 2, nothing written."""
    trace = tiny_trace(tmp_path / "tiny.jsonl")
    run_ok(str(trace), "--cache-only", "-o", str(tmp_path / "arg"), "--quiet")
    run_ok("--trace", str(trace), "--cache-only", "-o", str(tmp_path / "flag"), "--quiet")
    run_ok(str(trace), "--trace", str(trace), "--cache-only", "-o", str(tmp_path / "both"),
           "--quiet")
    shown = [{k: v for k, v in summary(tmp_path / name).items() if k not in VOLATILE}
             for name in ("arg", "flag", "both")]
    assert shown[0] == shown[1] == shown[2] and shown[0]["completed"] == 3
    other = tiny_trace(tmp_path / "other.jsonl")
    result = CliRunner().invoke(app, ["run", str(trace), "--trace", str(other), "--cache-only",
                                      "-o", str(tmp_path / "two")])
    assert result.exit_code == 2 and not (tmp_path / "two").exists()
    assert result.output == (f"prefixsim: error: TRACE: two traces given, {trace} and --trace "
                             f"{other}; give one\n")


@pytest.mark.parametrize("command", ["run", "curve", "capacity"])
def test_a_folder_is_a_trace_argument_too(tmp_path, command):
    """TRACE may be a folder (RAGPulse, kv-cache-tester), as --trace may: it reaches the
    readers (here one that is not a trace) instead of click's 'is a directory'."""
    folder = tmp_path / "folder"
    folder.mkdir()
    args = {"run": ["--cache-only"], "curve": [], "capacity": ["--search", "rate"]}[command]
    result = CliRunner().invoke(app, [command, str(folder), *args,
                                      *(["-o", str(tmp_path / "out")] if command != "curve"
                                        else [])])
    assert result.exit_code == 2, result.output
    assert result.output == (f"prefixsim: error: {folder}: this folder is not one trace (a "
                             "RAGPulse or kv-cache-tester folder); give one of its files\n")


def test_curve_takes_the_trace_as_an_argument(tmp_path):
    trace = tiny_trace(tmp_path / "tiny.jsonl")
    runner = CliRunner()
    as_argument = runner.invoke(app, ["curve", str(trace), "--capacities", "512,2k", "--json"])
    as_flag = runner.invoke(app, ["curve", "--trace", str(trace), "--capacities", "512,2k",
                                  "--json"])
    assert as_argument.exit_code == as_flag.exit_code == 0, as_argument.output
    assert as_argument.stdout == as_flag.stdout and "token_hit_rate" in as_flag.stdout
    none = runner.invoke(app, ["curve", "--capacities", "512"])
    assert none.exit_code == 2
    assert none.output == ("prefixsim: error: TRACE: no trace given; prefixsim curve TRACE "
                           "(or --trace TRACE)\n")
