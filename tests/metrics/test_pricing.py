"""Prompt-caching economics (docs/cache-semantics.md R17): hand-worked bills per provider preset."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prefixsim.config import CacheConfig, load_config
from prefixsim.errors import InputError
from prefixsim.metrics.pricing import (
    PRESET_SOURCES,
    PRESETS,
    Pricing,
    billed_tokens,
    load_pricing,
    prefill_savings,
    prefill_time_s,
    prefill_times_s,
    pricing_summary,
)
from prefixsim.pipeline import simulate
from prefixsim.pipeline.build import build_rules, request_ttls
from prefixsim.trace import Request


def frame(rows):
    return pd.DataFrame(rows, columns=["input_tokens", "cached_tokens", "output_tokens"])


def test_anthropic_known_answer():
    """L=2000, hit 1500, out 100: read 1500, write 500 at 3.75, output 100 at 15:
    (500*3.75 + 1500*0.30 + 100*15) / 1e6 = 3825e-6; no cache 2000*3 + 1500 = 7500e-6.
    A second prompt of 800 tokens is under the 1,024 minimum: all uncached input."""
    s = pricing_summary(frame([(2000, 1500, 100), (800, 500, 0)]), PRESETS["anthropic"], None)
    assert s["cost_total_usd"] == pytest.approx((3825 + 800 * 3) / 1e6)
    assert s["cost_no_cache_usd"] == pytest.approx((7500 + 800 * 3) / 1e6)
    assert (s["cost_cache_read_tokens"], s["cost_cache_write_tokens"]) == (1500, 500)


def test_anthropic_one_hour_writes_cost_double():
    s = pricing_summary(frame([(2000, 1500, 0)]), PRESETS["anthropic"], 3600.0)
    assert s["cost_total_usd"] == pytest.approx((500 * 6.0 + 1500 * 0.30) / 1e6)


def test_openai_reads_in_128_token_steps_from_1024():
    """Hit 1500 -> 1024 + 3*128 = 1408 read; 592 at the input price; hit 1000 -> 0."""
    read, write = billed_tokens(np.array([2000, 2000]), np.array([1500, 1000]),
                                PRESETS["openai"])
    assert list(read) == [1408, 0] and list(write) == [592, 2000]
    s = pricing_summary(frame([(2000, 1500, 100)]), PRESETS["openai"], None)
    assert s["cost_total_usd"] == pytest.approx((592 * 2 + 1408 * 0.5 + 100 * 8) / 1e6)


def test_the_minimum_and_the_step_are_inclusive():
    """OpenAI (1,024 then 128-token steps): a prompt of exactly 1,024 tokens is cacheable
    (written whole, nothing read at a hit of 1,023); 1,023 tokens are neither read nor
    written; a hit of exactly 1,024 is read whole, 1,151 reads 1,024 and 1,152 all of it. A
    price list without a minimum caches a prompt of one token, not an empty one."""
    read, write = billed_tokens(np.array([1024, 1023, 2000, 2000, 2000]),
                                np.array([1023, 1022, 1024, 1151, 1152]), PRESETS["openai"])
    assert read.tolist() == [0, 0, 1024, 1024, 1152]
    assert write.tolist() == [1024, 0, 976, 976, 848]
    anywhere = Pricing("flat", 1.0, 1.0, 0.1, 1.0, 1.0, 0, 1)
    read, write = billed_tokens(np.array([1, 0, 6]), np.array([0, 0, 5]), anywhere)
    assert read.tolist() == [0, 0, 5] and write.tolist() == [1, 0, 1]


def test_a_ttl_of_five_minutes_writes_at_the_five_minute_price():
    """R17: the 1-hour write price applies past 5 minutes, so 300 s is the 5-minute class
    and 301 s the 1-hour one; no TTL at all is priced as 5 minutes. One TTL per request
    (classes) prices each request's writes at its own."""
    rows = frame([(2000, 1500, 0)])
    for ttl_s, price in ((300.0, 3.75), (301.0, 6.0), (None, 3.75)):
        s = pricing_summary(rows, PRESETS["anthropic"], ttl_s)
        assert s["cost_total_usd"] == pytest.approx((500 * price + 1500 * 0.30) / 1e6,
                                                    rel=1e-12)
    s = pricing_summary(frame([(2000, 1500, 0)] * 3), PRESETS["anthropic"],
                        [300.0, 301.0, None])
    assert s["cost_total_usd"] == pytest.approx(
        (500 * (3.75 + 6.0 + 3.75) + 3 * 1500 * 0.30) / 1e6, rel=1e-12)


