"""A replica refuses a request longer than the model's context, as vLLM refuses a prompt
plus its requested output over --max-model-len (docs/cost-models.md "Models",
docs/results.md `max_model_len`): exactly the requests over the limit are rejected, on
arrival; `scheduler.max_model_len` (`--max-model-len`) sets another limit; cache-only
replays have no model and are unchanged."""

import json

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from prefixsim.cli import app
from prefixsim.config import load_config
from prefixsim.pipeline import simulate
from prefixsim.report import load_report_data
from prefixsim.report.header import header_sections
from prefixsim.trace import load_trace

DEMO = "traces/demo_chat.jsonl"


def _over(limit: int) -> np.ndarray:
    """Which demo requests ask for more than `limit` tokens: prompt plus output (a trace's 0
    output tokens served as 1)."""
    requests = load_trace(DEMO)
    return np.array([r.input_tokens + max(1, r.output_tokens) > limit for r in requests])


def _timed(**overrides) -> tuple[dict, pd.DataFrame]:
    config = load_config(None, {"trace.path": DEMO, "engine.sample_interval_s": None,
                                **overrides})
    result = simulate(config)
    return result.summary, result.requests.sort_values("request_id")


def test_llama_2_rejects_exactly_the_requests_over_its_4096_tokens():
    over = _over(4096)
    assert 0 < over.sum() < len(over)  # the demo trace has both
    summary, requests = _timed(**{"model.name": "llama-2-7b"})
    assert summary["max_model_len"] == 4096
    assert summary["kv_pool_tokens_per_replica"] > 4096  # the context is the limit
    rejected = (requests["status"] == "rejected").to_numpy()
    assert (rejected == over).all()
    assert summary["rejected"] == over.sum()
    # refused on arrival: no first token, no tokens of theirs in the cache's query
    assert requests.loc[rejected, "ttft_ms"].isna().all()
    assert summary["cache_query_tokens"] == requests.loc[~rejected, "input_tokens"].sum()
    assert "the model's context (max_model_len) of 4,096 tokens" in summary["rejected_warning"]


@pytest.mark.parametrize("limit", [3000, 6000])
def test_scheduler_max_model_len_sets_another_limit(limit):
    summary, requests = _timed(**{"scheduler.max_model_len": limit})
    assert summary["max_model_len"] == limit
    assert ((requests["status"] == "rejected").to_numpy() == _over(limit)).all()


def test_a_preset_context_rejects_nothing_that_fits_it():
    summary, requests = _timed()
    assert summary["max_model_len"] == 131_072
    assert summary["rejected"] == 0 and "rejected_warning" not in summary


def test_cache_only_replays_ignore_the_context():
    base = {"trace.path": DEMO, "cache_only": True, "engine.sample_interval_s": None}
    short = simulate(load_config(None, {**base, "model.name": "llama-2-7b",
                                        "scheduler.max_model_len": 100}))
    plain = simulate(load_config(None, base))
    pd.testing.assert_frame_equal(short.requests, plain.requests)
    assert "max_model_len" not in short.summary


def test_the_flag_sets_it_and_refuses_a_bad_value(tmp_path):
    out = tmp_path / "run"
    result = CliRunner().invoke(app, ["run", "--trace", DEMO, "--max-model-len", "3000",
                                      "-o", str(out)])
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["max_model_len"] == 3000 and summary["rejected"] == _over(3000).sum()
    assert "warning: " in result.output and "max_model_len) of 3,000 tokens" in result.output
    bad = CliRunner().invoke(app, ["run", "--trace", DEMO, "--max-model-len", "0",
                                   "-o", str(tmp_path / "bad")])
    assert bad.exit_code == 2 and len(bad.output.strip().splitlines()) == 1
    assert "max_model_len" in bad.output and not (tmp_path / "bad").exists()


def test_a_pool_shorter_than_the_context_says_vllm_would_not_start():
    """llama-3.1-70b on 2 x H100: (0.9 x 80 GiB - 70.6e9 x 2 / 2 bytes - 2 GiB) / 163,840
    bytes a token per GPU = 27,843 tokens, under its 131,072-token context: vLLM refuses
    to start unless --max-model-len is at most that."""
    summary, _ = _timed(**{"model.name": "llama-3.1-70b", "hardware.tp": 2,
                           "trace.max_requests": 30})
    assert summary["kv_pool_tokens_per_replica"] == 27_843
    line = summary["max_model_len_warning"]
    assert line.startswith("vLLM would not start this replica: one request of max_model_len "
                           "131,072 tokens needs more KV than its pool of 27,843 tokens")
    assert "--max-model-len 27,843 or less" in line
    for fits in ({"scheduler.max_model_len": 27_843}, {"hardware.tp": 4},
                 {"cache.capacity_tokens": 20_000}):  # the last: no GPU pool to check
        summary, _ = _timed(**{"model.name": "llama-3.1-70b", "hardware.tp": 2,
                               "trace.max_requests": 30, **fits})
        assert "max_model_len_warning" not in summary, fits
    assert "max_model_len_warning" not in _timed(**{"trace.max_requests": 30})[0]


def test_the_report_header_gives_the_limit_and_the_warning(tmp_path):
    out = tmp_path / "run"
    result = CliRunner().invoke(app, ["run", "--trace", DEMO, "--max-requests", "30",
                                      "--model", "llama-3.1-70b", "--tp", "2", "-o", str(out),
                                      "--quiet"])
    assert result.exit_code == 0, result.output
    hardware = dict(header_sections(load_report_data(out))[1][1])
    assert hardware["max model len"] == "131,072 tokens"
    assert hardware["note"].startswith("vLLM would not start this replica")
