"""`prefixsim capacity` end to end on a tiny real run, and its one-line refusals
(docs/input-rules.md I1): nothing is written when the question is bad."""

import json

import pandas as pd
import pytest
from cli_helpers import DEMO, invoke, one_line_error

TINY = ("--trace", DEMO, "--max-requests", 120, "--model", "llama-3.1-8b",
        "--gpu", "h100-sxm", "-j", 1)


def test_replicas_search_finds_a_count_and_writes_the_folder(tmp_path):
    out = tmp_path / "cap"
    result = invoke("capacity", "--search", "replicas", *TINY, "--rate-scale", 50,
                    "--slo", "p99_ttft_ms:150", "-o", out)
    assert result.exit_code == 0, result.output
    answer = json.loads((out / "capacity.json").read_text())
    probes = pd.read_parquet(out / "capacity.parquet")
    assert answer["search"] == "replicas" and isinstance(answer["answer"], int)
    best = probes[probes["value"] == answer["answer"]]
    assert best["passed"].all()
    if answer["first_failing"] is not None:  # exact: one fewer replica fails
        assert answer["first_failing"] == answer["answer"] - 1
        assert not probes[probes["value"] == answer["first_failing"]]["passed"].any()
    assert {"offered_rate", "achieved_rate", "p99_ttft_ms", "run_id"} <= set(probes.columns)
    assert (out / "capacity.png").stat().st_size > 0
    for run_id, p99 in zip(probes["run_id"], probes["p99_ttft_ms"], strict=True):
        run = json.loads((out / "runs" / run_id / "summary.json").read_text())
        assert run["p99_ttft_ms"] == p99  # each probe's row carries its run's figures
    assert "prefixsim capacity (replicas)" in result.output
    report = invoke("report", out, "--quiet")  # a sweep folder: the report reads it
    assert report.exit_code == 0, report.output
    assert (out / "report.html").exists()


def test_rate_search_brackets_within_the_tolerance(tmp_path):
    out = tmp_path / "cap"
    result = invoke("capacity", "--search", "rate", *TINY, "--slo", "p99_ttft_ms:200",
                    "--tolerance", 0.2, "-o", out, "--quiet")
    assert result.exit_code == 0, result.output
    answer = json.loads((out / "capacity.json").read_text())
    assert answer["knob"] == "load.rate_scale"
    assert answer["first_failing"] - answer["answer"] <= 0.2 * answer["answer"]
    assert answer["offered_rate"] > 0 and answer["achieved_rate"] > 0


@pytest.mark.parametrize(("search", "limit", "named"), [
    (("--search", "replicas", "--model", "llama-2-7b"), "the model's context (max_model_len) "
     "of 4,096 tokens", "a model with a longer context"),
    (("--search", "rate", "--cache-tokens", 3000), "a replica's KV pool of 3,000 tokens",
     "a larger KV pool"),
])
def test_requests_no_replica_accepts_stop_the_search_at_once(tmp_path, search, limit, named):
    """Rejection depends on a request's length and a replica's limits, not on the knob: the
    first probe that rejects more than 2% ends the search (not 13 doublings to 4,096
    replicas, each failing the same way)."""
    out = tmp_path / "cap"
    result = invoke("capacity", *search, "--trace", DEMO, "-j", 1, "--slo",
                    "p99_ttft_ms:5000", "-o", out, "--quiet")
    assert result.exit_code == 1, result.output  # no answer, as when no probe passes
    answer = json.loads((out / "capacity.json").read_text())
    assert answer["probes"] == 1 and answer["answer"] is None
    assert answer["first_failing"] == 1  # the probe that stopped it: 1 replica, or x1 rate
    assert answer["note"].startswith("stopped: ")
    assert limit in answer["note"] and named in answer["note"]
    summary = json.loads(next((out / "runs").glob("*/summary.json")).read_text())
    assert f"{summary['rejected']:,} of 264 requests" in answer["note"]


def test_a_few_rejections_do_not_stop_the_search(tmp_path):
    """2% of the requests may be rejected and a probe still pass: the search goes on."""
    out = tmp_path / "cap"
    # of the first 120 requests one asks for more than 9,800 tokens (10,068): 1 rejected
    result = invoke("capacity", "--search", "replicas", *TINY, "--max-model-len", 9800,
                    "--slo", "p99_ttft_ms:5000", "-o", out, "--quiet")
    assert result.exit_code == 0, result.output
    answer = json.loads((out / "capacity.json").read_text())
    assert answer["answer"] == 1 and not answer.get("note", "").startswith("stopped")


@pytest.mark.parametrize(("args", "named"), [
    (("--search", "replicas", "--slo", "p99_hit_rate:5"), "p99_hit_rate"),
    (("--search", "replicas", "--slo", "std_ttft_ms:5"), "std_ttft_ms"),
    (("--search", "replicas", "--slo", "p99_ttft_ms:-1"), "--slo"),
    (("--search", "gpus"), "--search"),
    ((), "--search: is required: what to search for, rate or replicas"),
    (("--search", "rate", "--cache-only"), "--search"),
    (("--search", "rate", "--tolerance", 2), "--tolerance"),
    (("--search", "rate", "--goodput-share", 0.9), "--goodput-share"),
    (("--search", "replicas", "--load", "concurrency", "--users", 8), "closed loop"),
])
def test_bad_question_is_one_line_and_writes_nothing(tmp_path, args, named):
    out = tmp_path / "cap"
    result = invoke("capacity", *args, *TINY, "-o", out)
    one_line_error(result, named)
    assert not out.exists()
    assert list(tmp_path.iterdir()) == []


