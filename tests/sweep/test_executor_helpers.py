"""The executors' plumbing without a cluster: option refusals, addresses checked against
sockets the tests open, connects given up in time, and the local executor in this process
(prefixsim/sweep/executors.py; the real clusters are test_executors.py's)."""

import os
import socket
import threading
import time

import pytest

from prefixsim.errors import InputError
from prefixsim.sweep import executors
from prefixsim.sweep.executors import (
    EXECUTORS,
    ExecutorOptions,
    LocalExecutor,
    bounded_call,
    check_reachable,
    default_jobs,
)


def refusal(call):
    with pytest.raises(InputError) as error:
        call()
    return error.value.field, error.value.message


def test_option_refusals_word_for_word():
    assert refusal(lambda: ExecutorOptions(executor="nope").build()) == (
        "--executor", f"unknown executor 'nope' (valid: {', '.join(EXECUTORS.names())})")
    needs_local_dask = ("--dask-dashboard", "serves the dashboard of a local Dask cluster: "
                        "needs --executor dask without --address")
    assert refusal(lambda: ExecutorOptions(dask_dashboard="127.0.0.1:1").build()) == \
        needs_local_dask
    assert refusal(lambda: ExecutorOptions(executor="dask", address="tcp://h:1",
                                           dask_dashboard="127.0.0.1:1").build()) == \
        needs_local_dask
    assert refusal(lambda: ExecutorOptions(address="tcp://h:1").build()) == (
        "--address", "--address is for the dask and ray executors")
    built = ExecutorOptions(n_jobs=3).build()
    assert isinstance(built, LocalExecutor) and built.n_jobs == 3
    assert ExecutorOptions().build().n_jobs == default_jobs()


def test_default_jobs_are_the_cpus_this_process_may_use(monkeypatch):
    assert default_jobs() == len(os.sched_getaffinity(0))
    monkeypatch.delattr(executors.os, "sched_getaffinity")
    monkeypatch.setattr(executors.os, "cpu_count", lambda: 7)
    assert default_jobs() == 7
    monkeypatch.setattr(executors.os, "cpu_count", lambda: None)
    assert default_jobs() == 1


def test_an_optional_dependency_missing_is_named():
    assert refusal(lambda: executors._optional("no_such_module_here", "dask")) == (
        "--executor", "needs the optional dependency 'no_such_module_here': "
        "pip install 'prefixsim[dask]'")
    assert executors._optional("json", "x").__name__ == "json"


@pytest.mark.parametrize("address", ["tcp://[::bad", "tcp://host:port", "tcp://:80"])
def test_addresses_that_are_no_host_and_port(address):
    assert refusal(lambda: check_reachable(address, 1)) == (
        "--address", f"not a host:port address: {address!r}")


def test_other_transports_are_left_to_the_client():
    check_reachable("inproc://x", 1)
    check_reachable("ucx://10.0.0.1:1", 1)


GREETING_BYTES = len(executors.HTTP2_GREETING)


class Server:
    """A listening socket on 127.0.0.1 that reads each connection's greeting (up to
    `expect` bytes, or whatever comes before the client stops), answers with `replies` (byte
    strings sent `gap_s` apart), holds the connection `hold_s` seconds, then closes it."""

    def __init__(self, *replies, expect=GREETING_BYTES, gap_s=0.0, hold_s=0.0):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.port = self.sock.getsockname()[1]
        self.replies, self.expect, self.gap_s, self.hold_s = replies, expect, gap_s, hold_s
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                got = b""
                while len(got) < self.expect:
                    part = conn.recv(self.expect - len(got))
                    if not part:
                        break
                    got += part
                for reply in self.replies:
                    time.sleep(self.gap_s)
                    conn.sendall(reply)
                time.sleep(self.hold_s)


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_a_port_nothing_listens_on_is_named():
    port = free_port()
    field, message = refusal(lambda: check_reachable(f"127.0.0.1:{port}", 1))
    assert field == "--address"
    assert message.startswith(f"cannot reach 127.0.0.1:{port} (")
    # the default port is taken where the address has none
    assert refusal(lambda: check_reachable("tcp://127.0.0.1", port))[1].startswith(
        f"cannot reach 127.0.0.1:{port} (")


SETTINGS = b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"


