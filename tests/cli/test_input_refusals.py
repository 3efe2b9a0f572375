"""Bad time, config and trace input is refused in one line (exit 2, naming file, line and
field), never run silently, looped on or let grow memory: docs/input-rules.md I3-I8, each
section headed by its rule. The demo trace is traces/demo_chat.jsonl (264 Mooncake requests
over 710 s, 512-token pages)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from cli_helpers import DEMO, invoke, one_line_error

from prefixsim.metrics.timeseries import effective_interval

ROW = {"timestamp": 0, "input_length": 600, "output_length": 5, "hash_ids": [1, 2]}
VOLATILE = {"wall_time_s", "command", "trace_time_shift_s", "simulated_s_per_wall_s"}


def jsonl(path: Path, *rows: dict) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def summary(folder: Path) -> dict:
    return json.loads((folder / "summary.json").read_text())


# -------------------------------------------- docs/input-rules.md I3
@pytest.mark.parametrize("stamp", [1e50, 1e30, 1e17])
def test_huge_timestamps_are_refused_not_looped_on(tmp_path, stamp):
    """1e50 ms looped forever in the timeseries grid; now any time over 1e16 (in the file's
    unit) is refused, naming line 2 and the field."""
    trace = jsonl(tmp_path / "t.jsonl", ROW, {**ROW, "timestamp": stamp})
    for mode in (["--cache-only"], []):
        result = invoke("run", "--trace", trace, *mode, "-o", tmp_path / "out")
        one_line_error(result, "t.jsonl:2", "timestamp", "must be <= 1e+16")
    assert not (tmp_path / "out").exists()


# -------------------------------------------- docs/input-rules.md I7
def test_the_interval_search_ends_on_any_span():
    """The coarsening search used to step one by one: with a 1e47 s span, (f - 1) x 1 s
    rounds to f x 1 s and the loop never ended. 1e47 s / 1e5 rows: about 1e42 s per row."""
    used = effective_interval(1e47, 1.0, 1)
    assert 1e42 <= used <= 1.1e42
    assert effective_interval(710.0, 1.0, 1) == 1.0
    assert effective_interval(1e6, 1.0, 4) == 41.0  # 1e6/41 + 1 = 24,391 <= 25,000 per replica


# -------------------------------------------- docs/input-rules.md I3
def test_a_span_over_31_years_is_a_wrong_unit(tmp_path):
    trace = jsonl(tmp_path / "t.jsonl", ROW, {**ROW, "timestamp": 2e12 * 1000})
    one_line_error(invoke("run", "--trace", trace, "--cache-only", "-o", tmp_path / "o"),
                   "t.jsonl", "timestamp", "time unit")


# -------------------------------------------- docs/input-rules.md I3
def test_epoch_timestamps_start_at_zero_in_every_command(tmp_path):
    """The demo with 1.7e12 ms added to every row: run gives the same summary as the demo
    (duration, hit rates, everything but the recorded shift of 1.7e9 s + 5.66 s) and trace
    inspect the same span, as the unshifted trace does."""
    rows = [json.loads(line) for line in DEMO.read_text().splitlines()]
    shifted = jsonl(tmp_path / "epoch.jsonl",
                    *({**r, "timestamp": r["timestamp"] + 1.7e12} for r in rows))
    for args in (["--cache-only"], ["--max-requests", "40"]):
        a = invoke("run", "--trace", DEMO, *args, "-o", tmp_path / "a", "--quiet")
        b = invoke("run", "--trace", shifted, *args, "-o", tmp_path / "b", "--quiet")
        assert a.exit_code == b.exit_code == 0, (a.output, b.output)
        plain, epoch = summary(tmp_path / "a"), summary(tmp_path / "b")
        assert epoch["trace_time_shift_s"] == pytest.approx(1.7e9 + 5.66)
        assert plain["trace_time_shift_s"] == pytest.approx(5.66)
        # equal up to the float rounding of (1.7e12 + t) / 1000 - 1.7e9 (~1e-7 s)
        assert set(epoch) == set(plain)
        for key in set(plain) - VOLATILE:
            if isinstance(plain[key], float):
                assert epoch[key] == pytest.approx(plain[key], rel=1e-5, abs=1e-3, nan_ok=True), key
            else:
                assert epoch[key] == plain[key], key
        if "duration" in plain:
            assert plain["duration"] < 1000
    spans = [json.loads(invoke("trace", "inspect", p, "--json").output)["time_span_s"]
             for p in (DEMO, shifted)]
    assert spans[0] == pytest.approx(spans[1], abs=1e-3)


def test_rows_out_of_order_are_counted(tmp_path):
    """Rows at 5, 1, 3 s: rows 2 and 3 arrive before row 1 (5 s): 2 reordered rows."""
    trace = jsonl(tmp_path / "t.jsonl", {**ROW, "timestamp": 5000},
                  {**ROW, "timestamp": 1000, "hash_ids": [3, 4]},
                  {**ROW, "timestamp": 3000, "hash_ids": [5, 6]})
    assert invoke("run", "--trace", trace, "--cache-only", "-o", tmp_path / "o").exit_code == 0
    assert summary(tmp_path / "o")["trace_reordered_rows"] == 2


# -------------------------------------------- docs/input-rules.md I5
@pytest.mark.parametrize("tp", [3, 5, 7, 64])
def test_tp_must_split_the_heads(tmp_path, tp):
    """llama-3.1-8b: 32 attention heads, 8 KV heads. tp 3/5/7 does not divide 32; tp 64
    does not divide 32 either (and is a multiple of 8): refused, naming tp and the heads."""
    result = invoke("run", "--trace", DEMO, "--tp", tp, "-o", tmp_path / "o")
    one_line_error(result, f"--tp (hardware.tp): tp {tp}", "32 attention heads", "8 KV heads")


def test_tp_above_the_kv_heads_replicates_them(tmp_path):
    """tp 16 splits 32 heads (2 a GPU) and is a multiple of the 8 KV heads (each on 2 GPUs,
    as vLLM replicates them): accepted."""
    result = invoke("run", "--trace", DEMO, "--tp", 16, "--cache-only", "-o", tmp_path / "o",
                    "--quiet")
    assert result.exit_code == 0, result.output
    assert "16 x" in summary(tmp_path / "o")["prefill_model"]


def test_a_custom_model_is_checked_when_built(tmp_path):
    presets = tmp_path / "p.yaml"
    presets.write_text(
        "models:\n  - {name: tiny, num_layers: 2, hidden_size: 256, num_heads: 6, "
        "num_kv_heads: 2, head_dim: 32, intermediate_size: 512, vocab_size: 1000, "
        "num_params: 2000000, num_active_params: 2000000}\n")
    result = invoke("run", "--trace", DEMO, "--presets", presets, "--model", "tiny", "--tp", 4,
                    "--cache-only", "-o", tmp_path / "o")
    one_line_error(result, "hardware.tp", "6 attention heads", "2 KV heads")


# -------------------------------------------- docs/input-rules.md I4
@pytest.mark.parametrize("name, config, expected", [
    ("ttl zero", None, ["cache.ttl_s", "must be > 0, got 0"]),
    ("bool capacity", "cache: {capacity_tokens: true}\n",
     ["cache.capacity_tokens", "expected an integer, got True"]),
    ("string ttl", "cache: {ttl_s: '300'}\n", ["cache.ttl_s", "expected a number"]),
    ("int flag", "cache: {bounds: 1}\n", ["cache.bounds", "expected true or false"]),
    ("duplicate section", "cache: {policy: lru}\ncache: {policy: fifo}\n",
     ["run.yaml:2", "cache", "key given twice"]),
    ("duplicate key", "cache:\n  policy: lru\n  policy: fifo\n",
     ["run.yaml:3", "policy", "key given twice"]),
    ("nul byte", "cache:\n  policy: lru\x00\n", ["run.yaml", "not valid YAML"]),
])
def test_config_values_are_strict(tmp_path, name, config, expected):
    args = ["run", "--trace", DEMO, "--cache-only", "-o", tmp_path / "o"]
    if config is None:
        args += ["--ttl", "0"]
    else:
        (tmp_path / "run.yaml").write_text(config, encoding="utf-8")
        args += ["--config", tmp_path / "run.yaml"]
    one_line_error(invoke(*args), *expected)
    assert not (tmp_path / "o").exists()


# -------------------------------------------- docs/input-rules.md I5
@pytest.mark.parametrize("trace", [DEMO, None])
def test_a_bad_prefix_model_is_refused_for_any_format(tmp_path, trace):
    """Checked for Mooncake too (it ignores prefix models), and for lengths-only CSVs."""
    if trace is None:
        trace = tmp_path / "v.csv"
        trace.write_text("arrived_at,num_prefill_tokens,num_decode_tokens\n0,17,3\n")
    for args in (["run", "--trace", trace, "--cache-only", "-o", tmp_path / "o"],
                 ["trace", "inspect", trace]):
        one_line_error(invoke(*args, "--prefix-model", "shared:abc"), "trace.prefix_model",
                       "shared:abc")


def test_a_parquet_row_with_block_size_zero_is_refused(tmp_path):
    path = tmp_path / "t.parquet"
    pq.write_table(pa.table({"timestamp": [0, 1], "input_length": [600, 600],
                             "output_length": [1, 1], "hash_ids": [[1, 2], [1, 2]],
                             "block_size": [512, 0]}), path)
    one_line_error(invoke("run", "--trace", path, "--cache-only", "-o", tmp_path / "o"),
                   "t.parquet:2", "block_size", "must be >= 1")


# -------------------------------------------- docs/input-rules.md I6
def test_a_utf8_bom_is_read_like_any_file(tmp_path):
    """Mooncake JSONL and an Azure CSV with a BOM give the results of the same files
    without one."""
    bom = "\ufeff"
    text = DEMO.read_text()
    (tmp_path / "bom.jsonl").write_text(bom + text, encoding="utf-8")
    azure = "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,100,5\n" \
            "2023-11-16 18:15:47.0000000,40,3\n"
    (tmp_path / "a.csv").write_text(azure, encoding="utf-8")
    (tmp_path / "bom.csv").write_text(bom + azure, encoding="utf-8")
    for plain, with_bom in ((DEMO, tmp_path / "bom.jsonl"), (tmp_path / "a.csv",
                                                            tmp_path / "bom.csv")):
        a = invoke("trace", "inspect", plain, "--json")
        b = invoke("trace", "inspect", with_bom, "--json")
        assert a.exit_code == b.exit_code == 0, b.output
        drop = {"path"}
        assert {k: v for k, v in json.loads(a.output).items() if k not in drop} == \
               {k: v for k, v in json.loads(b.output).items() if k not in drop}


# -------------------------------------------- docs/input-rules.md I4
@pytest.mark.parametrize("param, expected", [
    ("staleness_s=abc",
     ["--router-param (router.params.staleness_s): expected a number, got 'abc'"]),
    ("staleness_s=true", ["--router-param (router.params.staleness_s): expected a number"]),
    ("stale=1", ["--router-param (router.params.stale): ", "no such parameter", "staleness_s"]),
    ("staleness_s=-1", ["--router-param (router.params): staleness_s must be >= 0"]),
    # a number, as YAML
    ("staleness_s=-1e-3", ["--router-param (router.params): staleness_s must be >= 0"]),
    ("staleness_s=[1", ["--router-param", "staleness_s: not a YAML value"]),  # was a traceback
])
def test_router_params_are_named(tmp_path, param, expected):
    result = invoke("run", "--trace", DEMO, "--router-param", param, "-o", tmp_path / "o")
    one_line_error(result, *expected)


# -------------------------------------------- docs/input-rules.md I6
def test_a_kv_cache_tester_file_names_its_bad_field(tmp_path):
    path = tmp_path / "conv.json"
    path.write_text('{"requests": {"a": 1}}')
    one_line_error(invoke("trace", "inspect", path), "conv.json", "requests",
                   "expected a list of requests")


# -------------------------------------------- docs/input-rules.md I7
def test_a_huge_lengths_only_row_is_refused_at_once(tmp_path):
    """A 56-byte CSV row of 2^30 tokens took 6.7 GB (one page id per 16 tokens); tokens per
    request are capped at 2^24, and pages made up per request at 2^20 (2^24 tokens at
    --block-size 1 would be 16M pages)."""
    csv = tmp_path / "v.csv"
    csv.write_text("arrived_at,num_prefill_tokens,num_decode_tokens\n0,1073741824,3\n")
    one_line_error(invoke("trace", "inspect", csv), "v.csv:2", "num_prefill_tokens",
                   "must be <= 16777216")
    csv.write_text("arrived_at,num_prefill_tokens,num_decode_tokens\n0,16777216,3\n")
    one_line_error(invoke("trace", "inspect", csv, "--block-size", "1"), "v.csv:2",
                   "pages, more than 1,048,576 per request")


def test_a_parquet_file_is_sized_from_its_metadata(tmp_path):
    """10^8 zero ids compress to ~1.6 kB; the row group's value count refuses it before a
    row is decoded."""
    path = tmp_path / "zeros.parquet"
    pq.write_table(pa.table({"timestamp": [0], "input_length": [16], "output_length": [1],
                             "hash_ids": pa.array([[0] * 10**8], type=pa.list_(pa.int64()))}),
                   path, compression="zstd")
    assert path.stat().st_size < 10_000
    one_line_error(invoke("trace", "inspect", path), "zeros.parquet", "hash_ids",
                   "100,000,000 hash ids")


def test_yaml_aliases_cannot_explode(tmp_path):
    """Nine aliases deep of ten each stand for 10^9 values in 400 bytes."""
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 9)]
    text = "router:\n  name: prefix_aware\n  params:\n" + "".join(
        f"    {line}\n" for line in lines)
    (tmp_path / "run.yaml").write_text(text)
    one_line_error(invoke("run", "--config", tmp_path / "run.yaml", "--trace", DEMO),
                   "run.yaml", "100,000 values")


def test_a_catastrophic_session_regex_is_refused(tmp_path):
    (tmp_path / "run.yaml").write_text(
        "cache:\n  classes: [{name: a, ttl_s: 5, session_regex: '^(a+)+$'}]\n")
    one_line_error(invoke("run", "--config", tmp_path / "run.yaml", "--trace", DEMO,
                          "--cache-only"),
                   "cache.classes.0.session_regex", "exponential")


def test_deeply_nested_json_on_the_first_line(tmp_path):
    path = tmp_path / "deep.jsonl"
    path.write_text("[" * 100_000 + "]" * 100_000 + "\n")
    result = invoke("run", "--trace", path, "--cache-only", "-o", tmp_path / "o")
    one_line_error(result, "deep.jsonl")
    path.write_text('{"timestamp": 0, "input_length": 10, "output_length": 1, "hash_ids": '
                    + "[" * 100_000 + "]" * 100_000 + "}\n")
    one_line_error(invoke("trace", "inspect", path, "--trace-format", "mooncake"), "deep.jsonl")
