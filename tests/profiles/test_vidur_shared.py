"""The shipped GPU profiles: each meets the held-out targets (docs/cost-models.md
"Imported GPU profiles"), and (with Vidur's
data in ../shared/gpu-measurements/vidur, skipped where absent) a fresh import gives the
shipped bytes, the date apart; timed runs with them name what they borrowed and how a run
at an uncovered TP falls back."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from prefixsim.cli import app
from prefixsim.costmodel import PrefillChunk, StepBatch
from prefixsim.costmodel.fitted import FittedCostModel
from prefixsim.costmodel.profile import load_profile, shipped_profiles
from prefixsim.presets import GPUS, MODELS
from prefixsim.profiles.vidur_import import TARGETS, import_vidur
from prefixsim.profiles.vidur_split import ImportOptions

VIDUR = Path(__file__).resolve().parents[3] / "shared" / "gpu-measurements" / "vidur"
DEMO = Path(__file__).resolve().parents[2] / "traces" / "demo_chat.jsonl"
IMPORTED = sorted(n for n in shipped_profiles() if not n.startswith("cpu-"))
needs_data = pytest.mark.skipif(not VIDUR.is_dir(), reason=f"no Vidur data at {VIDUR}")


def test_gpu_profiles_are_shipped():
    for gpu in ("a100-80g", "h100-sxm"):
        for name in ("llama-2-7b-tp1", "llama-3.1-8b-tp1", *(f"llama-{v}-70b-tp{tp}" for v in
                                                             ("2", "3.1") for tp in (2, 4, 8))):
            assert f"{gpu}-{name}" in IMPORTED


@pytest.mark.parametrize("name", IMPORTED)
def test_shipped_gpu_profiles_meet_the_targets(name):
    profile = load_profile(name)
    for cls, target in TARGETS.items():
        assert profile.heldout[cls].median_rel_error <= target, cls
    gpu = name.split("-llama")[0]
    assert profile.provenance.hardware_preset == gpu
    assert profile.covers_tp == [int(name.rsplit("tp", 1)[1])]
    parts = {b.part for b in profile.source.borrowed}
    assert ("attention" in parts) == (gpu == "h100-sxm")  # no public H100 attention data
    assert ("gemm, elementwise" in parts) == (gpu == "h100-sxm" and "3.1" in name)
    model = FittedCostModel(MODELS[profile.provenance.model.name], GPUS[gpu],
                            profile.covers_tp[0], profile=name)
    step = model.step_time_s(StepBatch((PrefillChunk(512, 1024),), (2048,) * 8))
    assert 0 < step < 1.0


@needs_data
@pytest.mark.parametrize("name, options", [
    ("a100-80g-llama-2-7b-tp1", ImportOptions("llama-2-7b", "a100-80g", 1)),
    ("h100-sxm-llama-3.1-8b-tp1", ImportOptions("llama-3.1-8b", "h100-sxm", 1,
                                                borrow="a100-80g")),
])
def test_a_fresh_import_is_the_shipped_profile(name, options):
    shipped = shipped_profiles()[name].read_text()
    date = json.loads(shipped)["provenance"]["date"]
    assert _same_to_rounding(json.loads(import_vidur(VIDUR, options, date).to_json()),
                             json.loads(shipped))


def _same_to_rounding(a, b, path: str = "") -> bool:
    """JSON values equal, floats to 1e-9 relative (numpy and BLAS versions round the least
    squares fit's last digits differently); the failing path is named."""
    if isinstance(a, dict) and isinstance(b, dict):
        assert a.keys() == b.keys(), path
        return all(_same_to_rounding(a[k], b[k], f"{path}.{k}") for k in a)
    if isinstance(a, list) and isinstance(b, list):
        assert len(a) == len(b), path
        return all(_same_to_rounding(x, y, f"{path}[{i}]") for i, (x, y) in
                   enumerate(zip(a, b, strict=True)))
    if isinstance(a, float) or isinstance(b, float):
        assert a == pytest.approx(b, rel=1e-9, abs=1e-300), path
        return True
    assert a == b, path
    return True


def _run(tmp_path, *args):
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["run", "--trace", str(DEMO), "--max-requests", "40",
                                      "-o", str(out), *args])
    assert result.exit_code == 0, result.output
    return result.output, json.loads((out / "summary.json").read_text())


def test_timed_runs_name_borrowed_parts_and_tp_fallbacks(tmp_path):
    output, summary = _run(tmp_path / "a", "--model", "llama-3.1-8b", "--gpu", "h100-sxm",
                           "--profile", "h100-sxm-llama-3.1-8b-tp1")
    assert summary["completed"] == 40 and "cost_model_warning" not in summary
    assert "attention: a100" in summary["cost_model_borrowed"]
    output, summary = _run(tmp_path / "b", "--model", "llama-3.1-8b", "--gpu", "h100-sxm",
                           "--tp", "2", "--profile", "h100-sxm-llama-3.1-8b-tp1")
    assert "profile covers tp 1; at tp 2: GEMMs: 0 of 4 layer weights have a table" in \
        summary["cost_model_warning"]
    assert "warning: profile covers tp 1; at tp 2" in output
