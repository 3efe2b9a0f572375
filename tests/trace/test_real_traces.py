"""Against the real public traces in ../shared/traces (skipped where absent): every file
reads with the right request count through `trace inspect --json`, and the generator's
presets land near the traces they imitate (the issue's calibration targets)."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from prefixsim.analysis.characterize import token_hit_rate
from prefixsim.cli import app
from prefixsim.trace import read_trace
from prefixsim.trace.generate import generate, load_preset
from prefixsim.trace.pages import coarsen

TRACES = Path(__file__).parents[3] / "shared" / "traces"
pytestmark = pytest.mark.skipif(not TRACES.is_dir(),
                                reason=f"the public traces are not at {TRACES}")

COUNTS = {
    "mooncake/conversation_trace.jsonl": 12031,
    "azure-llm-2023/AzureLLMInferenceTrace_code.csv": 8819,
    "azure-llm-2023/AzureLLMInferenceTrace_conv.csv": 19366,
    "ragpulse/0_trace.jsonl": 7106,
    "ragpulse": 7106,
}


def _inspect(path: Path) -> dict:
    result = CliRunner().invoke(app, ["trace", "inspect", str(path), "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


@pytest.mark.parametrize("name", sorted(COUNTS))
def test_every_file_reads_with_its_request_count(name):
    assert len(read_trace(TRACES / name).requests) == COUNTS[name]


def test_inspect_kv_cache_tester_folder_counts_every_request():
    folder = TRACES / "kv-cache-tester"
    expected = 0
    for file in sorted(folder.glob("*.json")):
        stack = list(json.loads(file.read_text())["requests"])
        while stack:
            item = stack.pop()
            if item.get("type") == "subagent":
                stack += item["requests"]
            else:
                expected += 1
    data = read_trace(folder)
    assert len(data.requests) == expected
    assert len({r.session_id for r in data.requests}) >= 24
    assert "poisson" in data.labels["arrival_model"]


def test_inspect_json_on_mooncake_gives_published_figures():
    stats = _inspect(TRACES / "mooncake" / "conversation_trace.jsonl")
    assert stats["requests"] == 12031 and stats["format"] == "mooncake"
    assert stats["unbounded_token_hit_rate"] == pytest.approx(0.3736, abs=5e-4)
    assert stats["distinct_pages"] == 182790 and stats["pages"] == 288500


def _per_session_hit(requests) -> float:
    sessions = defaultdict(list)
    for r in requests:
        sessions[r.session_id].append(r)
    return float(np.mean([token_hit_rate(v) for v in sessions.values()]))


def test_chat_preset_near_mooncake():
    real = read_trace(TRACES / "mooncake" / "conversation_trace.jsonl").requests
    fake = generate(load_preset("chat"), len(real), seed=0)
    real_mean = np.mean([r.input_tokens for r in real])
    fake_mean = np.mean([r.input_tokens for r in fake])
    assert fake_mean == pytest.approx(real_mean, rel=0.05)
    assert abs(token_hit_rate(fake) - token_hit_rate(real)) < 0.05


def test_agent_preset_near_kv_cache_tester():
    real = read_trace(TRACES / "kv-cache-tester").requests
    fake = generate(load_preset("agent"), len(real), seed=0)
    assert abs(_per_session_hit(fake) - _per_session_hit(real)) < 0.05


def test_rag_preset_near_ragpulse():
    real = [coarsen(r, 512) for r in read_trace(TRACES / "ragpulse").requests]
    fake = generate(load_preset("rag"), len(real), seed=0)
    assert abs(token_hit_rate(fake) - token_hit_rate(real)) < 0.05
    real_mean = np.mean([r.input_tokens for r in real])
    assert np.mean([r.input_tokens for r in fake]) == pytest.approx(real_mean, rel=0.1)
