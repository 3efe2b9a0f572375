"""Where sweep points run: local processes (joblib), a Dask cluster or a Ray cluster.

An executor maps a picklable top-level function over items and yields `(index, result)` as
results complete, in any order. An infrastructure failure of one item (a worker that died)
is yielded as `(index, exception)`; the driver turns it into a failed run. Dask and Ray are
optional extras imported only when chosen; `address` connects to a running cluster, without
it a local cluster of `n_jobs` single-threaded worker processes is started on the first map
(or `open()`) and kept for later ones (a tune maps once per round of trials) until `close()`.

`open()` connects (or starts the local cluster) before the driver creates anything on disk,
so a wrong address, an unreachable port or a cluster without workers is one `InputError`
(exit 2) and no sweep folder; `close()` ends what `open()` started (`ExecutorBase`: neither
does anything by default). Workers of a local pool
or cluster exit when the driver dies (sweep/worker.py `watch_driver`). A local Dask cluster
runs with TLS and temporary credentials (only this driver can submit work); a cluster given
by `--address` is trusted: the driver unpickles what its workers return (README: sweeps).
It serves no HTTP pages unless `--dask-dashboard HOST:PORT` asks for its dashboard (which has
no login, so it is opt-in). This module knows nothing about simulations.
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
import os
import socket
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import urlsplit

import joblib

from prefixsim.errors import InputError
from prefixsim.registry import Registry
from prefixsim.sweep.worker import watch_driver

Indexed = tuple[int, Any]
CONNECT_TIMEOUT_S = 10.0  # reaching a cluster's scheduler
WORKERS_TIMEOUT_S = 60.0  # a joined Dask cluster must show one worker within this
# A local Dask cluster serves no HTTP pages: with dashboard_address=None its scheduler would
# still answer on 8787, unauthenticated, with logs, call stacks and worker folders
# (docs/input-rules.md I16), and each worker on a port of its own.
NO_HTTP_ROUTES = {"distributed.scheduler.http.routes": [],
                  "distributed.worker.http.routes": []}
NO_WORKER_HTTP_ROUTES = {"distributed.worker.http.routes": []}  # with --dask-dashboard
RAY_CONNECT_TIMEOUT_S = 30.0  # ray.init joining a cluster (it starts a local raylet first)


class Executor(Protocol):
    """Runs `fn` over `items`; yields `(index, result or exception)` as each completes.
    May be called many times; `close()` releases what the first call (or `open`) started."""

    def open(self) -> None:
        """Connect or start workers; raise InputError when that cannot be done."""

    def map_unordered(self, fn: Callable[[Any], Any], items: Sequence[Any]) -> Iterator[Indexed]:
        ...

    def close(self) -> None:
        """End what `open` started (a joined cluster is left running)."""


class ExecutorBase:
    """The defaults of `Executor`: nothing to connect or start before the first map, nothing
    to release after the last (joblib keeps and reuses its worker pool itself)."""

    def open(self) -> None:
        pass

    def close(self) -> None:
        pass


EXECUTORS: Registry[Executor] = Registry("executor")


@dataclass(frozen=True)
class ExecutorOptions:
    """Where the runs of a sweep or a tune execute: the executor's name (`--executor`), its
    worker processes (`-j`; None: the CPUs available, or the cluster's) and the scheduler
    `address` of a running cluster (None: start a local one)."""

    executor: str = "local"
    n_jobs: int | None = None
    address: str | None = None
    dask_dashboard: str | None = None  # HOST:PORT of the local Dask cluster's dashboard

    def build(self) -> Executor:
        """The executor these options name (an unknown name is an InputError on --executor).
        The Dask dashboard is served only when asked for, by a local Dask cluster."""
        if self.executor not in EXECUTORS:
            raise InputError(f"unknown executor {self.executor!r} "
                             f"(valid: {', '.join(EXECUTORS.names())})", field="--executor")
        if self.dask_dashboard is None:
            return EXECUTORS.build(self.executor, n_jobs=self.n_jobs, address=self.address)
        if self.executor != "dask" or self.address is not None:
            raise InputError("serves the dashboard of a local Dask cluster: needs "
                             "--executor dask without --address", field="--dask-dashboard")
        return EXECUTORS.build("dask", n_jobs=self.n_jobs, dashboard=self.dask_dashboard)


LOCAL_WORKERS = ExecutorOptions()  # worker processes here, one per CPU available


def default_jobs() -> int:
    """Worker processes when -j is not given: the CPUs this process may use."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _optional(module: str, extra: str) -> Any:
    try:
        return importlib.import_module(module)
    except ImportError:
        raise InputError(f"needs the optional dependency {module!r}: "
                         f"pip install 'prefixsim[{extra}]'", field="--executor") from None


def check_reachable(address: str, default_port: int, grpc: bool = False) -> None:
    """A TCP connection to `address` (`tcp://`, `tls://`, `ray://` or bare `host:port`) within
    CONNECT_TIMEOUT_S, else InputError naming --address (a wrong port would otherwise hang a
    cluster client for minutes); with `grpc`, the port must also answer an HTTP/2 greeting
    as a gRPC server does (Ray's), so a port that is open but silent is refused at once."""
    try:
        parts = urlsplit(address if "://" in address else f"tcp://{address}")
    except ValueError:
        raise InputError(f"not a host:port address: {address!r}", field="--address") from None
    if parts.scheme not in ("tcp", "tls", "ray"):
        return  # in-process or other transports: the client reports those itself
    try:
        host, port = parts.hostname, parts.port or default_port
    except ValueError:
        raise InputError(f"not a host:port address: {address!r}", field="--address") from None
    if not host:
        raise InputError(f"not a host:port address: {address!r}", field="--address")
    try:
        with socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S) as conn:
            if grpc and not _answers_http2(conn):
                raise InputError(f"{host}:{port} is open but does not answer as a gRPC server "
                                 f"within {CONNECT_TIMEOUT_S:g} s (is it the cluster's port?)",
                                 field="--address")
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise InputError(f"cannot reach {host}:{port} ({reason})", field="--address") from None


