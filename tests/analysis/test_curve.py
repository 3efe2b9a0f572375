"""Capacity curves: the one-pass LRU stack-distance curve equals separate Part A replays."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
from click.testing import CliRunner
from fakes import pick_session
from hypothesis import given, settings
from hypothesis import strategies as st

from prefixsim.analysis.curve import (
    _sampled,
    lru_curve,
    lru_curve_sampled,
    replay_curve,
    stack_distances,
)
from prefixsim.cli import app
from prefixsim.cli.curve import parse_capacities
from prefixsim.errors import InputError
from prefixsim.trace import Request
from prefixsim.trace.generate import generate, load_preset


def trace(seed: int, num_requests: int, page: int, partial_tails: bool) -> list[Request]:
    """Sessions over shared roots; with `partial_tails`, each prompt ends in a private
    partial page (an id used once), so every id still has one token count."""
    rng = random.Random(seed)
    next_id = 1000
    roots = [list(range(i * 3, i * 3 + rng.randint(1, 3))) for i in range(4)]
    sessions: list[list[int]] = []
    out = []
    for i in range(num_requests):
        path = pick_session(rng, sessions, roots, 0.5)
        grow = rng.randint(0, 3)
        path.extend(range(next_id, next_id + grow))
        next_id += grow
        ids, tokens = list(path), len(path) * page
        if partial_tails:
            ids.append(next_id)
            next_id += 1
            tokens += rng.randint(1, page - 1)
        out.append(Request(i, float(i), tokens, 1, tuple(ids), page))
    return out


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), page=st.sampled_from([1, 3, 4]),
       partial=st.booleans(), num=st.integers(1, 60))
def test_one_pass_curve_equals_replays(seed, page, partial, num):
    requests = trace(seed, num, page, partial and page > 1)
    total = sum(r.input_tokens for r in requests)
    capacities = sorted({0, 1, page, 2 * page + 1, total // 7, total // 3, total, total + 5})
    distances = stack_distances(requests)
    assert distances.exact
    curve = [p.hit_tokens for p in lru_curve(requests, capacities)]
    assert curve == [p.hit_tokens for p in replay_curve(requests, capacities)]


def test_known_answer_stack_distances():
    """P=2. r0 [1,2] (4 tokens), r1 [3] (2), r2 [1,2] (4).
    At r2: stack top->bottom = 3, 1, 2 (r0's page 1 above its deeper page 2), so
    D(1) = 2 + 2 = 4 and D(2) = 6. Capacity 5: page 1 hits (2 tokens); 6: both, capped
    at L-1 = 3. First uses are inf."""
    reqs = [Request(0, 0, 4, 1, (1, 2), 2), Request(1, 1, 2, 1, (3,), 2),
            Request(2, 2, 4, 1, (1, 2), 2)]
    d = stack_distances(reqs).distances
    assert list(d[:3]) == [float("inf")] * 3 and list(d[3:]) == [4.0, 6.0]
    assert [p.hit_tokens for p in lru_curve(reqs, [3, 5, 6])] == [0, 2, 3]


def test_size_conflict_is_reported_inexact():
    reqs = [Request(0, 0, 3, 1, (1,), 4), Request(1, 1, 8, 1, (1, 2), 4)]
    assert not stack_distances(reqs).exact


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), page=st.sampled_from([1, 4]), num=st.integers(1, 80))
def test_sampled_at_rate_one_is_the_exact_curve(seed, page, num):
    """Rate 1 samples every id: no adjustment, distances unscaled, same hits and query."""
    requests = trace(seed, num, page, False)
    total = sum(r.input_tokens for r in requests)
    caps = sorted({0, page, 10, total // 5, total // 2, total})
    assert lru_curve_sampled(requests, caps, 1.0) == lru_curve(requests, caps)


def test_sample_rate_checked():
    with pytest.raises(ValueError):
        lru_curve_sampled(trace(3, 10, 4, False), [10], 0.0)


def test_page_id_zero_is_not_always_sampled():
    """The old mix (a bare multiply) hashed id 0 to 0: the page that begins every request
    in Mooncake was in every sample, so 1% sampling read a hit rate of 0.88 (true 0.04)."""
    kept = [seed for seed in range(200) if _sampled(0, int(0.1 * 2**64), seed)]
    assert 5 <= len(kept) <= 40  # about 10% of seeds keep id 0
    assert sum(_sampled(i, int(0.1 * 2**64)) for i in range(10_000)) in range(900, 1100)


def hot_root_trace(seed: int, num_requests: int, page: int = 16) -> list[Request]:
    """Every request starts with shared page 0 (a system prompt, the hottest page), then
    its own session's growing private pages (many independent sessions, ids never shared)."""
    rng = random.Random(seed)
    next_id = 1
    sessions: list[list[int]] = []
    out = []
    for i in range(num_requests):
        if sessions and rng.random() < 0.6:
            path = rng.choice(sessions[-200:])
        else:
            path = [0]
            sessions.append(path)
        grow = rng.randint(1, 6)
        path.extend(range(next_id, next_id + grow))
        next_id += grow
        out.append(Request(i, float(i), len(path) * page, 1, tuple(path), page))
    return out


# Stated tolerance of the sampled curve on traces of many independent sessions (several
# thousand distinct ids sampled): mean absolute error of the hit rate over log-spaced
# capacities <= 0.02 at rate 0.1 (bench/capacity_curve.py measures Mooncake and presets).
SAMPLED_MAE = 0.02


@pytest.mark.parametrize("seed", [0, 1])
def test_sampled_curve_within_tolerance_with_a_hot_shared_root(seed):
    requests = hot_root_trace(seed, 6000)
    total = sum(r.input_tokens for r in requests)
    caps = [int(c) for c in np.geomspace(total / 1000, total, 12)]
    exact = np.array([p.token_hit_rate for p in lru_curve(requests, caps)])
    for sample_seed in range(3):
        est = np.array([p.token_hit_rate
                        for p in lru_curve_sampled(requests, caps, 0.1, sample_seed)])
        assert np.abs(est - exact).mean() <= SAMPLED_MAE, (exact, est)


def test_sampled_curve_within_tolerance_on_the_chat_preset():
    requests = generate(load_preset("chat"), 4000, seed=0)
    assert len({r.session_id for r in requests}) > 1000
    total = sum(r.input_tokens for r in requests)
    caps = [int(c) for c in np.geomspace(total / 1000, total, 12)]
    exact = np.array([p.token_hit_rate for p in lru_curve(requests, caps)])
    est = np.array([p.token_hit_rate for p in lru_curve_sampled(requests, caps, 0.1)])
    assert np.abs(est - exact).mean() <= SAMPLED_MAE, (exact, est)


def test_parse_capacities():
    assert parse_capacities("10,1e3, 20") == [10, 20, 1000]
    assert parse_capacities("1:100:3") == [1, 10, 100]
    with pytest.raises(InputError):
        parse_capacities("a,b")
    assert len(parse_capacities("1e3:1e9:1000")) == 1000


@pytest.mark.parametrize("text", ["1e3:1e6:100000000", ",".join(str(n) for n in range(1001))])
def test_a_curve_of_more_than_a_thousand_capacities_is_refused_before_any_is_built(text):
    """1e3:1e6:1e8 built 10^8 capacities (never finished; 10^6 took 10 s and 330 MB)."""
    with pytest.raises(InputError, match="at most 1,000 capacities in one curve") as caught:
        parse_capacities(text)
    assert caught.value.field == "--capacities"


def test_curve_cli(tmp_path):
    path = tmp_path / "t.jsonl"
    rows = [{"timestamp": i * 100, "input_length": 1024, "output_length": 5,
             "hash_ids": [0, i % 3 + 1]} for i in range(20)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    runner = CliRunner()
    out = runner.invoke(app, ["curve", "--trace", str(path), "--capacities", "512,1024,4096",
                              "--json"])
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)
    assert data["method"] == "stack"
    # 20 prompts of 1,024 tokens over [0, 1..3]: page 0 hits from the 2nd, page i%3+1 from
    # the 5th (i >= 3): 19 * 512 + 17 * 511 (capped at L - 1) hit tokens of 20,480
    assert data["unbounded_token_hit_rate"] == pytest.approx((19 * 512 + 17 * 511) / 20480)
    lfu = runner.invoke(app, ["curve", "--trace", str(path), "--policy", "lfu",
                              "--capacities", "512,1024,4096", "--json"])
    assert lfu.exit_code == 0, lfu.output
    bad = runner.invoke(app, ["curve", "--trace", str(path), "--capacities", "x"])
    assert bad.exit_code == 2


def test_curve_cli_methods_agree_and_write_csv(tmp_path):
    path = tmp_path / "t.jsonl"
    rows = [{"timestamp": i * 100, "input_length": 1500, "output_length": 5,
             "hash_ids": [i % 2, 10 + i % 4, 100 + i]} for i in range(30)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    runner = CliRunner()
    base = ["curve", "--trace", str(path), "--capacities", "512,2048,8192", "--json"]
    stack = json.loads(runner.invoke(app, base).output)
    replay = json.loads(runner.invoke(app, [*base, "--replay"]).output)
    shards = json.loads(runner.invoke(app, [*base, "--sample-rate", "1"]).output)
    assert [p["hit_tokens"] for p in stack["points"]] == [
        p["hit_tokens"] for p in replay["points"]]
    assert replay["method"] == "replay" and shards["method"] == "shards@1"
    assert all(abs(a["token_hit_rate"] - b["token_hit_rate"]) < 0.01
               for a, b in zip(stack["points"], shards["points"], strict=True))
    csv = tmp_path / "c.csv"
    out = runner.invoke(app, ["curve", "--trace", str(path), "--capacities", "1:4096:3",
                              "-o", str(csv)])
    assert out.exit_code == 0 and "method stack" in out.output
    assert csv.read_text().splitlines()[0] == "capacity_tokens,hit_tokens,token_hit_rate,policy"
    assert len(csv.read_text().splitlines()) == 4
    bad = runner.invoke(app, [*base, "--policy", "lfu", "--sample-rate", "0.5"])
    assert bad.exit_code == 2


def test_sampled_curve_refuses_an_empty_sample():
    """20 requests with no reuse sampled at 0.001: no id is kept, and an empty sample once
    read as ~100% hits at every capacity (the exact curve is 0). It is an input error now."""
    requests = [Request(i, float(i), 8, 1, (1000 + i,), 8) for i in range(20)]
    with pytest.raises(InputError, match="no page id was sampled"):
        lru_curve_sampled(requests, [8, 80], rate=0.001)


def test_curve_of_several_policies_in_one_call_with_the_figure(tmp_path):
    """`--policy lru,s3fifo,belady`: one curve per policy in the order given, each what a
    one-policy call gives (LRU by the stack pass, the others by replays); the CSV holds
    every (policy, capacity) row; `--plot` draws the miss-ratio curve, whose lines are
    1 - hit rate and whose floor is 1 - the unbounded hit rate; Belady is never above any
    policy's hit rate."""
    path = tmp_path / "t.jsonl"
    rows = [{"timestamp": i * 10, "input_length": 1500, "output_length": 5,
             "hash_ids": [i % 2, 10 + i % 4, 100 + i % 8]} for i in range(40)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    runner = CliRunner()
    base = ["curve", "--trace", str(path), "--capacities", "512,2048,8192"]
    multi = json.loads(runner.invoke(app, [*base, "--policy", "lru,s3fifo,belady",
                                           "--json"]).output)
    assert [c["policy"] for c in multi["curves"]] == ["lru", "s3fifo", "belady"]
    assert [c["method"] for c in multi["curves"]] == ["stack", "replay", "replay"]
    assert "policy" not in multi  # the one-policy keys only for one policy
    for curve in multi["curves"]:
        alone = json.loads(runner.invoke(app, [*base, "--policy", curve["policy"],
                                               "--json"]).output)
        assert alone["points"] == curve["points"] and alone["policy"] == curve["policy"]
    by_policy = {c["policy"]: c["points"] for c in multi["curves"]}
    for i in range(3):
        assert by_policy["belady"][i]["hit_tokens"] >= max(
            by_policy[p][i]["hit_tokens"] for p in ("lru", "s3fifo"))
    csv, png = tmp_path / "c.csv", tmp_path / "c.png"
    out = runner.invoke(app, [*base, "--policy", "lru,s3fifo", "-o", str(csv),
                              "--plot", str(png)])
    assert out.exit_code == 0, out.output
    lines = csv.read_text().splitlines()
    assert len(lines) == 1 + 2 * 3 and lines[1].endswith(",lru") and lines[4].endswith(",s3fifo")
    assert png.read_bytes().startswith(b"\x89PNG")
    bad = runner.invoke(app, [*base, "--policy", "lru,nope"])
    assert bad.exit_code == 2 and "--policy: unknown policy 'nope'" in bad.output
    bad = runner.invoke(app, [*base, "--policy", "lru,s3fifo", "--sample-rate", "0.5"])
    assert bad.exit_code == 2 and "--sample-rate" in bad.output
    # an exact replay and a sampled estimate at once; a bad rate refused before the trace's
    # capacities note (two lines on stderr)
    bad = runner.invoke(app, [*base, "--sample-rate", "0.5", "--replay"])
    assert bad.exit_code == 2 and bad.output.startswith("prefixsim: error: --replay: ")
    bad = runner.invoke(app, ["curve", str(path), "--sample-rate", "0"])
    assert bad.exit_code == 2 and bad.output == \
        "prefixsim: error: --sample-rate: needs --policy lru (alone) and 0 < rate <= 1\n"


def test_miss_ratio_figure_known_answer():
    """Two points of one policy, hit rates 0.25 and 0.75: the line is at 0.75 and 0.25;
    an unbounded hit rate of 0.8 draws the floor at 0.2; belady is dashed black."""
    from prefixsim.analysis.curve import CurvePoint
    from prefixsim.analysis.policy_curves import PolicyCurve
    from prefixsim.report.curves import miss_ratio_figure

    curves = [PolicyCurve("lru", "stack", [CurvePoint(10, 1, 4), CurvePoint(100, 3, 4)]),
              PolicyCurve("belady", "replay", [CurvePoint(10, 2, 4), CurvePoint(100, 3, 4)])]
    fig = miss_ratio_figure(curves, 0.8, "t")
    lines = {line.get_label(): line for line in fig.axes[0].get_lines()}
    np.testing.assert_allclose(lines["lru"].get_ydata(), [0.75, 0.25])
    offline = lines["Belady (offline bound)"]
    assert offline.get_linestyle() == "--" and offline.get_color() == "black"
    np.testing.assert_allclose(lines["unbounded cache (first uses only)"].get_ydata(), 0.2)
    assert fig.axes[0].get_xscale() == "log"
    assert fig.axes[0].get_ylim() == (0.0, 1.0)  # 100% ticked: the curves start near it
    assert "100% - hit rate" in fig.axes[0].get_ylabel()
    from prefixsim.report.figures import finish_figure

    finish_figure(fig)
    fig.canvas.draw()
    label = fig.axes[0].yaxis.label.get_window_extent()
    assert fig.bbox.y0 <= label.y0 and label.y1 <= fig.bbox.y1  # the label is not cut
    sampled = miss_ratio_figure([PolicyCurve("lru", "shards@0.01", curves[0].points)], 0.8, "t")
    assert [line.get_label() for line in sampled.axes[0].get_lines()][0] == \
        "lru (estimate from 1% of page ids)"  # `[shards@0.01]` was jargon