def test_a_grpc_port_must_answer_with_settings(monkeypatch):
    check_reachable(f"ray://127.0.0.1:{Server(SETTINGS).port}", 1, grpc=True)
    # a frame that arrives in two pieces is read whole
    check_reachable(f"127.0.0.1:{Server(SETTINGS[:4], SETTINGS[4:], gap_s=0.1).port}", 1,
                    grpc=True)
    check_reachable(f"127.0.0.1:{Server().port}", 1)  # open is enough without grpc
    monkeypatch.setattr(executors, "CONNECT_TIMEOUT_S", 0.5)
    for server in (Server(), Server(b"\x00\x00\x00\x07\x00\x00\x00\x00\x00"),
                   Server(b"\x00\x00"), Server(SETTINGS[:4], SETTINGS[:4], gap_s=0.1),
                   Server(hold_s=3)):
        started = time.monotonic()
        assert refusal(lambda p=server.port: check_reachable(f"127.0.0.1:{p}", 1,
                                                             grpc=True)) == (
            "--address", f"127.0.0.1:{server.port} is open but does not answer as a gRPC "
            "server within 0.5 s (is it the cluster's port?)")
        assert time.monotonic() - started < 2  # a silent port is given up on in time


def test_other_schemes_are_checked_and_errors_without_words_named(monkeypatch):
    port = free_port()
    for scheme in ("tls", "ray"):
        assert refusal(lambda s=scheme: check_reachable(f"{s}://127.0.0.1:{port}", 1))[1] \
            .startswith(f"cannot reach 127.0.0.1:{port} (")

    def timed_out(address, timeout):
        raise TimeoutError("timed out")

    monkeypatch.setattr(executors.socket, "create_connection", timed_out)
    assert refusal(lambda: check_reachable("h:1", 1)) == (
        "--address", "cannot reach h:1 (TimeoutError)")


def test_cpus_from_the_affinity_before_the_count(monkeypatch):
    monkeypatch.setattr(executors.os, "sched_getaffinity", lambda pid: {0}, raising=False)
    monkeypatch.setattr(executors.os, "cpu_count", lambda: 7)
    assert default_jobs() == 1


def test_a_local_dask_dashboard_is_asked_of_dask(monkeypatch):
    pytest.importorskip("distributed")
    options = ExecutorOptions(executor="dask", n_jobs=3, dask_dashboard="127.0.0.1:0")
    found = executors.importlib.util.find_spec
    if found("bokeh") is None:
        assert refusal(options.build) == (
            "--dask-dashboard", "the Dask dashboard needs bokeh: pip install bokeh")
        # as if bokeh were there (nothing is started before open())
        monkeypatch.setattr(executors.importlib.util, "find_spec",
                            lambda name: object() if name == "bokeh" else found(name))
    built = options.build()
    assert (type(built).__name__, built.n_jobs, built.dashboard, built.address) == (
        "DaskExecutor", 3, "127.0.0.1:0", None)


def test_a_connect_is_given_up_in_time_and_its_errors_reach_the_caller():
    assert bounded_call(lambda: 42, "h:1", "thing", 5) == 42
    current = bounded_call(threading.current_thread, "h:1", "Ray cluster", 5)
    assert (current.name, current.daemon) == ("connect-Ray cluster", True)
    assert bounded_call(lambda: None, "h:1", "thing", 5) is None
    started = time.monotonic()
    assert refusal(lambda: bounded_call(lambda: time.sleep(5), "h:1", "Ray cluster", 0.2)) == (
        "--address", "no Ray cluster answered at h:1 within 0.2 s (is it the Ray cluster's "
        "port?)")
    assert time.monotonic() - started < 2

    def fails():
        raise ConnectionError("refused")

    with pytest.raises(ConnectionError, match="refused"):
        bounded_call(fails, "h:1", "thing", 5)


def test_the_local_executor_runs_one_job_here_in_order(monkeypatch):
    def fn(item):
        return item, os.getpid()

    local = LocalExecutor(n_jobs=1)
    assert list(local.map_unordered(fn, ["a", "b"])) == [(0, ("a", os.getpid())),
                                                          (1, ("b", os.getpid()))]
    many = LocalExecutor(n_jobs=4)  # a single item also runs here
    assert list(many.map_unordered(fn, ["a"])) == [(0, ("a", os.getpid()))]
    assert list(many.map_unordered(fn, [])) == []
    watched = []
    monkeypatch.setattr(executors, "watch_driver", watched.append)
    assert executors._call_indexed(str.upper, 77, 3, "x") == (3, "X") and watched == [77]
