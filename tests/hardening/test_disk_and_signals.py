"""Writes the disk refuses and a SIGTERM mid-run (docs/input-rules.md I11, I19): a full disk,
`ulimit -f` and a name over 255 bytes exit 2 with one line naming the file, SIGTERM removes
the staging folder as Ctrl-C does and exits 143, and `-o ''` is refused in one line.
"""

import errno
import json
import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from cli_helpers import DEMO, REPO, invoke, one_line_error

from prefixsim.errors import is_users_os_error, naming_the_file, os_error_number


def _prefixsim(*args: object, limit_bytes: int | None = None, **popen: object):
    """`python -m prefixsim ARGS` in a child process, its files capped at `limit_bytes`
    (`ulimit -f`; SIGXFSZ ignored, as a shell's child of Python would have it)."""

    def cap() -> None:
        if limit_bytes is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit_bytes, limit_bytes))
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_DFL)  # as a terminal's child, whatever ran us

    return subprocess.Popen([sys.executable, "-m", "prefixsim", *map(str, args)], cwd=REPO,
                            preexec_fn=cap, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, **popen)


def test_a_file_size_limit_is_one_line_naming_the_results_folder(tmp_path):
    """`ulimit -f` made Arrow's write fail with exit 1 and no file named."""
    out = tmp_path / "out"
    child = _prefixsim("run", "--trace", DEMO, "--cache-only", "-o", out, "--quiet",
                       limit_bytes=4000)
    _, err = child.communicate(timeout=120)
    assert child.returncode == 2, err
    assert err == f"prefixsim: error: {out}: File too large\n"
    assert list(tmp_path.iterdir()) == []  # no staging, no half-written folder


def test_a_full_disk_in_a_sweep_names_the_run_folder(tmp_path, monkeypatch):
    """ENOSPC while Arrow writes a run's requests (its error holds only `[errno 28]`)."""
    spec = tmp_path / "spec.yaml"
    spec.write_text(f"base: {{trace: {{path: {json.dumps(str(DEMO))}}}, cache_only: true}}\n"
                    "grid: {cache.capacity_tokens: [5000]}\n")

    def full(self: pd.DataFrame, path: object, **kwargs: object) -> None:
        raise OSError("Error writing bytes to file. Detail: [errno 28] No space left on device")

    monkeypatch.setattr(pd.DataFrame, "to_parquet", full)
    out = tmp_path / "sweep"
    line = one_line_error(invoke("sweep", spec, "-o", out, "-j", "1", "--quiet"),
                          "No space left on device")
    assert str(out) in line
    assert not list(out.glob("runs/.*"))  # no staging run folder left


def test_a_full_disk_while_a_trace_is_written_names_the_file(tmp_path, monkeypatch):
    import prefixsim.cli.trace as trace_command

    def full(*args: object, **kwargs: object) -> None:
        raise OSError("Error writing bytes to file. Detail: [errno 28] No space left on device")

    monkeypatch.setattr(trace_command.pq, "write_table", full)
    out = tmp_path / "t.parquet"
    line = one_line_error(invoke("trace", "convert", DEMO, out), "No space left on device")
    assert line == f"prefixsim: error: {out}: No space left on device"
    assert list(tmp_path.iterdir()) == []


def test_a_name_over_255_bytes_is_one_line_exit_2(tmp_path):
    long = tmp_path / ("x" * 300)
    for args in (("run", "--trace", DEMO, "--cache-only"), ("curve", "--trace", DEMO,
                                                          "--capacities", "5000")):
        target = long if args[0] == "run" else long.with_suffix(".csv")
        line = one_line_error(invoke(*args, "-o", target))
        assert "x" * 20 in line and ("255" in line or "too long" in line)
    assert list(tmp_path.iterdir()) == []


def test_an_empty_output_path_is_refused_not_taken_as_the_default(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    one_line_error(invoke("run", "--trace", DEMO, "--cache-only", "-o", ""),
                   "--output", "an empty path")
    spec = tmp_path / "spec.yaml"
    spec.write_text(f"base: {{trace: {{path: {json.dumps(str(DEMO))}}}, cache_only: true}}\n"
                    "grid: {cache.capacity_tokens: [5000]}\n")
    one_line_error(invoke("sweep", spec, "-o", ""), "--output", "an empty path")
    assert not (tmp_path / "results").exists()
    # path options and arguments typed as pathlib paths (where "" would become ".") too
    one_line_error(invoke("trace", "generate", "--preset", "chat", "--requests", "5", "-o", ""),
                   "--output", "an empty path")
    one_line_error(invoke("trace", "inspect", ""), "PATH", "an empty path")
    one_line_error(invoke("trace", "convert", DEMO, ""), "OUT", "an empty path")
    assert list(tmp_path.iterdir()) == [spec]


def _long_trace(path: Path, requests: int) -> Path:
    with path.open("w") as stream:
        for i in range(requests):
            blocks = [i % 50, 1000 + i % 700, 5000 + i]
            stream.write(json.dumps({"timestamp": i * 10, "input_length": 3 * 512,
                                     "output_length": 4, "hash_ids": blocks}) + "\n")
    return path


@pytest.mark.parametrize(("sent", "code", "line"), [
    (signal.SIGTERM, 143, "prefixsim: terminated"),
    (signal.SIGINT, 130, "prefixsim: interrupted"),  # Ctrl-C: click's "Aborted!", exit 1
])
def test_a_signal_mid_run_leaves_no_staging_folder_and_one_line(tmp_path, sent, code, line):
    trace = _long_trace(tmp_path / "long.jsonl", 60_000)
    results = tmp_path / "results"
    results.mkdir()
    # timed (seconds of replay): a cache-only replay of it can end within the 0.3 s below,
    # and a signal at interpreter exit meets the default handler
    child = _prefixsim("run", "--trace", trace, "-o", results / "out", "--quiet")
    deadline = time.monotonic() + 120
    while not list(results.glob(".out.*")):  # the staging folder: the run has started
        assert child.poll() is None and time.monotonic() < deadline, child.communicate()
        time.sleep(0.01)
    time.sleep(0.3)
    child.send_signal(sent)
    _, err = child.communicate(timeout=60)
    assert child.returncode == code, err
    assert err.splitlines() == [line]
    assert list(results.iterdir()) == []


def test_os_errors_the_user_can_fix_are_told_apart():
    arrow = OSError("Error writing bytes to file. Detail: [errno 27] File too large")
    assert os_error_number(arrow) == errno.EFBIG and is_users_os_error(arrow)
    assert is_users_os_error(OSError(errno.ENAMETOOLONG, "File name too long"))
    assert not is_users_os_error(OSError(errno.EIO, "Input/output error"))
    assert not is_users_os_error(OSError("no errno at all"))
    with pytest.raises(OSError) as caught, naming_the_file("here.parquet"):
        raise arrow
    assert (caught.value.errno, caught.value.filename) == (errno.EFBIG, "here.parquet")
    assert caught.value.strerror == os.strerror(errno.EFBIG)
    named = OSError(errno.ENOSPC, "No space left on device", "there")
    with pytest.raises(OSError) as caught, naming_the_file("here"):
        raise named
    assert caught.value is named