def test_the_bill_to_the_cent_and_what_the_cache_saved():
    """Sonnet 4, L=2000, hit 1500, out 100 and L=800 under the minimum, hit 500: total
    (500*3.75 + 1500*0.30 + 100*15 + 800*3) / 1e6, without a cache (2800*3 + 100*15) / 1e6,
    saved the difference; token counts as billed. An empty run costs nothing."""
    s = pricing_summary(frame([(2000, 1500, 100), (800, 500, 0)]), PRESETS["anthropic"], None)
    total = (500 * 3.75 + 1500 * 0.30 + 100 * 15 + 800 * 3) / 1e6
    no_cache = (2800 * 3 + 100 * 15) / 1e6
    assert s["cost_total_usd"] == pytest.approx(total, rel=1e-12)
    assert s["cost_no_cache_usd"] == pytest.approx(no_cache, rel=1e-12)
    assert s["cost_saved_usd"] == pytest.approx(no_cache - total, rel=1e-12)
    assert (s["cost_cache_read_tokens"], s["cost_cache_write_tokens"],
            s["cost_uncached_input_tokens"]) == (1500, 500, 800)
    empty = pricing_summary(frame([]), PRESETS["anthropic"], None)
    assert (empty["cost_total_usd"], empty["cost_no_cache_usd"], empty["cost_saved_usd"],
            empty["cost_uncached_input_tokens"]) == (0.0, 0.0, 0.0, 0)


