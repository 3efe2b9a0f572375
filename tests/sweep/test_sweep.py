"""Sweeps: grid expansion, derived ids and seeds, equality with single runs, resume, failures."""

import json
import os
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml
from click.testing import CliRunner
from fakes import LosingExecutor
from hypothesis import given, settings
from hypothesis import strategies as st

from prefixsim.cache import POLICIES
from prefixsim.cli import app
from prefixsim.errors import InputError
from prefixsim.pipeline.inputs import _cached_trace, shared_trace_data
from prefixsim.sweep import (
    EXECUTORS,
    ExecutorOptions,
    expand,
    load_spec,
    parse_spec,
    plan,
    run_sweep,
    runner,
    sweep_table,
)
from prefixsim.sweep.executors import RayExecutor

DEMO = str(Path(__file__).resolve().parents[2] / "traces" / "demo_chat.jsonl")
BASE = {"trace": {"path": DEMO}, "cache_only": True}
CAPACITIES = [5000, 20000, 80000]
# Figures that legitimately differ between a sweep point and a separate run.
VOLATILE = {"wall_time_s", "seed", "command", "prefixsim_version"}


def two_policies():
    """Two registered policies; with only one registered, vary the TTL instead (6 runs)."""
    names = POLICIES.names()
    if len(names) >= 2:
        return {"cache.policy": ["lru", next(n for n in names if n != "lru")]}
    return {"cache.policy": ["lru"], "cache.ttl_s": [None, 30]}


def write_spec(path, grid, runs=None, base=BASE):
    path.write_text(yaml.safe_dump({"base": base, "grid": grid, "runs": runs or []}))
    return str(path)


def invoke(*args):
    result = CliRunner().invoke(app, [str(a) for a in args])
    return result


def test_grid_expands_to_cartesian_product_in_order():
    """2 x 3 grid -> 6 points, last key fastest; an explicit run equal to a grid point is
    kept once; an explicit new point comes after the grid."""
    spec = parse_spec({"base": BASE, "grid": {"cache.ttl_s": [None, 30],
                                               "cache.capacity_tokens": [1, 2, 3]},
                       "runs": [{"cache.ttl_s": 30, "cache.capacity_tokens": 2},
                                {"cache.capacity_tokens": None}]})
    points = expand(spec)
    assert [p.params for p in points] == [
        {"cache.ttl_s": None, "cache.capacity_tokens": 1},
        {"cache.ttl_s": None, "cache.capacity_tokens": 2},
        {"cache.ttl_s": None, "cache.capacity_tokens": 3},
        {"cache.ttl_s": 30, "cache.capacity_tokens": 1},
        {"cache.ttl_s": 30, "cache.capacity_tokens": 2},
        {"cache.ttl_s": 30, "cache.capacity_tokens": 3},
        {"cache.capacity_tokens": None},
    ]
    assert points[4].config.cache.ttl_s == 30 and points[4].config.cache.capacity_tokens == 2
    assert len({p.run_id for p in points}) == 7


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(0, 10**6), min_size=1, max_size=5, unique=True), st.randoms())
def test_ids_depend_only_on_parameters(capacities, rnd):
    """Permuting the grid's values permutes the points but not their ids."""
    shuffled = list(capacities)
    rnd.shuffle(shuffled)
    a = expand(parse_spec({"base": BASE, "grid": {"cache.capacity_tokens": capacities}}))
    b = expand(parse_spec({"base": BASE, "grid": {"cache.capacity_tokens": shuffled}}))
    by_params = {json.dumps(p.params): p.run_id for p in a}
    assert by_params == {json.dumps(p.params): p.run_id for p in b}
    assert len(set(by_params.values())) == len(a)


