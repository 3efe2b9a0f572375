"""One sweep point in a worker: outcomes of good, bad-input and broken runs, and the watch
that ends a worker whose driver died (prefixsim/sweep/worker.py), in this process."""

import errno
import json
import os
import threading

import pytest

from prefixsim.config import config_to_yaml
from prefixsim.errors import InputError
from prefixsim.sweep import worker
from prefixsim.sweep.spec import make_point
from prefixsim.sweep.worker import FAILED, OK, run_point, watch_driver


@pytest.fixture
def point(tmp_path):
    path = tmp_path / "t.jsonl"
    rows = [{"timestamp": 1000 * i, "input_length": 1024, "output_length": 4,
             "hash_ids": [0, 10 + i], "session_id": f"s{i}"} for i in range(3)]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return make_point({"trace": {"path": str(path)}, "cache_only": True},
                      {"cache.capacity_tokens": 2048})


def test_a_good_run_comes_back_with_its_figures(point):
    outcome = run_point(point)
    assert (outcome.run_id, outcome.params, outcome.status, outcome.error) == (
        point.run_id, {"cache.capacity_tokens": 2048}, OK, None)
    assert outcome.summary["num_requests"] == 3 and len(outcome.requests) == 3
    assert "format: mooncake" in outcome.config_yaml  # the effective config, resolved
    assert 0 < outcome.wall_time_s < 60 and not outcome.bad_input
    assert not outcome.timeseries.empty and "time_s" in outcome.timeseries
    assert run_point(point, keep_requests=False).requests.empty


def test_failures_come_back_as_one_line_outcomes(point, monkeypatch):
    def bad_input(config, share_trace):
        assert share_trace is True
        raise InputError("line one\n  and  two", file="t.jsonl", line=3, field="hash_ids")

    monkeypatch.setattr(worker, "simulate", bad_input)
    outcome = run_point(point)
    assert (outcome.status, outcome.error, outcome.bad_input) == (
        FAILED, "t.jsonl:3: hash_ids: line one and two", True)
    assert outcome.config_yaml == config_to_yaml(point.config)
    assert outcome.summary == {} and outcome.requests.empty and 0 < outcome.wall_time_s < 60
    assert (outcome.run_id, outcome.params) == (point.run_id, {"cache.capacity_tokens": 2048})

    def broken(config, share_trace):
        raise ZeroDivisionError("division\tby zero")

    monkeypatch.setattr(worker, "simulate", broken)
    outcome = run_point(point)
    assert (outcome.status, outcome.error, outcome.bad_input) == (
        FAILED, "ZeroDivisionError: division by zero", False)


def test_nothing_is_watched_in_the_driver_or_twice(monkeypatch):
    started = []
    real = threading.Thread
    monkeypatch.setattr(worker.threading, "Thread",
                        lambda **kwargs: started.append(kwargs) or real())
    monkeypatch.setattr(worker, "_watched", set())
    watch_driver(0)
    watch_driver(-5)
    watch_driver(os.getpid())
    assert started == []
    watch_driver(os.getpid() + 100_000)
    watch_driver(os.getpid() + 100_000)
    watch_driver(1)  # a driver may be a container's first process
    assert len(started) == 2
    assert started[0]["name"] == "prefixsim-watch-driver" and started[0]["daemon"] is True


def test_a_dead_driver_ends_the_worker(monkeypatch):
    exits = []
    done = threading.Event()

    def exit_(code):
        exits.append(code)
        done.set()
        raise SystemExit  # ends the watch thread instead of the process

    monkeypatch.setattr(worker, "WATCH_EVERY_S", 0.01)
    monkeypatch.setattr(worker, "_watched", set())
    monkeypatch.setattr(worker.os, "_exit", exit_)
    checks = []
    monkeypatch.setattr(worker, "_alive", lambda pid: checks.append(pid) or len(checks) < 3)
    monkeypatch.setattr(threading, "excepthook", lambda args: None)  # its SystemExit: quiet
    before = set(threading.enumerate())
    watch_driver(424242)
    assert done.wait(5)
    for thread in set(threading.enumerate()) - before:
        thread.join(5)  # ended by its SystemExit while the quiet hook is in place
    assert exits == [3] and checks == [424242] * 3


def test_alive(monkeypatch):
    assert worker._alive(os.getppid())            # the parent: no signal sent
    assert worker._alive(os.getpid())             # exists
    sent = []

    def kill(pid, signal):
        sent.append((pid, signal))
        raise ProcessLookupError(errno.ESRCH, "no such process")

    monkeypatch.setattr(worker.os, "kill", kill)
    assert not worker._alive(999_999)
    assert sent == [(999_999, 0)]

    def not_ours(pid, signal):
        raise PermissionError(errno.EPERM, "not permitted")

    monkeypatch.setattr(worker.os, "kill", not_ours)
    assert worker._alive(1)
