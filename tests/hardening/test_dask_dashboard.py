"""The Dask dashboard is off unless asked for (docs/input-rules.md I16): a local Dask cluster
serves no HTTP pages by default; `--dask-dashboard HOST:PORT` hands that address to the
local cluster (the dashboard has no login), and is refused where it would mean nothing.
"""

import types

import pytest
from cli_helpers import DEMO, invoke, one_line_error

from prefixsim.errors import InputError
from prefixsim.sweep import ExecutorOptions, executors


class _Started(Exception):
    """Raised by the fake LocalCluster once it has seen its arguments."""


@pytest.fixture
def cluster_calls(monkeypatch):
    """LocalCluster replaced by a recorder of its keyword arguments and the Dask config
    in force while it is built; Security.temporary and bokeh's presence faked."""
    pytest.importorskip("distributed")
    import dask.config

    calls: list[dict] = []

    def local_cluster(**kwargs):
        calls.append({"kwargs": kwargs,
                      "scheduler_routes": dask.config.get("distributed.scheduler.http.routes"),
                      "worker_routes": dask.config.get("distributed.worker.http.routes")})
        raise _Started

    fake = types.SimpleNamespace(
        LocalCluster=local_cluster,
        security=types.SimpleNamespace(Security=types.SimpleNamespace(temporary=lambda: None)))
    monkeypatch.setattr(executors, "_optional", lambda name, extra: fake)
    monkeypatch.setattr(executors.importlib.util, "find_spec", lambda name: object())
    return calls


def test_the_dashboard_is_off_unless_asked_for(cluster_calls):
    with pytest.raises(_Started):
        ExecutorOptions(executor="dask", n_jobs=1).build().open()
    (off,) = cluster_calls
    assert off["kwargs"]["dashboard_address"] is None
    assert off["scheduler_routes"] == [] and off["worker_routes"] == []


def test_asked_for_it_is_served_at_the_given_address(cluster_calls):
    with pytest.raises(_Started):
        ExecutorOptions(executor="dask", n_jobs=1, dask_dashboard="127.0.0.1:0").build().open()
    (on,) = cluster_calls
    assert on["kwargs"]["dashboard_address"] == "127.0.0.1:0"
    assert on["scheduler_routes"] != [] and on["worker_routes"] == []


@pytest.mark.parametrize("options", [
    ExecutorOptions(executor="local", dask_dashboard="127.0.0.1:8787"),
    ExecutorOptions(executor="dask", address="tcp://x:8786", dask_dashboard="127.0.0.1:8787"),
])
def test_it_is_refused_without_a_local_dask_cluster(options):
    with pytest.raises(InputError, match="needs --executor dask without --address") as caught:
        options.build()
    assert caught.value.field == "--dask-dashboard"


def test_without_bokeh_it_is_one_line(monkeypatch):
    pytest.importorskip("distributed")
    monkeypatch.setattr(executors.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(InputError, match="needs bokeh"):
        ExecutorOptions(executor="dask", dask_dashboard="127.0.0.1:8787").build()


def test_the_sweep_command_takes_the_option(tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text(f"base: {{trace: {{path: '{DEMO}'}}, cache_only: true}}\n"
                    "grid: {cache.capacity_tokens: [5000]}\n")
    one_line_error(invoke("sweep", spec, "-o", tmp_path / "out", "--dask-dashboard",
                          "127.0.0.1:8787"), "--dask-dashboard", "--executor dask")
    assert not (tmp_path / "out").exists()