def test_a_run_seed_is_refused_where_nothing_would_read_it():
    """docs/input-rules.md I8: `seed` changed nothing but the `seed` field. A run has no
    randomness of its own, so a spec that sets or sweeps `seed` is refused, naming the key
    and where the workload's randomness is (trace.seed)."""
    for spec in ({"base": {**BASE, "seed": 3}, "grid": {"cache.capacity_tokens": [7]}},
                 {"base": BASE, "grid": {"seed": [11, 12]}}):
        with pytest.raises(InputError, match="trace.seed") as error:
            expand(parse_spec(spec))
        assert error.value.field == "seed"
    point = expand(parse_spec({"base": BASE, "grid": {"trace.seed": [11]}}))[0]
    assert point.config.trace.seed == 11
    changed = expand(parse_spec({"base": {**BASE, "cache": {"ttl_s": 5}},
                                 "grid": {"cache.capacity_tokens": [7]}}))[0]
    assert changed.run_id != point.run_id  # a different base is a different run


def test_bad_point_fails_before_anything_runs(tmp_path):
    spec = parse_spec({"base": BASE, "grid": {"cache.policy": ["lru", "nope"]}})
    with pytest.raises(InputError) as info:
        run_sweep(spec, tmp_path / "out", ExecutorOptions(n_jobs=1))
    assert info.value.field == "cache.policy" and "nope" in str(info.value)
    assert not (tmp_path / "out").exists()
    for bad, field in [({"grid": {"cache.policy": []}}, "grid.cache.policy"),
                       ({"grid": {"x": [1]}, "extra": 1}, "extra"),
                       ({"base": BASE}, None)]:
        with pytest.raises(InputError) as info:
            parse_spec(bad)
        assert info.value.field == field


def test_sweep_rows_equal_single_runs_and_resume_recomputes_nothing(tmp_path):
    """Acceptance: 2 policies x 3 capacities -> 6 rows equal to separate `prefixsim run`s."""
    grid = {**two_policies(), "cache.capacity_tokens": CAPACITIES}
    spec = write_spec(tmp_path / "spec.yaml", grid)
    out = tmp_path / "sweep"
    result = invoke("sweep", spec, "-o", out, "-j", 2, "--quiet")
    assert result.exit_code == 0, result.output
    table = pd.read_parquet(out / "sweep.parquet")
    assert len(table) == 6 and (table["status"] == "ok").all()
    assert {"run_id", "error", "cache_policy", "cache_capacity_tokens",
            "cache_token_hit_rate", "cache_evictions"} <= set(table.columns)
    for row in table.itertuples():
        single = tmp_path / f"single-{row.Index}"
        args = ["run", "--trace", DEMO, "--cache-only", "--policy", row.cache_policy,
                "--cache-tokens", int(row.cache_capacity_tokens), "-o", single, "--quiet"]
        ttl = getattr(row, "cache_ttl_s", None)
        if ttl is not None and ttl == ttl:
            args += ["--ttl", ttl]
        assert invoke(*args).exit_code == 0
        expected = json.loads((single / "summary.json").read_text())
        stored = json.loads((out / "runs" / row.run_id / "summary.json").read_text())
        assert {k: v for k, v in stored.items() if k not in VOLATILE} == \
               {k: v for k, v in expected.items() if k not in VOLATILE}
        for key, value in expected.items():
            if key not in VOLATILE and key in table.columns and key != "cache_ttl_s":
                assert getattr(row, key) == value, key
        pd.testing.assert_frame_equal(pd.read_parquet(single / "requests.parquet"),
                                      pd.read_parquet(out / "runs" / row.run_id /
                                                      "requests.parquet"))
    first = out / "runs" / table.loc[0, "run_id"]
    again = tmp_path / "again"
    assert invoke("run", "--config", first / "config.yaml", "-o", again, "--quiet").exit_code == 0
    repeated = json.loads((again / "summary.json").read_text())
    assert {k: v for k, v in repeated.items() if k not in VOLATILE - {"seed"}} == \
           {k: v for k, v in json.loads((first / "summary.json").read_text()).items()
            if k not in VOLATILE - {"seed"}}  # config.yaml repeats the run, seed included
    stamps = {p: p.stat().st_mtime_ns for p in (out / "runs").glob("*/run.json")}
    resumed = invoke("sweep", spec, "-o", out, "--resume")
    assert resumed.exit_code == 0, resumed.output
    assert "0 ran, 0 failed, 6 already finished" in resumed.output
    assert stamps == {p: p.stat().st_mtime_ns for p in (out / "runs").glob("*/run.json")}