HTTP2_GREETING = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"


def _answers_http2(conn: socket.socket) -> bool:
    """Whether the server answers the HTTP/2 client greeting with a SETTINGS frame."""
    try:
        conn.sendall(HTTP2_GREETING)
        head = b""
        while len(head) < 9:
            part = conn.recv(9 - len(head))
            if not part:
                return False
            head += part
    except (TimeoutError, OSError):
        return False
    return head[3] == 4  # the frame type of SETTINGS


def bounded_call(fn: Callable[[], Any], address: str, what: str,
                 timeout_s: float = CONNECT_TIMEOUT_S) -> Any:
    """`fn()` (a cluster client's connect), given up after `timeout_s` with one InputError
    naming --address: a port that accepts connections but is no scheduler would otherwise
    keep a client waiting for minutes (docs/input-rules.md I16). The abandoned call goes on
    in a daemon thread, which ends with the process."""
    outcome: dict[str, Any] = {}

    def call() -> None:
        try:
            outcome["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
            outcome["error"] = exc

    thread = threading.Thread(target=call, name=f"connect-{what}", daemon=True)
    thread.start()
    thread.join(timeout_s)
    if thread.is_alive():
        raise InputError(f"no {what} answered at {address} within {timeout_s:g} s (is it the "
                         f"{what}'s port?)", field="--address")
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("value")


def _call_watched(fn: Callable[[Any], Any], driver_pid: int, item: Any) -> Any:
    watch_driver(driver_pid)
    return fn(item)


def _call_indexed(fn: Callable[[Any], Any], driver_pid: int, index: int, item: Any) -> Indexed:
    return index, _call_watched(fn, driver_pid, item)


@EXECUTORS.register("local")
class LocalExecutor(ExecutorBase):
    """joblib's process pool (loky) on this machine; -j 1 runs in this process."""

    def __init__(self, n_jobs: int | None = None, address: str | None = None) -> None:
        if address is not None:
            raise InputError("--address is for the dask and ray executors", field="--address")
        self.n_jobs = n_jobs or default_jobs()

    def map_unordered(self, fn: Callable[[Any], Any], items: Sequence[Any]) -> Iterator[Indexed]:
        if self.n_jobs == 1 or len(items) <= 1:
            for index, item in enumerate(items):
                yield index, fn(item)
            return
        parallel = joblib.Parallel(n_jobs=min(self.n_jobs, len(items)),
                                   return_as="generator_unordered", batch_size=1)
        pid = os.getpid()
        yield from parallel(joblib.delayed(_call_indexed)(fn, pid, i, item)
                            for i, item in enumerate(items))


@EXECUTORS.register("dask")
class DaskExecutor(ExecutorBase):
    """Dask distributed: a scheduler at `address`, or a LocalCluster of worker processes
    (TLS with temporary credentials, so no other local process can submit to it)."""

    def __init__(self, n_jobs: int | None = None, address: str | None = None,
                 dashboard: str | None = None) -> None:
        self.distributed = _optional("distributed", "dask")
        if dashboard is not None and importlib.util.find_spec("bokeh") is None:
            raise InputError("the Dask dashboard needs bokeh: pip install bokeh",
                             field="--dask-dashboard")
        self.n_jobs = n_jobs or default_jobs()
        self.address = address
        self.dashboard = dashboard  # None: no HTTP pages at all (docs/input-rules.md I16)
        self.client: Any = None
        self.cluster: Any = None

    def open(self) -> None:
        if self.client is not None:
            return
        distributed = self.distributed
        dask_config = importlib.import_module("dask.config")
        if self.address is None:
            try:
                security = distributed.security.Security.temporary()
            except ImportError:
                raise InputError("a local Dask cluster runs with TLS, which needs the "
                                 "'cryptography' package: pip install 'prefixsim[dask]'",
                                 field="--executor") from None
            routes = NO_HTTP_ROUTES if self.dashboard is None else NO_WORKER_HTTP_ROUTES
            with dask_config.set(routes):  # the workers get this config too
                self.cluster = distributed.LocalCluster(
                    n_workers=self.n_jobs, threads_per_worker=1, processes=True,
                    dashboard_address=self.dashboard, silence_logs=logging.ERROR,
                    security=security, protocol="tls://", host="127.0.0.1",
                )
            self.client = distributed.Client(self.cluster, security=security)
            if self.dashboard is not None:
                print(f"prefixsim: Dask dashboard (no login) at {self.client.dashboard_link}",
                      file=sys.stderr)
            return
        check_reachable(self.address, 8786)
        try:
            self.client = bounded_call(
                lambda: distributed.Client(self.address, timeout=CONNECT_TIMEOUT_S),
                self.address, "Dask scheduler", CONNECT_TIMEOUT_S + 2)
        except (OSError, TimeoutError) as exc:
            raise InputError(f"cannot join the Dask scheduler at {self.address} ({exc})",
                             field="--address") from None
        try:
            self.client.wait_for_workers(1, timeout=WORKERS_TIMEOUT_S)
        except TimeoutError:
            self.close()
            raise InputError(f"the Dask scheduler at {self.address} has no workers "
                             f"(none joined within {WORKERS_TIMEOUT_S:g} s)",
                             field="--address") from None

    def close(self) -> None:
        """Close the client, and the local cluster when this executor started it."""
        client, cluster = self.client, self.cluster
        self.client = self.cluster = None
        if client is not None:
            client.close()
        if cluster is not None:
            cluster.close()

    def map_unordered(self, fn: Callable[[Any], Any], items: Sequence[Any]) -> Iterator[Indexed]:
        self.open()
        client = self.client
        pid = os.getpid() if self.address is None else 0  # a remote driver is not watched
        futures = client.map(_call_watched, [fn] * len(items), [pid] * len(items),
                             list(items), pure=False)
        index_of = {future.key: i for i, future in enumerate(futures)}
        for future in self.distributed.as_completed(futures):
            try:
                yield index_of[future.key], future.result()
            except Exception as exc:  # noqa: BLE001 - a lost worker fails one run
                yield index_of[future.key], exc
            future.release()


@EXECUTORS.register("ray")
class RayExecutor(ExecutorBase):
    """Ray: a cluster at `address` (`auto`, `host:6379` or, with `ray[client]`,
    `ray://host:10001`), or a new local one (even when another Ray cluster runs here)."""

    def __init__(self, n_jobs: int | None = None, address: str | None = None) -> None:
        self.ray = _optional("ray", "ray")
        self.n_jobs = n_jobs or default_jobs()
        self.address = address
        self.started_here = False

    def open(self) -> None:
        ray = self.ray
        if ray.is_initialized():
            return
        if self.address is None:
            ray.init(address="local", num_cpus=self.n_jobs, include_dashboard=False,
                     log_to_driver=False, configure_logging=False)
        else:
            if self.address != "auto":
                check_reachable(self.address, 10001 if self.address.startswith("ray://")
                                else 6379, grpc=True)
            try:
                bounded_call(lambda: ray.init(address=self.address, log_to_driver=False,
                                              configure_logging=False),
                             self.address, "Ray cluster", RAY_CONNECT_TIMEOUT_S)
            except (ConnectionError, RuntimeError, ValueError) as exc:
                message = " ".join(str(exc).split())[:300]
                raise InputError(f"cannot join the Ray cluster at {self.address} ({message})",
                                 field="--address") from None
        self.started_here = True

    def close(self) -> None:
        """Shut Ray down when this executor started it."""
        if self.started_here:
            self.started_here = False
            self.ray.shutdown()

    def map_unordered(self, fn: Callable[[Any], Any], items: Sequence[Any]) -> Iterator[Indexed]:
        ray = self.ray
        self.open()
        pid = os.getpid() if self.address is None else 0
        remote = ray.remote(num_cpus=1)(_call_watched)  # a plain function, not a partial
        pending = {remote.remote(fn, pid, item): i for i, item in enumerate(items)}
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            for ref in done:
                index = pending.pop(ref)
                try:
                    yield index, ray.get(ref)
                except Exception as exc:  # noqa: BLE001 - a lost worker fails one run
                    yield index, exc
