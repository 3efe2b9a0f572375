"""Run ids are stable across checkouts (docs/architecture.md: sweep): the bundled demo
sweeps' ids are pinned. Their hash parts are as an earlier release derived them, so a
config key added since (sweep/spec.py LATER_KEYS) must leave them as they were while at
its default; their readable parts name the swept values (`lru-unbounded-ttl10`), and a
sweep folder whose runs an older release named (`none-10-239960da`) resumes: its finished
runs are found by their hash part and renamed."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from prefixsim.sweep import ExecutorOptions, expand, load_spec, run_sweep
from prefixsim.sweep.spec import id_hash, make_point, slug

SWEEPS = Path(__file__).resolve().parents[2] / "traces" / "sweeps"
PINNED = {
    "demo": [
        "lru-5k-ffb16846", "lru-10k-edb5cf55", "lru-20k-65890e67",
        "lru-40k-f69ede0e", "lru-80k-71fe700c", "s3fifo-5k-af1344cb",
        "s3fifo-10k-2438fd73", "s3fifo-20k-46952147", "s3fifo-40k-be36216b",
        "s3fifo-80k-3b538cc7", "lru-unbounded-7429ce14", "lru-unbounded-ttl10-239960da",
        "lru-unbounded-ttl30-5c9ab19c", "lru-unbounded-ttl120-5772de21",
    ],
    # the timed demos' ids changed when the scheduler limits became the serving engine's
    # on the GPU (an H100 runs 1024 requests where they ran 256: sweep/spec.py FIXED_LIMITS)
    "timed_demo": [
        "round-robin-10k-6e2855db", "round-robin-40k-fceb8de3",
        "round-robin-160k-eb9313ec", "prefix-aware-10k-e6923554",
        "prefix-aware-40k-6a1ba6bc", "prefix-aware-160k-bb451b97",
    ],
    "cluster_demo": [
        "replicas4-5424c16d", "replicas4-pool-ed575f67",
        "replicas1-prefill-replicas2-decode-replicas2-1381bcee",
        "replicas1-pool-prefill-replicas2-decode-replicas2-669d60d8",
        "replicas1-prefill-replicas1-decode-replicas1-fdc50d12",
        "replicas1-pool-prefill-replicas1-decode-replicas1-00dac997",
    ],
}


@pytest.mark.parametrize("name", PINNED)
def test_the_demo_sweeps_keep_their_run_ids(name):
    assert [p.run_id for p in expand(load_spec(SWEEPS / f"{name}.yaml"))] == PINNED[name]


def test_a_later_key_changes_the_id_only_when_set():
    plain = make_point({"cache_only": True}, {"cache.capacity_tokens": 5000})
    assert plain.run_id == "5k-0ac1cdf1"  # as derived before `load` and `model.config_path`
    loaded = make_point({"cache_only": True, "load": {"rate_scale": 2.0}},
                        {"cache.capacity_tokens": 5000})
    assert loaded.run_id.startswith("5k-") and loaded.run_id != plain.run_id


@pytest.mark.parametrize(("values", "expected"), [
    ({"cache.policy": "lru", "cache.capacity_tokens": None, "cache.ttl_s": 10},
     "lru-unbounded-ttl10"),
    ({"cache.policy": "s3fifo", "cache.capacity_tokens": 2_500_000, "cache.ttl_s": None},
     "s3fifo-2.5M"),
    ({"cache_only": False, "router.name": "prefix_aware", "engine.replicas": 2},
     "timed-prefix-aware-replicas2"),
    ({"cache.bounds": True, "cache.host_capacity_tokens": 20000, "cache.pool": {}},
     "bounds-host-capacity20k-pool"),
    ({"cache.ttl_s": None}, "run"),
])
def test_the_readable_part_names_the_swept_values(values, expected):
    assert slug(values) == expected


def test_a_point_names_every_swept_key_with_its_validated_value():
    """A point that leaves the policy at its default still says `lru` when the sweep swept
    the policy; the hash part is the same whatever the readable part names."""
    point = make_point({"cache_only": True}, {"cache.ttl_s": 10}, named=[
        "cache.policy", "cache.capacity_tokens", "cache.ttl_s"])
    bare = make_point({"cache_only": True}, {"cache.ttl_s": 10})
    assert point.run_id.startswith("lru-unbounded-ttl10-") and bare.run_id.startswith("ttl10-")
    assert id_hash(point.run_id) == id_hash(bare.run_id)


def test_an_old_sweep_folder_resumes_under_the_new_ids(tmp_path):
    """The demo's first run and its TTL-10 run finished under an older release's names
    (`lru-5000-ffb16846`, `none-10-239960da`): a resume renames their folders to the new
    ids and runs only the other 12."""
    spec = load_spec(SWEEPS / "demo.yaml")
    points = expand(spec)
    first = run_sweep(spec, tmp_path, ExecutorOptions(n_jobs=1))
    assert not first.failed
    for old, new in (("lru-5000-ffb16846", "lru-5k-ffb16846"),
                     ("none-10-239960da", "lru-unbounded-ttl10-239960da")):
        (tmp_path / "runs" / new).rename(tmp_path / "runs" / old)
    for point in points:  # every other run unfinished
        if point.run_id not in ("lru-5k-ffb16846", "lru-unbounded-ttl10-239960da"):
            shutil.rmtree(tmp_path / "runs" / point.run_id)
    again = run_sweep(spec, tmp_path, ExecutorOptions(n_jobs=1), resume=True)
    assert sorted(again.skipped) == ["lru-5k-ffb16846", "lru-unbounded-ttl10-239960da"]
    assert len(again.executed) == 12 and not again.failed
    renamed = json.loads((tmp_path / "runs" / "lru-unbounded-ttl10-239960da" / "run.json")
                         .read_text())
    assert renamed["run_id"] == "lru-unbounded-ttl10-239960da"
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == sorted(
        p.run_id for p in points)


def test_values_with_units_are_kept_as_their_numbers(tmp_path):
    """`cache.capacity_tokens: 200k` in a grid: the point's params (the sweep table's
    column, the report's axis) hold 200000, as the config does (the table held the text
    '200k', and the report failed drawing it as a number); the run id is as before, a trace
    path stays as written."""
    trace = str(SWEEPS.parent / "demo_chat.jsonl")
    given = {"cache.capacity_tokens": "200k", "cache.ttl_s": "5m", "trace.path": "t.jsonl"}
    point = make_point({"trace": {"path": trace}, "cache_only": True}, given)
    assert point.params == {"cache.capacity_tokens": 200_000, "cache.ttl_s": 300.0,
                            "trace.path": "t.jsonl"}
    as_numbers = make_point({"trace": {"path": trace}, "cache_only": True},
                            {"cache.capacity_tokens": 200_000, "cache.ttl_s": 300,
                             "trace.path": "t.jsonl"})
    assert point.run_id == as_numbers.run_id
