"""Known answers at the edges of output folders and seeds: stale results in a reused -o
folder (docs/input-rules.md I11), private permissions (I12), non-finite capacities (I1),
negative seeds and a seed nothing reads (I8), a sweep with failed runs (I14), and the
workload seed that keeps request classes equal across a sweep's runs."""

from __future__ import annotations

import os
import stat

import pytest
from cli_helpers import invoke

import prefixsim.sweep.runner
from prefixsim.config import load_config
from prefixsim.errors import InputError
from prefixsim.pipeline import simulate
from prefixsim.sweep.spec import make_point

DEMO = "traces/demo_chat.jsonl"


def test_a_reused_output_folder_keeps_no_stale_results(tmp_path):
    """Run 1 writes a timeseries; run 2 into the same folder records none (interval null),
    so the old timeseries.parquet must go; files that are not results stay."""
    out = tmp_path / "r"
    assert invoke("run", "--trace", DEMO, "--cache-only", "-o", str(out), "--quiet"
                  ).exit_code == 0
    assert (out / "timeseries.parquet").exists()
    (out / "notes.txt").write_text("mine")
    config = tmp_path / "c.yaml"
    config.write_text("engine: {sample_interval_s: null}\n")
    result = invoke("run", "--config", str(config), "--trace", DEMO, "--cache-only", "-o",
                    str(out), "--quiet")
    assert result.exit_code == 0, result.output
    assert not (out / "timeseries.parquet").exists()
    assert (out / "summary.json").exists() and (out / "notes.txt").read_text() == "mine"


def test_results_get_ordinary_permissions(tmp_path):
    umask = os.umask(0o022)
    try:
        out = tmp_path / "r"
        assert invoke("run", "--trace", DEMO, "--cache-only", "-o", str(out), "--quiet"
                      ).exit_code == 0
        trace = tmp_path / "g.jsonl"
        assert invoke("trace", "generate", "--preset", "chat", "--requests", "20", "-o",
                      str(trace)).exit_code == 0
    finally:
        os.umask(umask)
    assert stat.S_IMODE(out.stat().st_mode) == 0o755
    assert stat.S_IMODE(trace.stat().st_mode) == 0o644


@pytest.mark.parametrize("capacities", ["nan", "inf", "1e3:inf:3"])
def test_non_finite_capacities_are_one_line_errors(capacities):
    result = invoke("curve", "--trace", DEMO, "--capacities", capacities)
    assert result.exit_code == 2
    assert "--capacities" in result.output and "Traceback" not in result.output


def test_curve_output_into_a_new_folder(tmp_path):
    out = tmp_path / "new" / "curve.csv"
    result = invoke("curve", "--trace", DEMO, "--capacities", "1000,2000", "-o", str(out))
    assert result.exit_code == 0, result.output
    assert out.read_text().count("\n") >= 3


@pytest.mark.parametrize("args", [["run", "--trace", DEMO, "--cache-only", "--trace-seed",
                                   "-1"],
                                  ["trace", "generate", "--preset", "chat", "--requests",
                                   "5", "--seed", "-1", "-o", "x.jsonl"]])
def test_negative_seeds_are_refused(args):
    result = invoke(*args)
    assert result.exit_code == 2 and "Traceback" not in result.output


def test_run_has_no_seed_that_nothing_reads():
    """docs/input-rules.md I8: `run --seed` changed only the `seed` field of the summary. It
    is gone (click refuses the flag, exit 2), a config's `seed:` is refused naming the key,
    and the summary has no `seed`."""
    assert invoke("run", "--trace", DEMO, "--cache-only", "--seed", "3").exit_code == 2
    with pytest.raises(InputError, match="trace.seed") as error:
        make_point({"trace": {"path": DEMO}, "seed": 3}, {"cache.policy": "lru"})
    assert error.value.field == "seed"
    summary = simulate(load_config(overrides={"trace.path": DEMO, "cache_only": True})).summary
    assert "seed" not in summary


def test_request_classes_follow_the_workload_seed():
    """The share of sessions in a class is drawn with `trace.seed`: another workload seed
    puts other sessions in the 5 s class, so the hit rate changes."""
    base = {"trace.path": DEMO, "cache_only": True, "cache.ttl_s": 600}
    classes = [{"name": "short", "ttl_s": 5, "share": 0.5}]

    def hit_rate(trace_seed: int) -> float:
        config = load_config(overrides={**base, "trace.seed": trace_seed,
                                        "cache.classes": classes})
        return simulate(config).summary["cache_token_hit_rate"]

    assert hit_rate(0) == hit_rate(0)
    assert hit_rate(0) != hit_rate(3)


def test_a_sweep_with_failed_runs_exits_1_after_finishing_the_rest(tmp_path, monkeypatch):
    # a broken trace stops a sweep before any run (check_traces); skipping that read stands
    # for a trace that breaks only as its run reads it, to test a failed run among others
    monkeypatch.setattr(prefixsim.sweep.runner, "check_trace", lambda config, read: None)
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        f"base: {{trace: {{path: {DEMO}}}, cache_only: true}}\n"
        "grid: {trace.path: [" + os.path.abspath(DEMO) + ", broken.jsonl]}\n")
    (tmp_path / "broken.jsonl").write_text(
        '{"timestamp": 0, "input_length": 600, "output_length": 1, "hash_ids": [1]}\n')
    out = tmp_path / "sweep"
    result = invoke("sweep", str(spec), "-o", str(out), "--quiet", "-j", "1")
    assert result.exit_code == 1
    assert (out / "sweep.parquet").exists()
