"""The executors against real local clusters (Dask and Ray are in the test extra), workers
that die with their driver (docs/input-rules.md I14), and addresses that are wrong,
unreachable or lead to a cluster without workers (one InputError, no sweep folder: I16).

A Ray head started with `ray start` stands for "a cluster already running here"; the tests
that need it share one (module scope, stopped at the end)."""

from __future__ import annotations

import os
import select
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pandas as pd
import pytest

from prefixsim.errors import InputError
from prefixsim.sweep import ExecutorOptions, executors, parse_spec, run_sweep

REPO = Path(__file__).parents[2]
DEMO = str(REPO / "traces" / "demo_chat.jsonl")
BASE = {"trace": {"path": DEMO}, "cache_only": True}
SPEC = {"base": BASE, "grid": {"cache.capacity_tokens": [5000, 20000]}}


def table(folder: Path) -> pd.DataFrame:
    return pd.read_parquet(folder / "sweep.parquet").drop(columns=["wall_time_s"])


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def local_table(tmp_path_factory) -> pd.DataFrame:
    out = tmp_path_factory.mktemp("local") / "sweep"
    run_sweep(parse_spec(SPEC), out, ExecutorOptions(n_jobs=1))
    return table(out)


# ------------------------------------------- docs/input-rules.md I16
@pytest.mark.heavy  # Dask or Ray: .ci/run's second step
@pytest.mark.parametrize("executor, address", [
    ("dask", "tcp://127.0.0.1:{port}"), ("ray", "127.0.0.1:{port}"),
    ("ray", "ray://127.0.0.1:{port}"), ("dask", "tcp://[::bad"),
])
def test_an_unreachable_address_is_one_error_and_no_folder(tmp_path, executor,
                                                                       address):
    """A closed port (nothing listens on it): refused in a TCP connect, named, before the
    sweep folder exists (a rerun needs no --resume). A wrong Ray GCS port used to hang for
    minutes; here the check answers at once."""
    pytest.importorskip("distributed" if executor == "dask" else "ray")
    out = tmp_path / "sweep"
    with pytest.raises(InputError, match="--address|cannot reach|not a host") as error:
        run_sweep(parse_spec(SPEC), out,
                  ExecutorOptions(executor=executor, address=address.format(port=free_port())))
    assert error.value.field == "--address"
    assert not out.exists()


@pytest.mark.heavy  # Dask or Ray: .ci/run's second step
def test_a_dask_scheduler_without_workers_is_an_error(tmp_path, monkeypatch):
    distributed = pytest.importorskip("distributed")
    monkeypatch.setattr(executors, "WORKERS_TIMEOUT_S", 1.0)
    out = tmp_path / "sweep"
    with distributed.LocalCluster(n_workers=0, processes=False, dashboard_address=None) as c:
        with pytest.raises(InputError, match="has no workers"):
            run_sweep(parse_spec(SPEC), out,
                      ExecutorOptions(executor="dask", address=c.scheduler_address))
    assert not out.exists()


# ------------------------------------------- docs/input-rules.md I16
@pytest.mark.heavy  # Dask or Ray: .ci/run's second step
def test_a_local_dask_cluster_admits_only_its_driver(tmp_path, local_table):
    """The local cluster speaks TLS with temporary credentials: a client without them cannot
    join; the sweep through it gives the local table."""
    distributed = pytest.importorskip("distributed")
    pytest.importorskip("cryptography")
    runner = executors.DaskExecutor(n_jobs=1)
    runner.open()
    try:
        address = runner.cluster.scheduler_address
        assert address.startswith("tls://")
        with pytest.raises((OSError, TypeError, TimeoutError)):
            distributed.Client(address, timeout=3)
    finally:
        runner.close()
    run_sweep(parse_spec(SPEC), tmp_path / "dask", ExecutorOptions(executor="dask", n_jobs=2))
    pd.testing.assert_frame_equal(table(tmp_path / "dask"), local_table)
    readme = (REPO / "README.md").read_text()
    assert "--address" in readme and "trust" in readme