def test_resume_runs_only_missing_points_and_cleans_half_written(tmp_path):
    spec = parse_spec({"base": BASE, "grid": {"cache.capacity_tokens": CAPACITIES}})
    out = tmp_path / "sweep"
    first = run_sweep(spec, out, ExecutorOptions(n_jobs=1))
    assert len(first.executed) == 3
    victim = first.points[1].run_id
    for item in (out / "runs" / victim).iterdir():
        item.unlink()
    (out / "runs" / victim).rmdir()
    (out / "runs" / ".tmp-half-written").mkdir()  # what a kill mid-write leaves
    with pytest.raises(InputError, match="--resume"):
        run_sweep(spec, out, ExecutorOptions(n_jobs=1))
    again = run_sweep(spec, out, ExecutorOptions(n_jobs=1), resume=True)
    assert again.executed == [victim]
    assert sorted(again.skipped) == sorted(p.run_id for p in first.points if p.run_id != victim)
    assert not (out / "runs" / ".tmp-half-written").exists()
    assert len(pd.read_parquet(out / "sweep.parquet")) == 3


def test_a_resume_names_run_folders_of_no_point_and_leaves_them(tmp_path):
    """A folder under runs/ whose hash part matches no point (another config: a run made
    under defaults that changed since) is neither reused nor removed: the resume runs the
    point again, leaves the folder, keeps it out of the table and names it in a note."""
    spec = parse_spec({"base": BASE, "grid": {"cache.capacity_tokens": CAPACITIES}})
    out = tmp_path / "sweep"
    first = run_sweep(spec, out, ExecutorOptions(n_jobs=1))
    assert first.foreign == []
    victim = first.points[0].run_id
    stale = victim.rsplit("-", 1)[0] + "-00000000"
    (out / "runs" / victim).rename(out / "runs" / stale)
    again = run_sweep(spec, out, ExecutorOptions(n_jobs=1), resume=True)
    assert again.executed == [victim] and again.foreign == [stale]
    assert (out / "runs" / stale / "run.json").is_file()
    assert sorted(pd.read_parquet(out / "sweep.parquet")["run_id"]) == sorted(
        p.run_id for p in first.points)
    spec_file = tmp_path / "spec.yaml"
    spec_file.write_text(yaml.safe_dump({"base": BASE,
                                         "grid": {"cache.capacity_tokens": CAPACITIES}}))
    resumed = invoke("sweep", spec_file, "-o", out, "--resume")
    assert resumed.exit_code == 0, resumed.output
    assert (f"note: 1 run folder under runs/ is no run of this sweep (another config, or "
            f"defaults that changed since; left as it is, not in the table or report): "
            f"{stale}") in resumed.output


def test_failing_run_is_recorded_and_the_sweep_goes_on(tmp_path, monkeypatch):
    # a trace that does not read stops the sweep first (check_traces); one that breaks only
    # as its run reads it (changed after the check, say) fails that run alone
    monkeypatch.setattr(runner, "check_trace", lambda config, read: None)
    missing = str(tmp_path / "broken.jsonl")  # exists (a missing trace stops the sweep first)
    Path(missing).write_text(
        '{"timestamp": 0, "input_length": 600, "output_length": 1, "hash_ids": [1]}\n')
    spec = parse_spec({"base": BASE, "grid": {"trace.path": [DEMO, missing],
                                               "cache.capacity_tokens": [20000]}})
    out = tmp_path / "sweep"
    result = run_sweep(spec, out, ExecutorOptions(n_jobs=2))
    table = pd.read_parquet(out / "sweep.parquet").set_index("trace_path")
    assert table.loc[DEMO, "status"] == "ok" and pd.isna(table.loc[DEMO, "error"])
    assert table.loc[missing, "status"] == "failed"
    assert "hash_ids" in table.loc[missing, "error"]
    assert list(result.failed) == [table.loc[missing, "run_id"]]
    meta = json.loads((out / "runs" / table.loc[missing, "run_id"] / "run.json").read_text())
    assert meta["status"] == "failed" and "needs ceil(600/512)" in meta["error"]
    retry = run_sweep(spec, out, ExecutorOptions(n_jobs=1), resume=True)
    assert retry.executed == [table.loc[missing, "run_id"]]  # failed runs are retried


