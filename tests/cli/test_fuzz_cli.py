"""Fuzzing the command line (docs/input-rules.md I1): valid files of every trace format,
valid run configs and valid sweep specs, mutated byte by byte and token by token by
hypothesis, must give exit 0, or exit 2 with exactly one `prefixsim: error:` line: never a
traceback, never another exit code, never a hang (each example runs under a 20 s alarm, so a
loop fails the test instead of stalling the suite). tests/trace/test_reader_fuzz.py mutates
single fields of records; this suite mutates whole files and reaches the config and spec
readers too. About 30 s on 2 cores."""

from __future__ import annotations

import contextlib
import json
import signal
from collections.abc import Callable, Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from prefixsim.cli import app

REPO = Path(__file__).parents[2]
DEMO_LINES = (REPO / "traces" / "demo_chat.jsonl").read_text().splitlines()[:12]
ALARM_S = 20

SEEDS: dict[str, tuple[str, bytes]] = {
    "mooncake": ("t.jsonl", ("\n".join(DEMO_LINES) + "\n").encode()),
    "bailian": ("q.jsonl", b'{"chat_id": 1, "parent_chat_id": -1, "timestamp": 0.5, '
                b'"input_length": 40, "output_length": 3, "type": "text", "turn": 1, '
                b'"hash_ids": [7, 8, 9]}\n{"chat_id": 2, "parent_chat_id": 1, "timestamp": 2.0,'
                b' "input_length": 40, "output_length": 3, "type": "text", "turn": 2, '
                b'"hash_ids": [7, 8, 9]}\n'),
    "azure": ("a.csv", b"TIMESTAMP,ContextTokens,GeneratedTokens\n"
              b"2023-11-16 18:15:46.6805900,100,5\n2023-11-16 18:15:47.1000000,40,3\n"),
    "burstgpt": ("b.csv", b"Timestamp,Model,Request tokens,Response tokens,Total tokens,"
                 b"Log Type,Session ID\n7.5,GPT-4,100,20,120,Conversation log,s1\n"
                 b"9,ChatGPT,33,0,33,API log,\n"),
    "vidur": ("v.csv", b"request_id,arrived_at,num_prefill_tokens,num_decode_tokens\n"
              b"0,0.25,17,3\n1,0.5,16,4\n"),
    "token-ids": ("k.jsonl", b'{"arrival_s": 0, "prompt_token_ids": [1, 2, 3, 4, 5], '
                  b'"output_length": 2}\n{"arrival_s": 1.5, "prompt_token_ids": [1, 2, 3, 9],'
                  b' "output_length": 1}\n'),
    "kv-cache-tester": ("c.json", json.dumps({
        "id": "c1", "block_size": 64, "hash_id_scope": "conversation",
        "requests": [{"t": 0, "in": 100, "out": 5, "hash_ids": [1, 2]},
                     {"t": 3.5, "in": 130, "out": 5, "hash_ids": [1, 2, 3]}]}).encode()),
}
CONFIG = (b"trace: {path: TRACE, max_requests: 12}\n"
          b"cache: {policy: lru, capacity_tokens: 20000, ttl_s: 300, ttl_mode: sliding,\n"
          b"        classes: [{name: long, ttl_s: 600, session_regex: '^s1', priority: 1}]}\n"
          b"cache_only: true\nengine: {sample_interval_s: 1.0}\n"
          b"router: {name: prefix_aware, params: {load_weight: 1.0}}\n")
SPEC = (b"name: fuzz\nbase: {trace: {path: TRACE, max_requests: 12}, cache_only: true}\n"
        b"grid: {cache.policy: [lru, fifo], cache.capacity_tokens: [5000, 20000]}\n"
        b"runs:\n  - {cache.capacity_tokens: null, cache.ttl_s: 10}\n")
TOKENS = [b"0", b"-1", b"1e400", b"1e50", b"nan", b"true", b"null", b"[]", b"{}", b'"x"',
          b"\x00", b"\xef\xbb\xbf", b"\xff\xfe", b"[[[[[[[[", b"}", b",", b"\n", b":", b"&a",
          b"*a", b"9" * 30, b"\x1b]0;t\x07", b"$\\foo{$", b"../", b"\r\n"]