# ------------------------------------------- docs/input-rules.md I16
@pytest.fixture(scope="module")
def ray_head():
    """`ray start --head` on free ports: a cluster that runs before (and beside) the sweep."""
    pytest.importorskip("ray")
    port = free_port()
    ray_bin = Path(sys.executable).with_name("ray")
    # Ray's token authentication would need the head's token in the driver; the test's
    # cluster and driver both run without it (this is the joining code path, not Ray's auth)
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "disabled"}
    patch = pytest.MonkeyPatch()
    patch.setenv("RAY_AUTH_MODE", "disabled")
    started = subprocess.run([str(ray_bin), "start", "--head", f"--port={port}",
                              "--num-cpus=2", "--include-dashboard=false", "--disable-usage-stats"],
                             capture_output=True, text=True, timeout=180, env=env)
    if started.returncode != 0:
        pytest.fail(f"ray start failed: {started.stderr[-2000:]}")
    try:
        yield f"127.0.0.1:{port}"
    finally:
        subprocess.run([str(ray_bin), "stop", "--force"], capture_output=True, timeout=120,
                       env=env)
        patch.undo()


@pytest.mark.heavy  # Dask or Ray: .ci/run's second step
def test_ray_joins_a_running_cluster_and_starts_its_own_beside_one(
        tmp_path, ray_head, local_table):
    """With a cluster already running: `--address HOST:PORT` joins it, and no address starts
    a separate local cluster (ray.init(num_cpus=...) used to fail there); both give the local
    table (ray.remote used to be applied to a partial and fail every run)."""
    joined = run_sweep(parse_spec(SPEC), tmp_path / "joined",
                       ExecutorOptions(executor="ray", address=ray_head))
    assert not joined.failed, joined.failed
    pd.testing.assert_frame_equal(table(tmp_path / "joined"), local_table)
    own = run_sweep(parse_spec(SPEC), tmp_path / "own", ExecutorOptions(executor="ray", n_jobs=1))
    assert not own.failed, own.failed
    pd.testing.assert_frame_equal(table(tmp_path / "own"), local_table)


# ------------------------------------------- docs/input-rules.md I14
DRIVER = textwrap.dedent("""
    import os, sys, time
    from prefixsim.sweep.executors import LocalExecutor

    FIFO = sys.argv[1]

    def block(item):
        handle = open(FIFO, "w")  # held open until this worker process ends
        handle.write(f"{os.getpid()}\\n")
        handle.flush()
        time.sleep(600)

    if __name__ == "__main__":
        for _ in LocalExecutor(n_jobs=2).map_unordered(block, [1, 2]):
            pass
""")


def _ends_within(pid: int, seconds: float) -> bool:
    """Whether process `pid` is gone or a zombie within `seconds`. A process closes its
    files while it exits, so it may still show as running just after its FIFO end closed."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
        except FileNotFoundError:
            return True
        if state == "Z":
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)


def test_local_workers_exit_when_the_driver_is_killed(tmp_path):
    """A driver maps a 10-minute task over 2 loky workers; each worker writes its pid to a
    FIFO it keeps open. SIGKILL the driver: the workers must end, which the test sees as
    end-of-file on the FIFO (every writer gone) within a minute, not minutes later."""
    fifo = tmp_path / "pids"
    os.mkfifo(fifo)
    script = tmp_path / "driver.py"
    script.write_text(DRIVER)
    driver = subprocess.Popen([sys.executable, str(script), str(fifo)], cwd=tmp_path)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        seen = b""
        while seen.count(b"\n") < 2:
            ready, _, _ = select.select([reader], [], [], 120)
            assert ready, "the workers did not start"
            seen += os.read(reader, 100)
        pids = [int(p) for p in seen.split()]
        os.kill(driver.pid, signal.SIGKILL)
        driver.wait(timeout=30)
        while True:  # EOF once no worker holds the FIFO open
            ready, _, _ = select.select([reader], [], [], 60)
            assert ready, f"workers {pids} still running 60 s after the driver died"
            if os.read(reader, 100) == b"":
                break
        for pid in pids:  # gone, or a zombie no one has reaped yet
            assert _ends_within(pid, 10.0), f"worker {pid} still running after its FIFO closed"
    finally:
        os.close(reader)
        if driver.poll() is None:
            driver.kill()
