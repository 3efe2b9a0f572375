"""`prefixsim profile`: import-vidur on a tiny excerpt the tests write (tests/profiles/
vidur_excerpt.py), its refusals (one line, exit 2, nothing written), --validate, list."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from prefixsim.cli import app
from prefixsim.costmodel.profile import load_profile, shipped_profiles

sys.path.insert(0, str(Path(__file__).parents[1] / "profiles"))
from vidur_excerpt import write_vidur_excerpt  # noqa: E402


@pytest.fixture(scope="module")
def excerpt(tmp_path_factory):
    return write_vidur_excerpt(tmp_path_factory.mktemp("vidur"))


def invoke(*args: str):
    return CliRunner().invoke(app, ["profile", *args])


def test_import_writes_a_profile_and_prints_heldout_errors(excerpt, tmp_path):
    out = tmp_path / "p.json"
    result = invoke("import-vidur", str(excerpt), "--model", "llama-3.1-8b", "--gpu",
                    "a100-80g", "--tp", "1", "-o", str(out))
    assert result.exit_code == 0, result.output
    for cls in ("gemm", "elementwise", "prefill_attention", "decode_attention", "all_reduce",
                "cpu_overhead", "step"):
        assert any(line.startswith(cls) for line in result.output.splitlines()), cls
    assert "<=3%  ok" in result.output and f"profile: {out}" in result.output
    assert "borrowed cpu overhead: meta-llama/Llama-2-7b-hf" in result.output
    profile = load_profile(out)
    assert profile.provenance.hardware_preset == "a100-80g"
    result = invoke("import-vidur", str(excerpt), "--validate", str(out))
    assert result.exit_code == 0, result.output
    assert "stored errors: match" in result.output
    assert not list(tmp_path.glob(".*"))  # no temporary file left beside it


def test_default_output_name(excerpt, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = invoke("import-vidur", str(excerpt), "--model", "llama-3.1-8b", "--gpu",
                    "h100-sxm", "--tp", "2", "--borrow", "a100-80g", "--no-cpu-overhead")
    assert result.exit_code == 0, result.output
    assert (tmp_path / "h100-sxm-llama-3.1-8b-tp2.json").is_file()
    assert "borrow rule (LOMO)" in result.output


@pytest.mark.parametrize("args, expected", [
    (["--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--tp", "1"], "--borrow GPU"),
    (["--model", "llama-3.1-8b", "--gpu", "a100-80g", "--tp", "8"], "no rows at tp 8"),
    (["--model", "mistral-7b", "--gpu", "a100-80g", "--tp", "1"], "--model: no Vidur"),
    (["--model", "llama-3.1-8b", "--gpu", "l4", "--tp", "1"], "--gpu: no Vidur"),
    (["--gpu", "a100-80g", "--tp", "1"], "pass --model"),
    (["--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--tp", "1", "--borrow", "l4"],
     "cannot borrow from 'l4'"),
])
def test_refusals_are_one_line_and_write_nothing(excerpt, tmp_path, args, expected):
    out = tmp_path / "p.json"
    result = invoke("import-vidur", str(excerpt), *args, "-o", str(out))
    assert result.exit_code == 2, result.output
    assert expected in result.output and "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1
    assert not out.exists()


def test_validate_refuses_a_calibration_profile(excerpt):
    result = invoke("import-vidur", str(excerpt), "--validate", "cpu-llama-3.1-8b")
    assert result.exit_code == 2 and "not an imported profile" in result.output


def test_list_shows_every_shipped_profile():
    result = invoke("list")
    assert result.exit_code == 0, result.output
    for name in shipped_profiles():
        assert name in result.output


def test_list_shows_the_block_holdouts_and_the_borrow_rule():
    """The random points' errors are interpolation; the second table shows what holds out
    whole blocks, and every profile borrowed from another GPU shows its rule's error."""
    lines = invoke("list").output.splitlines()
    second = lines.index("whole blocks held out (extrapolation), median error")
    header = lines[second + 1].split()
    assert header[0] == "name" and "borrow" in header
    rows = {line.split()[0]: line.split()[1:] for line in lines[second + 2:]
            if line.split() and line.split()[0] in shipped_profiles()}
    for name in shipped_profiles():
        profile = load_profile(name)
        if not profile.heldout_blocks:
            assert name not in rows  # the CPU calibrations hold out no blocks
            continue
        cells = rows[name]
        stored = profile.heldout_blocks["top_range"]["gemm"].median_rel_error
        assert cells[0] == f"{stored:.1%}"
        borrowed = profile.heldout_borrow_rule.get("gemm")
        assert cells[-1] == ("-" if borrowed is None else f"{borrowed.median_rel_error:.1%}")
        if name.startswith("h100"):
            assert borrowed is not None
    assert "10-55%" in "\n".join(lines[second:])
