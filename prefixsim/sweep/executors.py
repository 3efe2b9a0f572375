"""Where sweep points run: local processes (joblib), a Dask cluster or a Ray cluster.

An executor maps a picklable top-level function over items and yields `(index, result)` as
results complete, in any order. An infrastructure failure of one item (a worker that died)
is yielded as `(index, exception)`; the driver turns it into a failed run. Dask and Ray are
optional extras imported only when chosen; `address` connects to a running cluster, without
it a local cluster of `n_jobs` single-threaded worker processes is started on the first map
and kept for later ones (a tune maps once per round of trials) until `close()`. This module
knows nothing about simulations.
"""

from __future__ import annotations

import importlib
import logging
import os
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol

import joblib

from prefixsim.errors import InputError
from prefixsim.registry import Registry

Indexed = tuple[int, Any]


class Executor(Protocol):
    """Runs `fn` over `items`; yields `(index, result or exception)` as each completes.
    May be called many times; `close()` releases what the first call started (an executor
    without a `close` holds nothing between calls; `close_executor` calls it if present)."""

    def map_unordered(self, fn: Callable[[Any], Any], items: Sequence[Any]) -> Iterator[Indexed]:
        ...

    def close(self) -> None:
        ...


EXECUTORS: Registry[Executor] = Registry("executor")


def default_jobs() -> int:
    """Worker processes when -j is not given: the CPUs this process may use."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _optional(module: str, extra: str) -> Any:
    try:
        return importlib.import_module(module)
    except ImportError:
        raise InputError(f"needs the optional dependency {module!r}: "
                         f"pip install 'prefixsim[{extra}]'", field="--executor") from None


def close_executor(executor: Executor) -> None:
    """Release what `executor` holds (its `close`, where it has one)."""
    close = getattr(executor, "close", None)
    if close is not None:
        close()


def _call_indexed(fn: Callable[[Any], Any], index: int, item: Any) -> Indexed:
    return index, fn(item)


@EXECUTORS.register("local")
class LocalExecutor:
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
        yield from parallel(joblib.delayed(_call_indexed)(fn, i, item)
                            for i, item in enumerate(items))

    def close(self) -> None:
        """Nothing to release: joblib keeps (and reuses) its worker pool itself."""


@EXECUTORS.register("dask")
class DaskExecutor:
    """Dask distributed: a scheduler at `address`, or a LocalCluster of worker processes."""

    def __init__(self, n_jobs: int | None = None, address: str | None = None) -> None:
        self.distributed = _optional("distributed", "dask")
        self.n_jobs = n_jobs or default_jobs()
        self.address = address
        self._opened: Any = None

    def _client(self) -> Any:
        if self._opened is not None:
            return self._opened
        if self.address is not None:
            self._opened = self.distributed.Client(self.address)
        else:
            cluster = self.distributed.LocalCluster(
                n_workers=self.n_jobs, threads_per_worker=1, processes=True,
                dashboard_address=None, silence_logs=logging.ERROR,
            )
            self._opened = self.distributed.Client(cluster)
        return self._opened

    def map_unordered(self, fn: Callable[[Any], Any], items: Sequence[Any]) -> Iterator[Indexed]:
        client = self._client()
        futures = client.map(fn, list(items), pure=False)
        index_of = {future.key: i for i, future in enumerate(futures)}
        for future in self.distributed.as_completed(futures):
            try:
                yield index_of[future.key], future.result()
            except Exception as exc:  # noqa: BLE001 - a lost worker fails one run
                yield index_of[future.key], exc
            future.release()

    def close(self) -> None:
        """Close the client, and the local cluster when this executor started it."""
        client, self._opened = self._opened, None
        if client is None:
            return
        cluster = client.cluster if self.address is None else None
        client.close()
        if cluster is not None:
            cluster.close()


@EXECUTORS.register("ray")
class RayExecutor:
    """Ray: a cluster at `address` (e.g. `ray://host:10001` or `auto`), or a local one."""

    def __init__(self, n_jobs: int | None = None, address: str | None = None) -> None:
        self.ray = _optional("ray", "ray")
        self.n_jobs = n_jobs or default_jobs()
        self.address = address
        self._started_here = False

    def map_unordered(self, fn: Callable[[Any], Any], items: Sequence[Any]) -> Iterator[Indexed]:
        ray = self.ray
        if not ray.is_initialized():
            self._started_here = True
            if self.address is None:
                ray.init(num_cpus=self.n_jobs, include_dashboard=False, log_to_driver=False)
            else:
                ray.init(address=self.address, log_to_driver=False)
        remote = ray.remote(num_cpus=1)(fn)
        pending = {remote.remote(item): i for i, item in enumerate(items)}
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            for ref in done:
                index = pending.pop(ref)
                try:
                    yield index, ray.get(ref)
                except Exception as exc:  # noqa: BLE001 - a lost worker fails one run
                    yield index, exc

    def close(self) -> None:
        """Shut Ray down when this executor started it."""
        if self._started_here:
            self._started_here = False
            self.ray.shutdown()
