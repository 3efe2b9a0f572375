"""Hostile and damaged sweep folders (docs/input-rules.md I7, I14): a grid too large is
refused before it is expanded, `--resume` with another spec is refused without `--force`, a
finished run that lost its summary is run again, and `report` counts the runs that are
missing or damaged and draws the rest.

Each sweep here is 2-3 cache-only runs of the demo trace (a second or two each).
"""

import json
import time
from pathlib import Path

import pandas as pd
import yaml
from cli_helpers import DEMO, invoke, one_line_error

from prefixsim.sweep.spec import MAX_POINTS, parse_spec, plan_size

BASE = {"trace": {"path": str(DEMO)}, "cache_only": True}


def write_spec(path: Path, grid: dict, base: dict = BASE) -> Path:
    path.write_text(yaml.safe_dump({"name": "h", "base": base, "grid": grid}))
    return path


def sweep(spec: Path, out: Path, *extra: str):
    return invoke("sweep", spec, "-o", out, "-j", 1, "--quiet", *extra)


def test_a_million_point_grid_is_refused_before_expansion_even_in_a_dry_run(tmp_path):
    """Six keys of ten values: 10^6 points. Counting them is a product of list lengths, so
    the refusal takes no time (it once printed nothing for 120 s)."""
    grid = {f"cache.{key}": list(range(1, 11)) for key in
            ("capacity_tokens", "min_cacheable_tokens", "ttl_s")}
    grid.update({f"engine.{key}": list(range(1, 11)) for key in
                 ("replicas", "max_batched_tokens", "max_num_seqs")})
    spec = write_spec(tmp_path / "big.yaml", grid)
    assert plan_size(parse_spec(yaml.safe_load(spec.read_text()))) == 10**6
    started = time.monotonic()
    result = invoke("sweep", spec, "--dry-run")
    one_line_error(result, "big.yaml", "grid", "1,000,000 runs", f"{MAX_POINTS:,}")
    assert time.monotonic() - started < 5


def test_a_grid_value_past_64_bits_is_refused_before_any_run(tmp_path):
    """10**30 tokens once ran both points and then failed writing sweep.parquet."""
    spec = write_spec(tmp_path / "s.yaml", {"cache.capacity_tokens": [10**30, 5000]})
    one_line_error(sweep(spec, tmp_path / "out"), "cache.capacity_tokens", "64 bits")
    assert not (tmp_path / "out").exists()


def test_resume_with_another_spec_is_refused_unless_forced(tmp_path):
    out = tmp_path / "out"
    first = write_spec(tmp_path / "a.yaml", {"cache.capacity_tokens": [4000, 8000]})
    assert sweep(first, out).exit_code == 0
    other = write_spec(tmp_path / "b.yaml", {"cache.capacity_tokens": [2000]})
    one_line_error(sweep(other, out, "--resume"), str(out), "another spec", "2 of its 2",
                   "--force")
    assert len(pd.read_parquet(out / "sweep.parquet")) == 2  # untouched
    assert sweep(other, out, "--resume", "--force").exit_code == 0
    assert list(pd.read_parquet(out / "sweep.parquet")["cache_capacity_tokens"]) == [2000]


def test_resume_reruns_a_finished_run_that_lost_its_summary(tmp_path):
    out = tmp_path / "out"
    spec = write_spec(tmp_path / "a.yaml", {"cache.capacity_tokens": [4000, 8000]})
    assert sweep(spec, out).exit_code == 0
    lost = sorted((out / "runs").iterdir())[0]
    before = json.loads((lost / "summary.json").read_text())
    (lost / "summary.json").unlink()
    result = invoke("sweep", spec, "-o", out, "-j", 1, "--resume")
    assert result.exit_code == 0, result.output
    assert "1 ran, 0 failed, 1 already finished" in result.output
    again = json.loads((lost / "summary.json").read_text())
    assert again.pop("wall_time_s") > 0 and before.pop("wall_time_s") > 0
    assert again == before
    assert set(pd.read_parquet(out / "sweep.parquet")["status"]) == {"ok"}


def _finished_sweep(tmp_path: Path, capacities: list[int]) -> Path:
    out = tmp_path / "out"
    spec = write_spec(tmp_path / "a.yaml", {"cache.capacity_tokens": capacities})
    assert sweep(spec, out).exit_code == 0
    return out


def test_report_on_a_truncated_sweep_table_and_requests_file(tmp_path):
    """Both files cut to half: the table is rebuilt from the run folders, the run whose
    requests.parquet is cut is counted as damaged, and the report is still written."""
    out = _finished_sweep(tmp_path, [4000, 8000])
    table = out / "sweep.parquet"
    table.write_bytes(table.read_bytes()[: table.stat().st_size // 2])
    requests = sorted((out / "runs").glob("*/requests.parquet"))[0]
    requests.write_bytes(requests.read_bytes()[: requests.stat().st_size // 2])
    result = invoke("report", out)
    assert result.exit_code == 0, result.output
    assert "Traceback" not in result.output
    assert "0 of 2 runs missing, 1 damaged" in result.stderr
    assert (out / "report.html").is_file()


def test_report_on_a_sweep_killed_before_its_table_says_how_many_runs_are_missing(tmp_path):
    """Three planned runs, one folder deleted and no sweep.parquet (killed early)."""
    out = _finished_sweep(tmp_path, [2000, 4000, 8000])
    (out / "sweep.parquet").unlink()
    victim = sorted((out / "runs").iterdir())[0]
    for path in victim.iterdir():
        path.unlink()
    victim.rmdir()
    result = invoke("report", out, "--quiet")
    assert result.exit_code == 0, result.output
    assert result.stderr.strip() == ("prefixsim: warning: 1 of 3 runs missing, 0 damaged; "
                                     "the report draws the rest")


def test_report_shows_a_damaged_spec_and_counts_a_damaged_run_config(tmp_path):
    """Found by bench/fuzz.py: a byte of spec.yaml that is not UTF-8 was a traceback."""
    out = _finished_sweep(tmp_path, [4000, 8000])
    spec = out / "spec.yaml"
    spec.write_bytes(spec.read_bytes().replace(b"name", b"n\x85me", 1))
    config = sorted((out / "runs").glob("*/config.yaml"))[0]
    config.write_text("cache: [unclosed\n")
    result = invoke("report", out, "--quiet")
    assert result.exit_code == 0, result.output
    assert "Traceback" not in result.output
    assert (out / "report.html").is_file()
