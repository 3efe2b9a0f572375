"""A streamed run (pipeline/streamed.py, pipeline/streamed_timed.py: `simulate(...,
stream=True)`) gives what the in-memory run gives:
request rows, summary and timeseries, on generated traces cut into many chunks and on the
real Mooncake trace; traces the stream cannot take fall back to the in-memory run with the
same results and the same errors."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from prefixsim.cli.app import app
from prefixsim.config import load_config
from prefixsim.pipeline import ParquetRows, simulate
from prefixsim.pipeline.inputs import resolve_trace_defaults
from prefixsim.trace import Request
from prefixsim.trace import stream as stream_module
from prefixsim.trace.generate import generate, load_preset
from prefixsim.trace.write import mooncake_lines, parquet_table

MOONCAKE = Path(__file__).resolve().parents[3] / "shared" / "traces" / "mooncake" / \
    "conversation_trace.jsonl"


@pytest.fixture(scope="module")
def chat(tmp_path_factory) -> dict[str, Path]:
    """3,000 chat requests, then 100 of them again (whole-prompt hits: the L - 1 cap), as
    JSONL and as Parquet of 250-row groups."""
    folder = tmp_path_factory.mktemp("chat")
    requests = generate(load_preset("chat"), 3000, seed=3)
    end = requests[-1].arrival_s
    requests += [dataclasses.replace(r, request_id=3000 + i, arrival_s=end + 1.0 + i)
                 for i, r in enumerate(requests[::30])]
    jsonl = folder / "chat.jsonl"
    jsonl.write_text("".join(mooncake_lines(requests)))
    parquet = folder / "chat.parquet"
    pq.write_table(parquet_table(requests), parquet, row_group_size=250)
    return {"jsonl": jsonl, "parquet": parquet}


@pytest.fixture(autouse=True)
def small_json_blocks(monkeypatch):
    monkeypatch.setattr(stream_module, "BLOCK_BYTES", 64 << 10)  # JSONL in ~30 chunks


def _config(path: Path, **overrides):
    keys = {"trace.path": str(path), "cache_only": True, **overrides}
    return resolve_trace_defaults(load_config(None, keys))


def _same_summary(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for key in a:
        if key in ("wall_time_s", "simulated_s_per_wall_s"):
            continue
        if isinstance(a[key], float) and math.isnan(a[key]):
            assert isinstance(b[key], float) and math.isnan(b[key]), key
        else:
            assert a[key] == b[key], key


class _Told:
    """A progress factory that records every phase's updates."""

    def __init__(self) -> None:
        self.phases: list[tuple[str, list[int]]] = []

    def __call__(self, desc: str, total: int | None):
        told: list[int] = []
        self.phases.append((desc, told))
        told_bar = type("Bar", (), {"update": lambda _self, n=1: told.append(n)})()
        return _Entered(told_bar)


class _Entered:
    def __init__(self, bar) -> None:
        self.bar = bar

    def __enter__(self):
        return self.bar

    def __exit__(self, *exc) -> None:
        pass


def _streamed(config, rows: Path, progress=None):
    """The run of `config` on the streamed road, its request rows written to `rows`."""
    return simulate(config, sink=ParquetRows(rows), stream=True, progress=progress)


def _compare(config, tmp_path: Path) -> None:
    streamed_rows = tmp_path / "streamed.parquet"
    streamed = _streamed(config, streamed_rows)
    assert streamed.streamed, "the run did not stream"
    whole = simulate(config)
    whole.requests.to_parquet(tmp_path / "whole.parquet", index=False)
    assert pq.read_table(streamed_rows).equals(pq.read_table(tmp_path / "whole.parquet"))
    assert pq.ParquetFile(streamed_rows).metadata.num_row_groups > 5  # it did stream
    _same_summary(streamed.summary, whole.summary)
    assert streamed.timeseries.equals(whole.timeseries)


CONFIGS = {
    "lru": {"cache.policy": "lru", "cache.capacity_tokens": 400_000},
    "unbounded": {},
    "ttl": {"cache.policy": "lru", "cache.capacity_tokens": 400_000, "cache.ttl_s": 60.0},
    "fixed-ttl-unbounded": {"cache.ttl_s": 30.0, "cache.ttl_mode": "fixed"},
    "s3fifo-tiers-pricing": {"cache.policy": "s3fifo", "cache.capacity_tokens": 300_000,
                             "cache.host_capacity_tokens": 600_000,
                             "cache.pricing": "anthropic"},
    "block-lfu": {"cache.policy": "lfu", "cache.capacity_tokens": 300_000,
                  "cache.mode": "block"},
    "block-fifo": {"cache.policy": "fifo", "cache.capacity_tokens": 300_000,
                   "cache.mode": "block"},  # orphans left at the end, in the summary
    "pool": {"cache.policy": "lru", "cache.capacity_tokens": 200_000,
             "cache.pool.capacity_tokens": 800_000},
    "min-cacheable": {"cache.policy": "lru", "cache.capacity_tokens": 400_000,
                      "cache.min_cacheable_tokens": 4096},
    "max-requests": {"cache.policy": "lru", "cache.capacity_tokens": 400_000,
                     "trace.max_requests": 1777},
}


