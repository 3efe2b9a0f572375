"""How far an imported profile generalises (docs/cost-models.md "Imported GPU profiles",
"Block hold-outs"): whole blocks held out (a top range, whole attention rows, a whole
model), the borrow rule's leave-one-model-out error in every borrowed profile, and the
recorded upstream commit and path of every source file against the data's README."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from vidur_excerpt import write_vidur_excerpt

from prefixsim.costmodel.profile import load_profile, shipped_profiles
from prefixsim.presets import get_model
from prefixsim.profiles.vidur_blocks import BLOCK_CLASSES, top_range, whole_rows
from prefixsim.profiles.vidur_import import _dims, import_vidur
from prefixsim.profiles.vidur_split import ImportOptions, measure

README = Path(__file__).resolve().parents[3] / "shared" / "gpu-measurements" / "README.md"
IMPORTED = sorted(n for n in shipped_profiles() if not n.startswith("cpu-"))
A100_8B = ImportOptions("llama-3.1-8b", "a100-80g", 1)


@pytest.fixture(scope="module")
def excerpt(tmp_path_factory):
    return write_vidur_excerpt(tmp_path_factory.mktemp("vidur"))


@pytest.fixture(scope="module")
def measured(excerpt):
    spec = get_model(A100_8B.model)
    return measure(excerpt, A100_8B, spec, _dims(spec, 1))


def test_top_range_holds_out_the_largest_of_every_axis(measured):
    split = top_range(measured)
    assert split.tokens_test.min() > split.tokens_train.max()
    assert split.tokens_test.max() == max(measured.tokens_train.max(), measured.tokens_test.max())
    for frame_train, frame_test, key in ((split.prefill_train, split.prefill_test,
                                          "prefill_chunk_size"),
                                         (split.decode_train, split.decode_test, "batch_size")):
        for row, held in frame_test.groupby(key):
            kept = frame_train[frame_train[key] == row]["kv_cache_size"]
            assert held["kv_cache_size"].min() > kept.max()
    for tables in split.collectives.values():
        for train, test, _ in tables.values():
            assert len(test) == 0 or test.index.min() > train.index.max()


def test_whole_rows_hold_out_whole_rows_and_leave_the_random_split(measured):
    split = whole_rows(measured, seed=0)
    for train, test, key in ((split.decode_train, split.decode_test, "batch_size"),
                             (split.prefill_train, split.prefill_test, "prefill_chunk_size")):
        assert not set(test[key]) & set(train[key])
    assert np.array_equal(split.tokens_test, measured.tokens_test)


def test_block_errors_are_recorded(excerpt):
    profile = import_vidur(excerpt, A100_8B, "2026-01-01")
    blocks = profile.heldout_blocks
    assert set(blocks["top_range"]) <= set(BLOCK_CLASSES["top_range"])
    assert {"gemm", "step"} <= set(blocks["top_range"])
    assert set(blocks["model"]) == {"gemm"}  # Llama-2-7B is the other A100 model
    assert all(e.n >= 1 for kind in blocks.values() for e in kind.values())


@pytest.mark.parametrize("name", [n for n in IMPORTED if n.startswith("h100")])
def test_every_borrowed_profile_carries_the_borrow_rule_error(name):
    profile = load_profile(name)
    assert profile.source.borrow == "a100-80g"
    assert {"gemm", "elementwise"} <= set(profile.heldout_borrow_rule)


@pytest.mark.parametrize("name", IMPORTED)
def test_every_shipped_profile_records_blocks(name):
    profile = load_profile(name)
    borrowed_layers = any(b.part == "gemm, elementwise" for b in profile.source.borrowed)
    kinds = {"top_range", "whole_rows"} | (set() if borrowed_layers else {"model"})
    assert set(profile.heldout_blocks) == kinds


def _pattern(local: str) -> re.Pattern:
    """`a/{x,y}/<name>/f.csv` as a regular expression of local paths."""
    pattern = re.escape(local).replace("\\<", "<").replace("\\>", ">")
    pattern = re.sub(r"\\\{([^}]*)\\\}", lambda g: "(" + g.group(1).replace(",", "|") + ")",
                     pattern)
    return re.compile(re.sub(r"<[a-z]+>", "[^/]+", pattern) + "$")


def _readme_sources() -> tuple[str, list[tuple[re.Pattern, str, str]]]:
    """(the default commit, [(local path pattern, commit, upstream path)]) from the README."""
    text = README.read_text()
    default = re.search(r"at commit ([0-9a-f]{40})", text).group(1)
    older = re.search(r"older commit of the same repo \(([0-9a-f]{7,40})", text).group(1)
    rows = []
    for line in text.splitlines():
        if not line.startswith("| `profiling/"):
            continue
        first, *siblings = re.findall(r"`([^`]+)`", line.split("|")[1])
        folder = first.rsplit("/", 1)[0]
        if "older commit" in line:
            upstream = re.findall(r"`(data/profiling/[^`]+)`", line)[0]
            commit = (re.findall(r"older commit[^(]*\(([0-9a-f]{7,40})", line) or [older])[0]
        else:
            upstream, commit = "", default
        for local in (first, *(f"{folder}/{name}" for name in siblings)):
            rows.append((_pattern(local.removeprefix("profiling/")), commit, upstream))
    return default, rows


@pytest.mark.skipif(not README.is_file(), reason=f"no {README}")
@pytest.mark.parametrize("name", IMPORTED)
def test_provenance_names_the_readme_commit_and_path_of_every_file(name):
    _, rows = _readme_sources()
    for file in load_profile(name).source.files:
        matches = [(c, u) for p, c, u in rows if p.match(file.path)]
        assert matches, file.path
        commit, upstream = matches[0]
        assert file.upstream_commit == commit, file.path
        assert file.upstream_path == (upstream or f"data/profiling/{file.path}"), file.path
