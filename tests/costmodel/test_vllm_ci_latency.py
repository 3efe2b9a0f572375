"""The default cost model against vLLM's own CI latency benchmark (bench/vllm_ci_latency.py:
figures transcribed from its build pages, so the check runs without ../shared): a batch of
8 x 32 prompt tokens decoding 128 tokens, Llama-3.1-8B TP1, Llama-3-70B TP4 and Mixtral-8x7B
TP2 on A100, H100 and H200. A guard, not a fit: under the engine the builds ran (V0: they
predate vLLM's V1 engine, docs/cost-models.md) and under the default one, every simulated
batch latency within 20% of the measured one (the bench prints the figures, 0-10% and 0-13%
today), and the GPUs in the measured order for each model."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parents[2] / "bench" / "vllm_ci_latency.py"
_SPEC = importlib.util.spec_from_file_location("vllm_ci_latency", _PATH)
ci = importlib.util.module_from_spec(_SPEC)
sys.modules.setdefault("vllm_ci_latency", ci)  # its dataclasses look their module up
_SPEC.loader.exec_module(ci)


@pytest.fixture(scope="module", params=sorted({ci.RAN_ENGINE, "vllm-v1"}))
def results(request):
    return ci.errors(request.param)


def test_the_builds_ran_v0_as_dated():
    """The engine the combined table uses is V0, with the sources that date the builds."""
    assert ci.RAN_ENGINE == "vllm-v0" and ci.RAN_ENGINE in ci.ENGINES
    assert any("pull/9768" in source for source in ci.DATED_BY)


def test_every_batch_latency_is_within_a_fifth_of_vllms_ci(results):
    off = [(t.test, t.gpu, f"{err:+.1%}") for t, _, err in results if abs(err) > 0.20]
    assert off == []


def test_the_gpus_rank_as_measured_for_each_model(results):
    by_model: dict[str, list[tuple[float, float]]] = {}
    for test, sim, _ in results:
        by_model.setdefault(test.test, []).append((test.latency_ms, sim))
    for test, pairs in by_model.items():
        measured = sorted(range(len(pairs)), key=lambda i: pairs[i][0])
        simulated = sorted(range(len(pairs)), key=lambda i: pairs[i][1])
        assert measured == simulated, test


def test_the_batch_is_eight_distinct_prompts_at_once():
    batch = ci.batch_requests()
    assert len(batch) == ci.BATCH == 8
    assert {r.arrival_s for r in batch} == {0.0}
    assert len({r.page_ids for r in batch}) == 8
    assert all(r.input_tokens == 32 and r.output_tokens == 128 for r in batch)