def test_pricing_file(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text("input_usd_per_mtok: 1\noutput_usd_per_mtok: 2\n"
                    "cache_read_usd_per_mtok: 0.1\ncache_write_usd_per_mtok: 1\n"
                    "cache_write_1h_usd_per_mtok: 1\n")
    pricing = load_pricing(str(path))
    assert pricing.name == "p" and pricing.min_cacheable_tokens == 0
    bad = tmp_path / "bad.yaml"
    bad.write_text("input_usd_per_mtok: 1\nsurprise: 2\n")
    with pytest.raises(InputError, match="surprise"):
        load_pricing(str(bad))
    with pytest.raises(InputError, match="presets"):
        load_pricing("nowhere")


PRICE_LINES = ("input_usd_per_mtok: 1\noutput_usd_per_mtok: 2\ncache_read_usd_per_mtok: 0.1\n"
               "cache_write_usd_per_mtok: 1\ncache_write_1h_usd_per_mtok: 1\n")


FINITE = "must be a finite number in [0, 1e+06], got "
INTEGER = "must be an integer in [0, 9.22337e+18], got "


@pytest.mark.parametrize(("text", "field", "message"), [
    ("- 1\n- 2\n", None, "expected a mapping of pricing fields"),
    (PRICE_LINES + "surprise: 2\n", "surprise", "unknown key"),
    ("input_usd_per_mtok: 1\n", None,
     "Pricing.__init__() missing 4 required positional arguments: 'output_usd_per_mtok', "
     "'cache_read_usd_per_mtok', 'cache_write_usd_per_mtok', and "
     "'cache_write_1h_usd_per_mtok'"),
    (PRICE_LINES + "cache_step_tokens: 0\n", "cache_step_tokens", "must be >= 1"),
    (PRICE_LINES.replace("0.1", "1000000.5"), "cache_read_usd_per_mtok", FINITE + "1000000.5"),
    (PRICE_LINES.replace("0.1", "-0.1"), "cache_read_usd_per_mtok", FINITE + "-0.1"),
    (PRICE_LINES.replace("0.1", "true"), "cache_read_usd_per_mtok", FINITE + "True"),
    (PRICE_LINES.replace("0.1", ".nan"), "cache_read_usd_per_mtok", FINITE + "nan"),
    (PRICE_LINES + "min_cacheable_tokens: 1.5\n", "min_cacheable_tokens", INTEGER + "1.5"),
    (PRICE_LINES + f"min_cacheable_tokens: {2**63}\n", "min_cacheable_tokens",
     INTEGER + "9223372036854775808"),
])
def test_a_bad_pricing_file_names_its_file_and_field(tmp_path, text, field, message):
    """Each refusal of a price file names the file, the field where there is one, and what
    was wrong (docs/input-rules.md I4), as the one-line error prints it."""
    path = tmp_path / "p.yaml"
    path.write_text(text)
    with pytest.raises(InputError) as caught:
        load_pricing(str(path))
    error = caught.value
    assert (error.file, error.field, error.message) == (str(path), field, message)


def test_a_pricing_file_at_the_limits_is_taken(tmp_path):
    """The largest price (1e6 USD per million tokens) and token count (2**63 - 1) pass,
    integers pass where prices are asked, and the name defaults to the file's stem."""
    path = tmp_path / "edge.yaml"
    path.write_text(PRICE_LINES.replace("0.1", "1000000") + f"min_cacheable_tokens: {2**63 - 1}\n")
    pricing = load_pricing(str(path))
    assert pricing.cache_read_usd_per_mtok == 1e6
    assert pricing.min_cacheable_tokens == 2**63 - 1 and pricing.name == "edge"
    with pytest.raises(InputError) as caught:
        load_pricing(str(tmp_path / "absent.yaml"))
    assert caught.value.field == "cache.pricing"
    assert "presets: anthropic, anthropic-haiku, openai, or a YAML file" in caught.value.message


def test_every_preset_says_where_and_when_its_prices_were_taken(tmp_path):
    """Each preset names its model, a YYYY-MM month and the provider's page; the summary
    quotes them, and a price file (even one with a preset's numbers) is not passed off as
    a dated preset."""
    assert set(PRESET_SOURCES) == set(PRESETS)
    for source in PRESET_SOURCES.values():
        assert source.url.startswith("https://") and len(source.as_of) == 7
        assert source.as_of[4] == "-" and 2024 <= int(source.as_of[:4]) <= 2030
    s = pricing_summary(frame([(2000, 0, 0)]), PRESETS["openai"], None)
    assert s["cost_prices_as_of"] == ("GPT-4.1 list prices of 2025-06 "
                                      "(https://openai.com/api/pricing/)")
    path = tmp_path / "anthropic.yaml"
    path.write_text("input_usd_per_mtok: 1\noutput_usd_per_mtok: 2\n"
                    "cache_read_usd_per_mtok: 0.1\ncache_write_usd_per_mtok: 1\n"
                    "cache_write_1h_usd_per_mtok: 1\n")
    s = pricing_summary(frame([(2000, 0, 0)]), load_pricing(str(path)), None)
    assert s["cost_prices_as_of"] == "user-supplied price list"


def test_caching_costs_less_on_a_reuse_heavy_trace():
    """A 4,096-token shared prefix with 512 new tokens per request, 50 requests."""
    trace = [Request(i, float(i), 4096 + 512, 50, (1, 2, 3, 4, 1000 + i), 1024)
             for i in range(50)]
    config = load_config(overrides={"cache_only": True, "cache.pricing": "anthropic"})
    summary = simulate(config, trace).summary
    assert summary["cost_total_usd"] < 0.5 * summary["cost_no_cache_usd"]


class LinearCost:
    """A fake cost model: 1 ms per new token + 0.01 ms per cached token + 5 ms per step."""

    def step_time_s(self, batch):
        return sum(c.new_tokens * 1e-3 + c.cached_tokens * 1e-5 for c in batch.prefills) + 5e-3


def test_prefill_savings_known_answer():
    """L=1000, hit 600, chunks of 256. With cache: 400 new in chunks 256 + 144 after 600 and
    856 cached: 0.4 + (600 + 856) * 1e-5 + 2 * 5e-3. Without: 1000 in 4 chunks (256, 256,
    256, 232) after 0, 256, 512, 768: 1.0 + 1536e-5 + 4 * 5e-3. Two GPUs double both."""
    s = prefill_savings(frame([(1000, 600, 1)]), LinearCost(), 2, 256)
    with_cache = 0.4 + 1456e-5 + 0.01
    without = 1.0 + 1536e-5 + 0.02
    assert s["prefill_gpu_s"] == pytest.approx(2 * with_cache)
    assert s["prefill_gpu_s_no_cache"] == pytest.approx(2 * without)
    assert s["prefill_gpu_s_saved"] == pytest.approx(2 * (without - with_cache))


class CountingCost:
    """A cost model of awkward floats (sums round differently in another order) that counts
    its calls."""

    def __init__(self):
        self.calls = 0

    def step_time_s(self, batch):
        self.calls += 1
        chunk = batch.prefills[0]
        return 0.1 + chunk.new_tokens * 1.7e-3 / 3 + chunk.cached_tokens ** 1.1 * 1e-7


def test_prefill_savings_times_each_chunk_once_with_the_same_sums():
    """The memo of chunk times gives bit for bit the per-request loop's sums, and times each
    (chunk, context) once: without a cache every prompt's first chunk is the same."""
    rng = np.random.default_rng(3)
    lengths = rng.integers(1, 3000, 400)
    cached = (rng.integers(0, 4, 400) * 256).clip(max=lengths - 1)
    requests = frame(list(zip(lengths, cached, np.ones(400, dtype=int), strict=True)))
    memo_cost = CountingCost()
    got = prefill_savings(requests, memo_cost, 1, 512)
    plain_cost = CountingCost()

    def looped(new, done):
        return sum((prefill_time_s(plain_cost, int(n), int(c), 512)
                    for n, c in zip(new, done, strict=True)), 0.0)

    assert got["prefill_gpu_s"] == looped(lengths - cached, cached)
    assert got["prefill_gpu_s_no_cache"] == looped(lengths, np.zeros_like(lengths))
    chunks = {(min(512, n - d), c + d) for n, c in zip(lengths - cached, cached, strict=True)
              for d in range(0, n, 512)}
    chunks |= {(min(512, n - d), d) for n in lengths for d in range(0, n, 512)}
    assert memo_cost.calls == len(chunks) < plain_cost.calls


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5000), st.integers(0, 5000)), max_size=30),
       st.sampled_from([1, 7, 256, 512]), st.booleans())