@pytest.mark.parametrize("name", CONFIGS)
def test_streamed_parquet_equals_in_memory(chat, tmp_path, name):
    _compare(_config(chat["parquet"], **CONFIGS[name]), tmp_path)


@pytest.mark.parametrize("name", ["lru", "ttl", "s3fifo-tiers-pricing", "unbounded"])
def test_streamed_jsonl_equals_in_memory(chat, tmp_path, name):
    _compare(_config(chat["jsonl"], **CONFIGS[name]), tmp_path)


def test_streamed_mooncake_equals_in_memory(tmp_path):
    if not MOONCAKE.exists():
        pytest.skip(f"the Mooncake trace is not at {MOONCAKE}")
    _compare(_config(MOONCAKE, **{"cache.policy": "lru", "cache.capacity_tokens": 3_000_000}),
             tmp_path)


BELADY = {
    "belady": {"cache.policy": "belady", "cache.capacity_tokens": 400_000},
    "lru-bounds": {"cache.policy": "lru", "cache.capacity_tokens": 300_000,
                   "cache.bounds": True},
    "belady-ttl-classes": {"cache.policy": "belady", "cache.capacity_tokens": 300_000,
                           "cache.ttl_s": 60.0, "cache.min_cacheable_tokens": 4096,
                           "cache.bounds": True},
    "belady-block-tiers": {"cache.policy": "belady", "cache.capacity_tokens": 300_000,
                           "cache.mode": "block", "cache.host_capacity_tokens": 600_000},
}


@pytest.mark.parametrize("name", BELADY)
def test_streamed_belady_equals_in_memory(chat, tmp_path, monkeypatch, name):
    """Belady, as the policy or the bound, learns the future from the next-use files
    (analysis/next_uses.py, walked backwards in blocks of a few requests here)."""
    from prefixsim.analysis import next_uses
    monkeypatch.setattr(next_uses, "BLOCK_USES", 1000)
    _compare(_config(chat["parquet"], **BELADY[name]), tmp_path)
    assert not list(tmp_path.glob(".next-uses-*")), "the next-use files are left behind"


def test_streamed_belady_bound_jsonl(chat, tmp_path):
    _compare(_config(chat["jsonl"], **BELADY["belady-ttl-classes"]), tmp_path)


def test_pool_offline_policy_and_time_window_do_not_stream(chat, tmp_path):
    for overrides in ({"cache.capacity_tokens": 200_000, "cache.pool.policy": "belady",
                       "cache.pool.capacity_tokens": 800_000},
                      {"trace.time_window": (0.1, 0.5)}):
        assert not _streamed(_config(chat["parquet"], **overrides),
                             tmp_path / "rows.parquet").streamed


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines(keepends=True)