def _comparable(table):
    return table.drop(columns=["wall_time_s"]).reset_index(drop=True)


def test_results_do_not_depend_on_executor_or_workers(tmp_path):
    spec = parse_spec({"base": BASE, "grid": {"cache.ttl_s": [None, 20],
                                               "cache.capacity_tokens": CAPACITIES}})
    serial = run_sweep(spec, tmp_path / "serial", ExecutorOptions(n_jobs=1))
    parallel = run_sweep(spec, tmp_path / "parallel", ExecutorOptions(n_jobs=2))
    assert serial.executed != [] and sorted(serial.executed) == sorted(parallel.executed)
    pd.testing.assert_frame_equal(_comparable(pd.read_parquet(tmp_path / "serial/sweep.parquet")),
                                  _comparable(pd.read_parquet(tmp_path / "parallel/sweep.parquet")))


@pytest.mark.heavy  # Dask or Ray: .ci/run's second step
@pytest.mark.parametrize(("executor", "module", "reason"), [
    ("dask", "distributed", "dask distributed not installed (prefixsim[dask])"),
    ("ray", "ray", "ray not installed (pip install 'prefixsim[ray]')"),
])
def test_local_cluster_gives_the_same_table(tmp_path, executor, module, reason):
    pytest.importorskip(module, reason=reason)
    spec = parse_spec({"base": BASE, "grid": {"cache.capacity_tokens": CAPACITIES}})
    run_sweep(spec, tmp_path / "local", ExecutorOptions(n_jobs=1))
    result = run_sweep(spec, tmp_path / executor, ExecutorOptions(executor=executor, n_jobs=2))
    assert not result.failed and len(result.executed) == 3
    pd.testing.assert_frame_equal(
        _comparable(pd.read_parquet(tmp_path / "local/sweep.parquet")),
        _comparable(pd.read_parquet(tmp_path / executor / "sweep.parquet")))


@pytest.mark.heavy  # Dask or Ray: .ci/run's second step
def test_dask_executor_joins_a_running_cluster_by_address(tmp_path):
    distributed = pytest.importorskip("distributed", reason="dask distributed not installed")
    spec = parse_spec({"base": BASE, "grid": {"cache.capacity_tokens": CAPACITIES}})
    with distributed.LocalCluster(n_workers=1, processes=False, dashboard_address=None) as cluster:
        result = run_sweep(spec, tmp_path / "dask",
                           ExecutorOptions(executor="dask", address=cluster.scheduler_address))
        assert cluster.status.name == "running"  # a cluster we joined is left running
    assert not result.failed and len(result.executed) == 3


def test_trace_is_loaded_once_per_process_and_reloaded_when_edited(tmp_path):
    trace = tmp_path / "t.jsonl"
    trace.write_text(open(DEMO).read())
    config = plan(parse_spec({"base": {"trace": {"path": str(trace), "format": "mooncake",
                                                  "block_size": 512}, "cache_only": True},
                              "grid": {"cache.capacity_tokens": [1]}}))[0].config
    first = shared_trace_data(config.trace)
    assert shared_trace_data(config.trace) is first
    lines = trace.read_text().splitlines()[:10]
    trace.write_text("\n".join(lines) + "\n")
    os.utime(trace, ns=(1, 1))
    assert len(shared_trace_data(config.trace).requests) == 10
    assert _cached_trace.cache_info().hits >= 1


