"""Namespaces (docs/cache-semantics.md R2, edge case 10): the same ids in two namespaces never hit.

The trace (Mooncake JSONL, 4-token pages, 10 s apart, 1 output token each):
  r0 ns "a" pages 1,2 (L=8) | r1 ns "b" pages 1,2 | r2 ns "a" pages 1,2 | r3 no ns, pages 1,2
read_trace renumbers (namespace, id) pairs in arrival order: r0 and r2 get (0, 1), r1 (2, 3),
r3 (4, 5). Only r2 finds its namespace's pages: cache-only (Part A cap L - 1) it hits 7, timed
(page-aligned cap, R3) 4 (page 1; page 2 ends at token 8 > 7). Without namespaces the same
trace hits 7 for r1, r2, r3 (cache-only), so the test can tell.
"""

import json

import pandas as pd
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from fakes import Ticks, lru

from prefixsim.cli import app
from prefixsim.engine import replay_cache_only
from prefixsim.engine.fleet import Fleet, Sampling
from prefixsim.engine.scheduler import ContinuousBatching
from prefixsim.engine.timed import replay_timed
from prefixsim.errors import InputError
from prefixsim.router import ROUTERS
from prefixsim.trace import read_trace
from prefixsim.trace.write import mooncake_lines, parquet_table

NAMESPACES = ["a", "b", "a", None]


def write_trace(path, namespaces, ids=None):
    rows = []
    for i, namespace in enumerate(namespaces):
        row = {"timestamp": 10_000 * i, "input_length": 8, "output_length": 1,
               "hash_ids": list(ids[i]) if ids else [1, 2], "block_size": 4}
        if namespace is not None:
            row["namespace"] = namespace
        rows.append(json.dumps(row))
    path.write_text("\n".join(rows) + "\n")
    return path


def cache_only_hits(requests):
    result = replay_cache_only(requests, lru(1000))
    return [r.cached_tokens for r in result.records]


def timed_hits(requests):
    result = replay_timed(requests, Fleet([lru(1000)], Ticks(),
                          ContinuousBatching(64, 4), ROUTERS.build("round_robin")),
                          Sampling(check_invariants=True))
    return [r.cached_tokens for r in result.records]


def test_reader_keeps_namespaces_and_separates_their_ids(tmp_path):
    requests = read_trace(write_trace(tmp_path / "t.jsonl", NAMESPACES)).requests
    assert [r.namespace for r in requests] == NAMESPACES
    assert [r.page_ids for r in requests] == [(0, 1), (2, 3), (0, 1), (4, 5)]


def test_c10_namespaces_never_hit_each_other_cache_only(tmp_path):
    requests = read_trace(write_trace(tmp_path / "t.jsonl", NAMESPACES)).requests
    assert cache_only_hits(requests) == [0, 0, 7, 0]
    plain = read_trace(write_trace(tmp_path / "p.jsonl", [None] * 4)).requests
    assert cache_only_hits(plain) == [0, 7, 7, 7]


def test_c10_namespaces_never_hit_each_other_timed(tmp_path):
    requests = read_trace(write_trace(tmp_path / "t.jsonl", NAMESPACES)).requests
    assert timed_hits(requests) == [0, 0, 4, 0]
    plain = read_trace(write_trace(tmp_path / "p.jsonl", [None] * 4)).requests
    assert timed_hits(plain) == [0, 4, 4, 4]


def test_chain_check_is_per_namespace(tmp_path):
    """Id 2 follows 1 in namespace a and 5 in b: two id spaces, no conflict; the same rows
    without namespaces are not chained."""
    ids = [[1, 2], [5, 2]]
    requests = read_trace(write_trace(tmp_path / "ok.jsonl", ["a", "b"], ids)).requests
    assert [r.page_ids for r in requests] == [(0, 1), (2, 3)]
    with pytest.raises(InputError, match="not chained"):
        read_trace(write_trace(tmp_path / "bad.jsonl", [None, None], ids))


def test_bad_namespace_is_an_input_error(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps({"timestamp": 0, "input_length": 8, "output_length": 1,
                                "hash_ids": [1, 2], "block_size": 4, "namespace": 7}) + "\n")
    with pytest.raises(InputError) as info:
        read_trace(path)
    assert info.value.field == "namespace"


def test_written_traces_keep_namespaces(tmp_path):
    """JSONL and Parquet written from a read trace read back to the same requests."""
    requests = read_trace(write_trace(tmp_path / "t.jsonl", NAMESPACES)).requests
    jsonl = tmp_path / "w.jsonl"
    jsonl.write_text("".join(mooncake_lines(requests)))
    parquet = tmp_path / "w.parquet"
    pq.write_table(parquet_table(requests), parquet)
    for path in (jsonl, parquet):
        again = read_trace(path).requests
        assert [(r.namespace, r.page_ids) for r in again] == [
            (r.namespace, r.page_ids) for r in requests]


@pytest.mark.parametrize("mode, hits", [
    (["--cache-only"], [0, 0, 7, 0]),
    (["--model", "llama-3.1-8b", "--gpu", "h100-sxm"], [0, 0, 4, 0]),
])
def test_c10_end_to_end_through_the_cli(tmp_path, mode, hits):
    """`prefixsim run` in both modes (the cache-only run may take the SegmentCache path)."""
    trace = write_trace(tmp_path / "t.jsonl", NAMESPACES)
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["run", "--trace", str(trace), *mode, "-o", str(out),
                                      "--quiet"])
    assert result.exit_code == 0, result.output
    frame = pd.read_parquet(out / "requests.parquet").sort_values("arrival_s")
    assert frame["cached_tokens"].tolist() == hits
