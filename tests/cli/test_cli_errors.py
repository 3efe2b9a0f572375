"""Bad input through `prefixsim run`: exit code 2, one line on stderr naming where, no
traceback, and nothing left on disk (no results folder, no staging folder).

Every case runs in an empty temporary working directory, once with `-o out` and once with the
default `results/<timestamp>-<label>/`, and the directory must afterwards hold only the inputs
the case wrote.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from prefixsim.cli import app

REPO = Path(__file__).parents[2]

GOOD = {"timestamp": 0, "input_length": 600, "output_length": 5, "hash_ids": [1, 2]}


def jsonl(*rows: object) -> str:
    return "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows)


# name -> (files to write, extra args, substrings the one error line must contain)
CASES = {
    "malformed_json_line": (
        {"t.jsonl": jsonl(GOOD, '{"timestamp": 1, "input_length": 5')},
        ["--trace", "t.jsonl"], ["t.jsonl:2"],
    ),
    "wrong_field_type": (
        {"t.jsonl": jsonl(GOOD, {**GOOD, "input_length": "many"})},
        ["--trace", "t.jsonl"], ["t.jsonl:2", "input_length"],
    ),
    "missing_field": (
        {"t.jsonl": jsonl({k: v for k, v in GOOD.items() if k != "output_length"})},
        ["--trace", "t.jsonl"], ["t.jsonl:1", "output_length"],
    ),
    "hash_ids_length_mismatch": (
        {"t.jsonl": jsonl(GOOD, GOOD, {**GOOD, "input_length": 1100})},
        ["--trace", "t.jsonl"], ["t.jsonl:3", "hash_ids"],
    ),
    "unknown_policy": (
        {"t.jsonl": jsonl(GOOD)},
        ["--trace", "t.jsonl", "--policy", "mru"], ["cache.policy", "mru", "lru"],
    ),
    "negative_capacity": (
        {"t.jsonl": jsonl(GOOD)},
        ["--trace", "t.jsonl", "--cache-tokens", "-5"], ["cache.capacity_tokens", "-5"],
    ),
    "negative_ttl": (
        {"t.jsonl": jsonl(GOOD)},
        ["--trace", "t.jsonl", "--ttl", "-1"], ["cache.ttl_s"],
    ),
    "missing_trace_file": (
        {}, ["--trace", "nothere.jsonl"], ["nothere.jsonl"],
    ),
    "unknown_config_key": (
        {"t.jsonl": jsonl(GOOD), "run.yaml": "cache:\n  capacty_tokens: 5\n"},
        ["--config", "run.yaml", "--trace", "t.jsonl"], ["run.yaml", "cache.capacty_tokens"],
    ),
    "unknown_config_section": (
        {"t.jsonl": jsonl(GOOD), "run.yaml": "cahce:\n  policy: lru\n"},
        ["--config", "run.yaml", "--trace", "t.jsonl"], ["run.yaml", "cahce"],
    ),
    "bad_config_value": (
        {"t.jsonl": jsonl(GOOD), "run.yaml": "cache:\n  capacity_tokens: lots\n"},
        ["--config", "run.yaml", "--trace", "t.jsonl"], ["run.yaml", "cache.capacity_tokens"],
    ),
    "bad_yaml": (
        {"t.jsonl": jsonl(GOOD), "run.yaml": "cache:\n  policy: lru\n  ttl_s: [1, 2\n"},
        ["--config", "run.yaml", "--trace", "t.jsonl"], ["run.yaml"],
    ),
    "missing_config_file": (
        {"t.jsonl": jsonl(GOOD)}, ["--config", "gone.yaml", "--trace", "t.jsonl"],
        ["gone.yaml"],
    ),
    "unchained_hash_ids": (
        {"t.jsonl": jsonl(GOOD, {**GOOD, "hash_ids": [9, 2]})},
        ["--trace", "t.jsonl"], ["hash_ids"],
    ),
}


def write_inputs(folder: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (folder / name).write_text(text, encoding="utf-8")


def assert_one_line_error(stderr: str, expected: list[str]) -> None:
    lines = stderr.splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("prefixsim: error: "), stderr
    for text in expected:
        assert text in lines[0], (text, lines[0])
    assert "Traceback" not in stderr


@pytest.mark.parametrize("with_output", [True, False], ids=["-o", "default-dir"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_bad_input_exits_2_with_one_line_and_writes_nothing(name, with_output, tmp_path,
                                                           monkeypatch):
    files, args, expected = CASES[name]
    write_inputs(tmp_path, files)
    monkeypatch.chdir(tmp_path)
    argv = ["run", "--cache-only", *args] + (["-o", "out"] if with_output else [])
    result = CliRunner().invoke(app, argv)
    assert result.exit_code == 2, (result.output, result.exception)
    assert_one_line_error(result.stderr, expected)
    assert result.stdout == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(files)


def test_bad_line_in_a_real_process(tmp_path):
    """`python -m prefixsim` itself: exit status 2, one stderr line, nothing on disk."""
    files, args, expected = CASES["hash_ids_length_mismatch"]
    write_inputs(tmp_path, files)
    proc = subprocess.run(
        [sys.executable, "-m", "prefixsim", "run", "--cache-only", *args, "-o", "out"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    assert_one_line_error(proc.stderr, expected)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(files)


def test_trace_inspect_bad_line_exits_2(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text(jsonl(GOOD, {**GOOD, "hash_ids": "1,2"}), encoding="utf-8")
    result = CliRunner().invoke(app, ["trace", "inspect", str(path), "--json"])
    assert result.exit_code == 2
    assert_one_line_error(result.stderr, ["t.jsonl:2", "hash_ids"])


@pytest.mark.parametrize(("given", "meant"), [
    ("rate_scale", ["load_rate_scale"]),          # held in a longer name
    ("p99_ttft", ["p99_ttft_ms"]),                 # the unit left out
    ("TTFT-P99-MS", ["p99_ttft_ms"]),              # words in another order, case, separator
    ("hitrate", ["cache_token_hit_rate", "cache_request_hit_rate"]),  # separators aside
    ("evictons", ["cache_evictions"]),             # a typo: the closest spelling
    ("zzz", []),
])
def test_a_plot_column_guess(given, meant):
    from prefixsim.cli.report import column_guesses
    columns = ["run_id", "load_rate_scale", "p50_ttft_ms", "p99_ttft_ms", "p99_tpot_ms",
               "cache_request_hit_rate", "cache_token_hit_rate", "cache_evictions"]
    assert column_guesses(given, columns) == meant