def test_cli_errors_are_one_line_exit_2(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("base: {}\ngrid: {cache.capacity_tokens: [1]}\nsweep: 1\n")
    result = invoke("sweep", bad, "-o", tmp_path / "o")
    assert result.exit_code == 2 and "sweep: unknown key" in result.output
    spec = write_spec(tmp_path / "s.yaml", {"cache.capacity_tokens": [1]})
    result = invoke("sweep", spec, "-o", tmp_path / "o", "--address", "tcp://x:1")
    assert result.exit_code == 2 and "--address" in result.output
    assert not (tmp_path / "o").exists()


def test_sweep_table_columns_for_mixed_points(tmp_path):
    """Keys set only by explicit runs still get a column (missing elsewhere)."""
    spec = parse_spec({"base": BASE, "grid": {"cache.capacity_tokens": [20000]},
                       "runs": [{"cache.ttl_s": 30}]})
    run_sweep(spec, tmp_path / "s", ExecutorOptions(n_jobs=1))
    table = sweep_table(tmp_path / "s", plan(spec), ["cache.capacity_tokens", "cache.ttl_s"])
    assert list(table.columns[:5]) == ["run_id", "status", "error", "cache_capacity_tokens",
                                       "cache_ttl_s"]
    assert pd.isna(table.loc[0, "cache_ttl_s"]) and table.loc[1, "cache_ttl_s"] == 30


def test_interrupted_sweep_keeps_finished_runs_and_resumes(tmp_path):
    """Ctrl-C after two runs: both are stored, the table lists them, --resume does the rest."""
    spec = parse_spec({"base": BASE, "grid": {"cache.capacity_tokens": [1000, 2000, 4000, 8000]}})
    out = tmp_path / "sweep"
    seen = []

    def interrupt_after_two(outcome):
        seen.append(outcome.run_id)
        if len(seen) == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_sweep(spec, out, ExecutorOptions(n_jobs=1), on_outcome=interrupt_after_two)
    assert sorted(pd.read_parquet(out / "sweep.parquet")["run_id"]) == sorted(seen)
    resumed = run_sweep(spec, out, ExecutorOptions(n_jobs=1), resume=True)
    assert sorted(resumed.skipped) == sorted(seen) and len(resumed.executed) == 2
    assert len(pd.read_parquet(out / "sweep.parquet")) == 4


@pytest.mark.parametrize("crash", [False, True])
def test_lost_workers_become_failed_runs(tmp_path, monkeypatch, crash):
    monkeypatch.setattr(LosingExecutor, "crash", crash)
    monkeypatch.setitem(EXECUTORS._factories, "losing", LosingExecutor)
    spec = parse_spec({"base": BASE, "grid": {"cache.capacity_tokens": [1000, 2000, 4000]}})
    result = run_sweep(spec, tmp_path / "s", ExecutorOptions(executor="losing"))
    table = pd.read_parquet(tmp_path / "s" / "sweep.parquet")
    expected = ["ok", "failed", "failed"] if crash else ["ok", "failed", "ok"]
    assert table["status"].tolist() == expected
    assert "worker lost" in table.loc[1, "error"]
    assert ("pool broke" if crash else "worker died") in table.loc[1, "error"]
    assert len(result.failed) == expected.count("failed")


class _Ref:
    """An object reference: hashable by identity, like Ray's."""

    def __init__(self, args, fn):
        self.args, self.fn = args, fn


class _FakeRay:
    """The slice of Ray's API the executor uses, run in this process (completes in reverse)."""

    def __init__(self):
        self.initialised, self.init_args, self.shutdowns = False, None, 0

    def is_initialized(self):
        return self.initialised

    def init(self, **kwargs):
        self.initialised, self.init_args = True, kwargs

    def shutdown(self):
        self.initialised, self.shutdowns = False, self.shutdowns + 1

    def remote(self, **_options):
        def wrap(fn):
            class Remote:
                @staticmethod
                def remote(*args):
                    return _Ref(args, fn)
            return Remote
        return wrap

    def wait(self, refs, num_returns):
        return [refs[-1]], refs[:-1]

    def get(self, ref):
        return ref.fn(*ref.args)


def test_ray_executor_against_a_stand_in(tmp_path, monkeypatch):
    """The Ray path's bookkeeping (indices, local start and shutdown) without Ray itself."""
    fake = _FakeRay()
    monkeypatch.setitem(sys.modules, "ray", fake)
    executor = RayExecutor(n_jobs=2)
    results = list(executor.map_unordered(lambda x: x * 10, [1, 2, 3]))
    assert results == [(2, 30), (1, 20), (0, 10)]
    assert list(executor.map_unordered(lambda x: x, [4])) == [(0, 4)]  # the same session
    assert fake.init_args["num_cpus"] == 2 and fake.shutdowns == 0
    assert fake.init_args["address"] == "local"  # a new local cluster even if one runs here
    executor.close()
    executor.close()
    assert fake.shutdowns == 1
    spec = parse_spec({"base": BASE, "grid": {"cache.capacity_tokens": CAPACITIES}})
    run_sweep(spec, tmp_path / "local", ExecutorOptions(n_jobs=1))
    result = run_sweep(spec, tmp_path / "ray", ExecutorOptions(executor="ray", n_jobs=2))
    assert not result.failed, result.failed
    pd.testing.assert_frame_equal(_comparable(pd.read_parquet(tmp_path / "local/sweep.parquet")),
                                  _comparable(pd.read_parquet(tmp_path / "ray/sweep.parquet")))


def test_table_is_refreshed_while_runs_finish(tmp_path, monkeypatch):
    monkeypatch.setattr(runner, "TABLE_REFRESH_S", 0.0)
    spec = parse_spec({"base": BASE, "grid": {"cache.capacity_tokens": CAPACITIES}})
    rows_seen = []

    def look(_outcome):
        path = tmp_path / "s" / "sweep.parquet"
        rows_seen.append(len(pd.read_parquet(path)) if path.exists() else 0)

    run_sweep(spec, tmp_path / "s", ExecutorOptions(n_jobs=1), on_outcome=look)
    assert rows_seen == [0, 1, 2]  # each outcome is seen before the refresh that adds it


def test_dry_run_lists_the_plan_and_writes_nothing(tmp_path):
    spec = write_spec(tmp_path / "s.yaml", {"cache.capacity_tokens": CAPACITIES})
    result = invoke("sweep", spec, "-o", tmp_path / "out", "--dry-run")
    assert result.exit_code == 0, result.output
    ids = [p.run_id for p in plan(parse_spec(yaml.safe_load(open(spec))))]
    assert [line.split()[0] for line in result.output.splitlines()[:-1]] == ids
    assert result.output.splitlines()[-1] == "3 runs" and not (tmp_path / "out").exists()


def test_relative_trace_path_resolves_against_the_spec_folder(tmp_path, monkeypatch):
    """A spec beside its trace runs from any working directory: the bundled demo spec's
    `../demo_chat.jsonl` and a copied spec in its own folder both find their trace."""
    bundled = load_spec(Path(DEMO).parent / "sweeps" / "timed_demo.yaml")
    assert all(p.config.trace.path == Path(DEMO) for p in expand(bundled))
    folder = tmp_path / "specs"
    folder.mkdir()
    (folder / "trace.jsonl").write_text(Path(DEMO).read_text().splitlines()[0] + "\n")
    spec = write_spec(folder / "spec.yaml", {"cache.capacity_tokens": [100]},
                      base={"trace": {"path": "trace.jsonl"}, "cache_only": True})
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    result = invoke("sweep", spec, "-o", tmp_path / "out", "--quiet")
    assert result.exit_code == 0, result.output
    table = pd.read_parquet(tmp_path / "out" / "sweep.parquet")
    assert list(table["status"]) == ["ok"] and list(table["completed"]) == [1]