def test_prefill_times_are_each_requests_own_loop(pairs, chunk, huge):
    """Many requests' prefill times at once are bit for bit each request's own chunk loop
    (`prefill_time_s`, awkward floats), also with no new tokens and with contexts so large
    that a chunk's (size, context) no longer fits one int64 key."""
    new = np.array([n for n, _ in pairs], dtype=np.int64)
    cached = np.array([c for _, c in pairs], dtype=np.int64) + (2**61 if huge else 0)
    got = prefill_times_s(CountingCost(), new, cached, chunk)
    want = [prefill_time_s(CountingCost(), int(n), int(c), chunk)
            for n, c in zip(new, cached, strict=True)]
    assert got.dtype == np.float64 and got.tolist() == want


def test_a_class_ttl_of_zero_is_not_the_cache_ttl():
    """Writes are priced by each request's TTL: a class with ttl_s 0 keeps 0 (a falsy value
    once fell through to the cache's 3600 s, billed as 1-hour writes)."""
    config = CacheConfig(ttl_s=3600, classes=[
        {"name": "none", "ttl_s": 0, "min_input_tokens": 100},
        {"name": "default", "min_input_tokens": 10},
    ])
    requests = [Request(0, 0.0, 200, 1, (1,), 512), Request(1, 1.0, 50, 1, (2,), 512)]
    assert request_ttls(config, build_rules(config, seed=0), requests) == [0, 3600]
    assert request_ttls(config, None, requests) == [3600, 3600]


def test_one_memo_over_many_prompts_is_keyed_by_chunk_and_context():
    """`prefill_time_s` calls that share a memo get each prompt's own chunk times (a chunk
    of 256 after 256 cached tokens is not one after 768), and the cost model is asked once
    per distinct (chunk, context): 768 new from 0 (contexts 0, 256, 512), 512 from 512
    (512 asked already, 768), 256 from 256 (asked already): 4 times."""
    memo: dict[tuple[int, int], float] = {}
    shared = CountingCost()
    calls = [(768, 0), (512, 512), (256, 256)]
    got = [prefill_time_s(shared, new, cached, 256, memo) for new, cached in calls]
    assert got == [prefill_time_s(CountingCost(), new, cached, 256) for new, cached in calls]
    assert sorted(memo) == [(256, 0), (256, 256), (256, 512), (256, 768)]
    assert shared.calls == 4


def test_an_empty_run_saves_no_prefill():
    s = prefill_savings(frame([]), LinearCost(), 2, 256)
    assert s == {"prefill_gpu_s": 0.0, "prefill_gpu_s_no_cache": 0.0,
                 "prefill_gpu_s_saved": 0.0}