@contextlib.contextmanager
def alarm(seconds: int) -> Iterator[None]:
    """Fail an example that runs longer than `seconds` (a hang, not a speed goal)."""
    def hang(signum, frame):
        raise TimeoutError(f"the command ran past {seconds} s")

    old = signal.signal(signal.SIGALRM, hang)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


@st.composite
def mutated(draw, seed: bytes) -> bytes:
    """`seed` with 1-4 edits: a byte flipped, a token inserted or replacing a span, a span
    deleted or duplicated, or the file cut short."""
    data = bytearray(seed)
    for _ in range(draw(st.integers(1, 4))):
        where = draw(st.integers(0, len(data)))
        kind = draw(st.sampled_from(["flip", "insert", "replace", "delete", "repeat", "cut"]))
        span = draw(st.integers(1, 12))
        if kind == "flip" and where < len(data):
            data[where] = draw(st.integers(0, 255))
        elif kind == "insert":
            data[where:where] = draw(st.sampled_from(TOKENS))
        elif kind == "replace":
            data[where:where + span] = draw(st.sampled_from(TOKENS))
        elif kind == "delete":
            del data[where:where + span]
        elif kind == "repeat":
            data[where:where] = data[where:where + span * 8]
        elif kind == "cut":
            del data[where:]
    return bytes(data)


def check(args: list[str], folder: Path) -> None:
    with alarm(ALARM_S):
        result = CliRunner().invoke(app, args)
    exc = result.exception
    assert exc is None or isinstance(exc, SystemExit), (args, repr(exc), result.output)
    assert result.exit_code in (0, 2), (args, result.exit_code, result.output)
    assert "Traceback" not in result.output
    if result.exit_code == 2 and result.stderr.startswith("prefixsim: error: "):
        assert len(result.stderr.splitlines()) == 1, result.stderr
    elif result.exit_code == 2:  # click's own usage errors name the option
        assert "Error:" in result.stderr, result.stderr


FUZZ = settings(max_examples=80, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow])


def fuzz_file(folder: Path, name: str, seed: bytes,
              command: Callable[[str], list[str]]) -> None:
    """`check` the command line `command(path)` on each mutation of `seed` written to
    `folder / name`."""

    @FUZZ
    @given(mutated(seed))
    def run(data: bytes) -> None:
        path = folder / name
        path.write_bytes(data)
        check(command(str(path)), folder)

    run()


@pytest.mark.parametrize("fmt", sorted(SEEDS))
def test_mutated_trace_files(fmt, tmp_path):
    name, seed = SEEDS[fmt]
    fuzz_file(tmp_path, name, seed, lambda path: ["trace", "inspect", path, "--json"])


def test_mutated_parquet_files(tmp_path):
    path = tmp_path / "seed.parquet"
    pq.write_table(pa.table({"timestamp": [0, 1000], "input_length": [600, 700],
                             "output_length": [1, 2], "hash_ids": [[1, 2], [1, 3]],
                             "block_size": [512, 512]}), path)
    fuzz_file(tmp_path, "t.parquet", path.read_bytes(),
              lambda target: ["trace", "inspect", target, "--json"])


def test_mutated_run_configs(tmp_path):
    trace = tmp_path / "t.jsonl"
    trace.write_bytes(SEEDS["mooncake"][1])
    out = str(tmp_path / "out")
    fuzz_file(tmp_path, "run.yaml", CONFIG.replace(b"TRACE", str(trace).encode()),
              lambda config: ["run", "--config", config, "-o", out, "--quiet"])


def test_mutated_sweep_specs(tmp_path):
    trace = tmp_path / "t.jsonl"
    trace.write_bytes(SEEDS["mooncake"][1])
    fuzz_file(tmp_path, "spec.yaml", SPEC.replace(b"TRACE", str(trace).encode()),
              lambda spec: ["sweep", spec, "--dry-run"])
