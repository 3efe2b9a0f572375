"""The one road (pipeline/road.py, docs/architecture.md "One run: a one-way road"): the
sinks take the request rows, the run pauses the cyclic collector and restores it, and a
run given its requests, or its trace read whole, gives the rows the sink wrote."""

from __future__ import annotations

import gc
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq

from prefixsim.config import load_config
from prefixsim.pipeline import FrameRows, ParquetRows, simulate
from prefixsim.pipeline import cache_only as cache_only_stage

DEMO = Path(__file__).resolve().parents[2] / "traces" / "demo_chat.jsonl"


def _config(**overrides):
    return load_config(None, {"trace.path": str(DEMO), "cache_only": True,
                              "cache.capacity_tokens": 20_000, **overrides})


def test_parquet_rows_write_row_groups_and_an_empty_run_leaves_its_columns(tmp_path):
    rows = ParquetRows(tmp_path / "r.parquet")
    frame = pd.DataFrame({"request_id": [1, 2, 3], "cached_tokens": [0, 5, 9]})
    rows.write(frame.iloc[:2])
    rows.write(frame.iloc[2:])
    rows.close()
    assert pq.ParquetFile(tmp_path / "r.parquet").metadata.num_row_groups == 2
    assert pd.read_parquet(tmp_path / "r.parquet").equals(frame)
    empty = ParquetRows(tmp_path / "e.parquet")
    empty.write(frame.iloc[:0])
    empty.close()
    assert list(pd.read_parquet(tmp_path / "e.parquet").columns) == ["request_id",
                                                                      "cached_tokens"]
    gone = ParquetRows(tmp_path / "g.parquet")
    gone.write(frame)
    gone.discard()
    assert not (tmp_path / "g.parquet").exists() and gone.scratch_dir == tmp_path


def test_frame_rows_keep_every_write_in_order():
    rows = FrameRows()
    assert rows.frame().empty
    rows.write(pd.DataFrame({"a": [1]}))
    rows.write(pd.DataFrame({"a": [2, 3]}))
    assert rows.frame()["a"].tolist() == [1, 2, 3]
    rows.discard()
    assert rows.frame().empty


def test_the_sink_gets_the_rows_the_result_holds(tmp_path):
    for stream in (False, True):
        rows = FrameRows()
        result = simulate(_config(), sink=rows, stream=stream)
        assert result.streamed == stream
        assert len(rows.frame()) == len(result.requests) == 264
        if not stream:
            assert rows.frame().equals(result.requests)
        assert result.config is not None and result.config.trace.format == "mooncake"


def test_the_run_pauses_the_cyclic_collector_and_restores_it(monkeypatch):
    seen = []
    real = cache_only_stage.replay_cache_only

    def replay(*args, **kwargs):
        seen.append(gc.isenabled())
        return real(*args, **kwargs)

    monkeypatch.setattr(cache_only_stage, "replay_cache_only", replay)
    assert gc.isenabled()
    simulate(_config(**{"cache.host_capacity_tokens": 40_000}))  # a RadixCache replay
    assert seen == [False] and gc.isenabled()
    gc.disable()
    try:
        simulate(_config(**{"cache.host_capacity_tokens": 40_000}))
        assert not gc.isenabled()  # a caller's own setting is left as it was
    finally:
        gc.enable()


def test_the_summary_says_which_load_made_it():
    """docs/load.md: a run under a load other than the trace's own times names it and its
    settings in the summary; a run without one has no load keys (its summary unchanged)."""
    plain = simulate(_config(**{"trace.max_requests": 40})).summary
    assert not [key for key in plain if key.startswith("load_")]
    poisson = simulate(_config(**{"trace.max_requests": 40, "load.type": "poisson",
                                  "load.rate": 4.0})).summary
    assert {k: v for k, v in poisson.items() if k.startswith("load_")} == {
        "load_type": "poisson", "load_rate": 4.0, "load_seed": 0}
    users = simulate(load_config(None, {
        "trace.path": str(DEMO), "trace.max_requests": 40, "load.type": "concurrency",
        "load.users": 3})).summary
    assert {k: v for k, v in users.items() if k.startswith("load_")} == {
        "load_type": "concurrency", "load_users": 3}
    scaled = simulate(_config(**{"trace.max_requests": 40, "load.rate_scale": 2.0})).summary
    assert {k: v for k, v in scaled.items() if k.startswith("load_")} == {
        "load_type": "trace", "load_rate_scale": 2.0}


def test_a_trace_checked_before_the_runs_is_streamed_where_the_runs_would_stream_it(tmp_path):
    """check_trace(read=True) reads a trace as the runs will: a cache-only run streams the
    demo trace, so the check keeps nothing (the whole copy it took before would sit in the
    sweep's process for nothing); a run that reads it whole (a time window) leaves the
    process's shared copy for its in-process runs. A bad line far into the file is
    refused either way, with its file and line."""
    import json

    import pytest

    from prefixsim.errors import InputError
    from prefixsim.pipeline import check_trace
    from prefixsim.pipeline.inputs import _cached_trace

    _cached_trace.cache_clear()
    check_trace(_config(), read=True)
    assert _cached_trace.cache_info().currsize == 0
    check_trace(_config(**{"trace.time_window": [0, 1]}), read=True)
    assert _cached_trace.cache_info().currsize == 1
    _cached_trace.cache_clear()
    rows = [{"timestamp": i, "input_length": 600, "output_length": 5, "hash_ids": [1, 2 + i]}
            for i in range(3000)]
    rows[2500]["input_length"] = -5
    bad = tmp_path / "bad.jsonl"
    bad.write_text("".join(json.dumps(r) + "\n" for r in rows))
    for config in (_config(**{"trace.path": str(bad)}),
                   _config(**{"trace.path": str(bad), "trace.time_window": [0, 1]})):
        with pytest.raises(InputError) as caught:
            check_trace(config, read=True)
        assert (caught.value.file, caught.value.line) == (str(bad), 2501)