def test_a_goodput_share_decides_the_probes(tmp_path):
    """The demo's first 120 requests at 50x their rate, TTFT within 150 ms: 90.0% of them
    on 1 replica, 99.2% on 2, so a 95% goodput share needs 2 (no latency SLO given)."""
    out = tmp_path / "cap"
    result = invoke("capacity", "--search", "replicas", *TINY, "--rate-scale", 50,
                    "--goodput", "ttft:150", "--goodput-share", 0.95, "-o", out, "--quiet")
    assert result.exit_code == 0, result.output
    answer = json.loads((out / "capacity.json").read_text())
    probes = pd.read_parquet(out / "capacity.parquet")
    assert (answer["answer"], answer["first_failing"], answer["goodput_share"]) == (2, 1, 0.95)
    assert probes["goodput_share"].round(4).tolist() == [0.9, 0.9917]
    assert answer["first_failing_reasons"] == "goodput share 0.900 < 0.95"


def test_a_closed_loop_search_is_decided_by_its_slo(tmp_path):
    """64 users of the demo trace: every probe keeps up (a closed loop cannot queue), so
    the mean TTFT limit alone decides: 1 replica misses 600 ms (762 ms), 2 hold it (564)."""
    out = tmp_path / "cap"
    result = invoke("capacity", "--search", "replicas", "--load", "concurrency",
                    "--users", 64, "--slo", "mean_ttft_ms:600", *TINY, "-o", out)
    assert result.exit_code == 0, result.output
    answer = json.loads((out / "capacity.json").read_text())
    probes = pd.read_parquet(out / "capacity.parquet")
    assert (answer["answer"], answer["first_failing"]) == (2, 1)
    assert probes.loc[~probes["passed"], "reasons"].tolist() == ["mean_ttft_ms 761.6 > 600"]


def test_the_answer_says_when_vllm_would_not_start_its_replicas(tmp_path):
    """llama-3.1-70b on 2 x H100 holds 27,843 tokens of KV, under its 131,072-token context:
    every probe's replicas would need a smaller --max-model-len to start, and the answer
    says so (more replicas do not change it)."""
    out = tmp_path / "cap"
    result = invoke("capacity", "--search", "replicas", "--trace", DEMO, "--max-requests", 60,
                    "--model", "llama-3.1-70b", "--tp", 2, "-j", 1, "--slo",
                    "p99_ttft_ms:60000", "-o", out)
    answer = json.loads((out / "capacity.json").read_text())
    assert "--max-model-len 27,843 or less" in answer["max_model_len_warning"]
    assert f"warning: {answer['max_model_len_warning']}" in result.output
    plain = tmp_path / "plain"
    invoke("capacity", "--search", "replicas", *TINY, "--slo", "p99_ttft_ms:60000", "-o", plain)
    assert "max_model_len_warning" not in json.loads((plain / "capacity.json").read_text())


def test_a_missing_trace_is_refused_before_any_probe(tmp_path):
    """A trace that does not exist ran 21 probes, each 'the run failed', and wrote them all;
    now one line before any probe, whether the format is detected or given, and without a
    trace at all."""
    args = ("--search", "rate", "--slo", "p99_ttft_ms:2000", "--model", "llama-3.1-8b",
            "-j", 1, "--quiet", "-o", tmp_path / "cap")
    missing = tmp_path / "nothere.jsonl"
    assert one_line_error(invoke("capacity", missing, *args)) == \
        f"prefixsim: error: {missing}: no such file or folder"
    assert one_line_error(invoke("capacity", "--trace", missing, "--trace-format", "mooncake",
                                 *args)) == (f"prefixsim: error: {missing}: trace.path: no such "
                                             "file or folder (no run was started)")
    one_line_error(invoke("capacity", *args), "trace.path", "no trace given")
    assert list(tmp_path.iterdir()) == []


def test_a_trace_every_probe_fails_on_is_one_line_and_writes_nothing(tmp_path):
    """A malformed line past the format's detection: the first round's probes all fail on
    it, so the search stops there with the reader's line (file, line, field), exit 2,
    nothing written (it went on halving the rate for 21 probes)."""
    lines = open(DEMO).read().splitlines()
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join([*lines[:3], '{"timestamp": 9000, "input_length": "x", '
                              '"output_length": 3, "hash_ids": [1]}', *lines[3:6]]) + "\n")
    out = tmp_path / "cap"
    result = invoke("capacity", bad, "--search", "rate", "--slo", "p99_ttft_ms:2000",
                    "--model", "llama-3.1-8b", "-j", 1, "--quiet", "-o", out)
    assert one_line_error(result) == (
        f"prefixsim: error: {bad}:4: input_length: expected an integer, got 'x' (no probe "
        "can run: it fails at any load.rate_scale)")
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["bad.jsonl"]


def test_no_answer_is_said_even_with_quiet(tmp_path):
    """--quiet silences the progress and the answer block, not the outcome: a search no
    probe can pass printed nothing and exited 1."""
    out = tmp_path / "cap"
    result = invoke("capacity", "--search", "replicas", *TINY, "--slo", "p99_ttft_ms:1",
                    "-o", out, "--quiet")
    assert result.exit_code == 1, result.output
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("prefixsim: no answer: "), result.stderr
    assert "p99_ttft_ms" in lines[0] and str(out) in lines[0]
    assert json.loads((out / "capacity.json").read_text())["answer"] is None
