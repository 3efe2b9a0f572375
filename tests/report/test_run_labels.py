"""Run labels and panels of a cluster sweep (report/data.py `applies`, `show_swept`;
figures.py `run_panels`), worked by hand on the cluster demo's six runs: 4 colocated
replicas, 2P2D and 1P1D, each with and without an unbounded shared pool."""

import math

import pandas as pd
import pytest

from prefixsim.report.data import applies, show_swept, swept_text
from prefixsim.report.figures import run_panels

SWEPT = ["engine_replicas", "cache_pool", "engine_prefill_replicas", "engine_decode_replicas"]
POOL = '{"capacity_tokens": null}'
NAN = math.nan
CLUSTER = pd.DataFrame({
    "run_id": ["c4", "c4p", "s22", "s22p", "s11", "s11p"],
    "engine_replicas": [4, 4, 1, 1, 1, 1],
    "cache_pool": [NAN, POOL, NAN, POOL, NAN, POOL],
    "engine_prefill_replicas": [NAN, NAN, 2.0, 2.0, 1.0, 1.0],
    "engine_decode_replicas": [NAN, NAN, 2.0, 2.0, 1.0, 1.0],
})


def row(run_id):
    return CLUSTER.set_index("run_id").loc[run_id]


@pytest.mark.parametrize(("run_id", "label"), [
    ("c4", "replicas=4, pool=none"),
    ("c4p", "replicas=4, pool=unbounded"),
    ("s22", "pool=none, prefill_replicas=2, decode_replicas=2"),
    ("s11p", "pool=unbounded, prefill_replicas=1, decode_replicas=1"),
])
def test_labels_name_what_each_topology_runs(run_id, label):
    """A split run's `replicas` (1, unused) and a colocated run's unset prefill and decode
    counts are left out (they read `replicas=1, ... prefill_replicas=2` and
    `prefill_replicas=none`)."""
    assert swept_text(row(run_id), SWEPT) == label


def test_applies_by_hand():
    assert not applies("engine_replicas", row("s22"))
    assert applies("engine_replicas", row("c4"))
    assert not applies("engine_prefill_replicas", row("c4"))
    assert applies("engine_decode_replicas", row("s11"))
    assert applies("cache_pool", row("c4"))  # none is a value of the pool: no pool
    cache_only = pd.Series({"cache_only": True, "engine_replicas": 2, "router_name": "x"})
    assert not applies("engine_replicas", cache_only)
    assert not applies("router_name", cache_only)
    assert applies("router_name", pd.Series({"cache_only": False, "router_name": "x"}))
    assert applies("router_name", pd.Series({"cache_only": None, "router_name": "x"}))


def test_panels_group_by_a_column_every_run_has():
    """`replicas` has the fewest values (4 and 1) but means nothing to the split runs:
    the panels are by pool, each with its three topologies (they were `replicas=1`,
    holding 2P2D and 1P1D)."""
    panels = run_panels(CLUSTER, SWEPT, list(CLUSTER["run_id"]))
    assert [(p.title, p.runs) for p in panels] == [
        ("pool=none", ["c4", "s22", "s11"]),
        ("pool=unbounded", ["c4p", "s22p", "s11p"])]


def test_a_mapping_shows_an_unbounded_capacity():
    """A pool of a capacity only reads as that capacity; a fuller mapping keeps its keys."""
    assert show_swept("cache_pool", POOL) == "unbounded"
    assert show_swept("cache_pool", '{"capacity_tokens": 20000}') == "20k"
    assert show_swept("cache_pool", '{"capacity_tokens": null, "link": "rdma"}') == \
        "{capacity_tokens: unbounded, link: rdma}"
    assert show_swept("cache_pool", '{"capacity_tokens": 5000, "link": null}') == \
        "{capacity_tokens: 5000, link: null}"
    assert show_swept("cache_pool", NAN) == "none"