def _fallback_cases(chat, folder: Path) -> dict[str, Path]:
    """Files the stream gives up on part-way (after some chunks were replayed)."""
    lines = _lines(chat["jsonl"])
    cases = {}
    late = len(lines) - 40
    swapped = lines[:late] + [lines[late + 1], lines[late]] + lines[late + 2:]
    cases["out-of-order"] = swapped
    record = json.loads(lines[late])
    record["block_size"] = 256
    record["hash_ids"] = list(range(10**9, 10**9 + -(-record["input_length"] // 256)))
    cases["two-page-sizes"] = lines[:late] + [json.dumps(record) + "\n"] + lines[late + 1:]
    paths = {}
    for name, content in cases.items():
        paths[name] = folder / f"{name}.jsonl"
        paths[name].write_text("".join(content))
    return paths


def test_fallback_gives_in_memory_results(chat, tmp_path):
    for name, path in _fallback_cases(chat, tmp_path).items():
        config = _config(path, **CONFIGS["lru"])
        told = _Told()
        result = _streamed(config, tmp_path / "rows.parquet", told)
        assert not result.streamed, name
        assert pq.read_table(tmp_path / "rows.parquet").equals(  # the sink kept only the
            pa.Table.from_pandas(result.requests, preserve_index=False))  # whole run's rows
        (desc, replayed), *_ = told.phases
        assert desc == "replay" and replayed, name
        assert sum(replayed) == 0, name  # progress reported, then taken back
        runner = CliRunner()
        base = ["run", "--trace", str(path), "--cache-only", "--policy", "lru",
                "--cache-tokens", "400000", "--quiet"]
        first = runner.invoke(app, [*base, "-o", str(tmp_path / "a")])
        second = runner.invoke(app, [*base, "--no-stream", "-o", str(tmp_path / "b")])
        assert first.exit_code == second.exit_code == 0, first.output
        assert pq.read_table(tmp_path / "a" / "requests.parquet").equals(
            pq.read_table(tmp_path / "b" / "requests.parquet"))


@pytest.mark.parametrize("damage", ["bad-json", "bad-field", "unchained"])
def test_bad_line_late_in_a_streamed_trace_is_the_same_one_line_error(chat, tmp_path,
                                                                      damage):
    lines = _lines(chat["jsonl"])
    late = len(lines) - 10
    if damage == "bad-json":
        lines[late] = lines[late][:-5] + "\n"
    elif damage == "bad-field":
        record = json.loads(lines[late])
        record["output_length"] = -3
        lines[late] = json.dumps(record) + "\n"
    else:
        record = json.loads(lines[late])
        longer = next(json.loads(line)["hash_ids"] for line in lines
                      if len(json.loads(line)["hash_ids"]) > 1)
        count = len(record["hash_ids"])  # starts with an id that followed another before
        record["hash_ids"] = (longer[1:] + [10**12 + i for i in range(count)])[:count]
        lines[late] = json.dumps(record) + "\n"
    path = tmp_path / "damaged.jsonl"
    path.write_text("".join(lines))
    runner = CliRunner()
    base = ["run", "--trace", str(path), "--cache-only", "--quiet"]
    streamed = runner.invoke(app, [*base, "-o", str(tmp_path / "a")])
    whole = runner.invoke(app, [*base, "--no-stream", "-o", str(tmp_path / "b")])
    assert streamed.exit_code == whole.exit_code == 2
    assert streamed.output == whole.output
    assert len(streamed.output.strip().splitlines()) == 1
    assert not (tmp_path / "a").exists()
    assert not any(p.name.startswith(".a.") for p in tmp_path.iterdir())  # no staging left


def test_cli_streams_and_writes_what_no_stream_writes(chat, tmp_path):
    runner = CliRunner()
    base = ["run", "--trace", str(chat["parquet"]), "--cache-only", "--policy", "lru",
            "--cache-tokens", "400000", "--quiet"]
    first = runner.invoke(app, [*base, "-o", str(tmp_path / "a")])
    second = runner.invoke(app, [*base, "--no-stream", "-o", str(tmp_path / "b")])
    assert first.exit_code == second.exit_code == 0, first.output
    assert pq.ParquetFile(tmp_path / "a" / "requests.parquet").metadata.num_row_groups == 13
    for name in ("requests.parquet", "timeseries.parquet"):
        assert pq.read_table(tmp_path / "a" / name).equals(pq.read_table(tmp_path / "b" / name))
    a, b = (json.loads((tmp_path / d / "summary.json").read_text()) for d in "ab")
    for summary in (a, b):
        summary.pop("wall_time_s")
        summary.pop("command")
    assert a == b
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == sorted(
        p.name for p in (tmp_path / "b").iterdir())


TIMED = {
    "prefix-aware": {"engine.replicas": 2, "router.name": "prefix_aware"},
    "ttl-pricing": {"engine.replicas": 2, "cache.ttl_s": 30.0,
                    "cache.pricing": "anthropic"},
    "classes-tiers": {"engine.replicas": 1, "cache.min_cacheable_tokens": 4096,
                      "cache.host_capacity_tokens": 600_000},
}


def _timed_config(path: Path, **overrides):
    keys = {"trace.path": str(path), "trace.max_requests": 1200, **overrides}
    return resolve_trace_defaults(load_config(None, keys))


@pytest.mark.parametrize("name", TIMED)
def test_streamed_timed_equals_in_memory(chat, tmp_path, name):
    """The engine reads the chunks as the arrivals come (pipeline/streamed_timed.py)."""
    config = _timed_config(chat["parquet"], **TIMED[name])
    streamed = simulate(config, stream=True)
    assert streamed.streamed, "the run did not stream"
    whole = simulate(config)
    assert streamed.requests.equals(whole.requests)
    _same_summary(streamed.summary, whole.summary)
    assert streamed.timeseries.equals(whole.timeseries)


def test_streamed_timed_falls_back_before_serving(chat, tmp_path):
    lines = _lines(chat["jsonl"])[:600]
    lines[500], lines[501] = lines[501], lines[500]  # out of arrival order, late
    path = tmp_path / "swapped.jsonl"
    path.write_text("".join(lines))
    config = _timed_config(path)
    assert not simulate(config, stream=True).streamed
    for overrides in ({"cache.policy": "belady"},
                      {"engine.time_scale": 0.5, "cache.ttl_s": 30.0}):
        assert not simulate(_timed_config(chat["parquet"], **overrides), stream=True).streamed


@pytest.mark.parametrize("damage", ["bad-field", "none"])
def test_cli_timed_run_streams_what_no_stream_writes(chat, tmp_path, monkeypatch, damage):
    """A timed `run` takes the streamed road (and a late bad line in the JSONL gives the
    same one-line error as reading the trace whole)."""
    from prefixsim.pipeline import road
    taken = []
    real = road.serve_streamed
    monkeypatch.setattr(road, "serve_streamed",
                        lambda *a, **k: taken.append(1) or real(*a, **k))
    lines = _lines(chat["jsonl"])[:800]
    if damage == "bad-field":
        record = json.loads(lines[700])
        record["output_length"] = -3
        lines[700] = json.dumps(record) + "\n"
    path = tmp_path / "chat.jsonl"
    path.write_text("".join(lines))
    runner = CliRunner()
    base = ["run", "--trace", str(path), "--replicas", "2", "--quiet"]
    first = runner.invoke(app, [*base, "-o", str(tmp_path / "a")])
    second = runner.invoke(app, [*base, "--no-stream", "-o", str(tmp_path / "b")])
    assert taken, "the timed run did not try the stream"
    if damage == "bad-field":
        assert first.exit_code == second.exit_code == 2
        assert first.output == second.output and len(first.output.strip().splitlines()) == 1
        return
    assert first.exit_code == second.exit_code == 0, first.output
    for name in ("requests.parquet", "timeseries.parquet"):
        assert pq.read_table(tmp_path / "a" / name).equals(pq.read_table(tmp_path / "b" / name))
    a, b = (json.loads((tmp_path / d / "summary.json").read_text()) for d in "ab")
    for summary in (a, b):
        for key in ("wall_time_s", "command", "simulated_s_per_wall_s"):
            summary.pop(key)
    assert a == b


def test_a_streamed_cache_only_run_builds_its_caches_without_the_id_set(chat, monkeypatch):
    """The stream checks each chunk's ids chained before it yields the chunk, so the streamed
    run's caches keep no resident-id set (cache/segment_tree.py `chained`); an in-memory
    run's requests are checked at once by `build` (trace/chains.py): chained, no set either;
    not chained, the set, which finds the conflict. Same rows either way (the tests
    above)."""
    from prefixsim.pipeline import build as build_module
    from prefixsim.pipeline import streamed as streamed_module

    made = []

    def recording(*args, **kwargs):
        parts = build_module.build(*args, **kwargs)
        made.extend(parts.caches)
        return parts

    monkeypatch.setattr(streamed_module, "build", recording)
    config = _config(chat["jsonl"], **{"cache.capacity_tokens": 200_000})
    simulate(config, stream=True)
    assert len(made) == 1 and made[0]._ids is None
    chained = [Request(0, 0.0, 32, 1, (1, 2), 16)]
    assert build_module.build(config, chained).caches[0]._ids is None
    crossed = [Request(0, 0.0, 32, 1, (1, 1), 16)]  # an id after itself: not chained
    assert build_module.build(config, crossed).caches[0]._ids == set()


def test_streamed_parquet_with_integer_session_ids_equals_in_memory(chat, tmp_path):
    """Integer session ids are read as text on every road (a class's session regex reads
    them), so such a file streams too, with a class matching some sessions by regex."""
    table = pq.read_table(chat["parquet"])
    ids = pa.array([i % 97 for i in range(table.num_rows)], pa.int64())
    table = table.set_column(table.schema.get_field_index("session_id"), "session_id", ids)
    path = tmp_path / "int_sessions.parquet"
    pq.write_table(table, path, row_group_size=250)
    config = _config(path, **{"cache.policy": "lru", "cache.capacity_tokens": 400_000,
                              "cache.ttl_s": 600.0, "cache.classes": [
                                  {"name": "short", "session_regex": "^1", "ttl_s": 5.0}]})
    _compare(config, tmp_path)
