"""No hangs and a clean start (docs/input-rules.md I7, I16, I18): a session regex that
backtracks exponentially is refused or stopped, a port that accepts connections but is no
scheduler is given up on after a stated time, the local Dask cluster serves no HTTP pages,
an unreadable compiled-module folder is skipped with one line, and Ctrl-C while the command
line loads exits with 130 and one line.
"""

import socket
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from cli_helpers import DEMO, invoke, one_line_error

import prefixsim.__main__ as entry
from prefixsim import accel
from prefixsim.cache import session_regex
from prefixsim.cache.classes import CacheRules, RequestClass
from prefixsim.errors import InputError
from prefixsim.sweep import executors
from prefixsim.trace import Request


@pytest.mark.parametrize("pattern", ["^(a|a)*$", "^(a+)+$", r"(\w+\s?)*$", "(x+x+)+y"])
def test_a_backtracking_session_regex_is_refused_when_the_config_is_read(tmp_path, pattern):
    """`^(a|a)*$` (overlapping alternation) passed the old nested-repeat check and hung."""
    (tmp_path / "run.yaml").write_text(
        f"cache:\n  classes: [{{name: a, ttl_s: 5, session_regex: '{pattern}'}}]\n")
    started = time.monotonic()
    one_line_error(invoke("run", "--config", tmp_path / "run.yaml", "--trace", DEMO,
                          "--cache-only", "-o", tmp_path / "out"),
                   "cache.classes.0.session_regex", "backtracks exponentially")
    assert time.monotonic() - started < 8
    assert not (tmp_path / "out").exists()


def test_a_match_past_its_time_is_one_error_during_a_run():
    """A pattern that skipped the config's probe (a class built directly) is stopped per
    match; an ordinary pattern is matched, and remembered per id."""
    slow = RequestClass(name="a", ttl_s=5.0, session_regex="^(b|b)*$")
    rules = CacheRules([slow])
    request = Request(0, 0.0, 16, 1, (1,), 16, session_id="b" * 40 + "!")
    with pytest.raises(InputError, match="took over 0.1 s on session id 'bbbb"):
        rules.for_request(request)
    fast = CacheRules([RequestClass(name="s", ttl_s=5.0, session_regex="^s[0-9]+$")])
    assert fast.for_request(Request(0, 0.0, 16, 1, (1,), 16, session_id="s12")).class_name == "s"
    assert fast.for_request(Request(1, 0.0, 16, 1, (1,), 16, session_id="t12")).class_name \
        == "default"
    assert fast._patterns[0].memo == {"s12": True, "t12": False}


def test_the_probe_names_each_char_and_bounds_its_ids():
    texts = session_regex.probe_texts("^(q|q)*$")
    assert "q" * session_regex.PROBE_CHARS + "\x00" in texts
    assert all(len(t) <= 2 * session_regex.PROBE_CHARS + 40 for t in texts)
    session_regex.probe("^user-[0-9]+$")  # an ordinary pattern passes
    with pytest.raises(ValueError, match="backtracks"):
        session_regex.probe("^(q|q)*$")


@pytest.fixture
def silent_port():
    """A port that accepts connections and never says a word (not a scheduler)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    held: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                held.append(server.accept()[0])
            except OSError:
                return

    threading.Thread(target=accept, daemon=True).start()
    yield server.getsockname()[1]
    server.close()
    for conn in held:
        conn.close()


def test_a_dask_address_that_is_no_scheduler_is_given_up_after_a_stated_time(
        silent_port, monkeypatch):
    """Dask's client once waited over 200 s on such a port; now CONNECT_TIMEOUT_S (+2 s
    for the client's own error), here 1 s."""
    pytest.importorskip("distributed")
    monkeypatch.setattr(executors, "CONNECT_TIMEOUT_S", 1.0)
    started = time.monotonic()
    with pytest.raises(InputError, match=r"no Dask scheduler answered at 127\.0\.0\.1:\d+ "
                                         r"within 3 s") as caught:
        executors.DaskExecutor(address=f"127.0.0.1:{silent_port}").open()
    assert caught.value.field == "--address"
    assert time.monotonic() - started < 8


def test_bounded_call_passes_results_and_errors_through():
    assert executors.bounded_call(lambda: 7, "here", "thing", 1.0) == 7
    with pytest.raises(KeyError):
        executors.bounded_call(lambda: {}["x"], "here", "thing", 1.0)
    with pytest.raises(InputError, match="no thing answered at here within 0.2 s"):
        executors.bounded_call(lambda: time.sleep(5), "here", "thing", 0.2)


def test_the_local_dask_cluster_serves_no_http_pages():
    """With dashboard_address=None the scheduler still answered on 8787 with its info pages
    (logs, call stacks); now every route is gone."""
    pytest.importorskip("distributed")
    pytest.importorskip("cryptography")
    runner = executors.DaskExecutor(n_jobs=1)
    runner.open()
    try:
        scheduler = runner.cluster.scheduler
        port = scheduler.http_server._sockets and next(
            iter(scheduler.http_server._sockets.values())).getsockname()[1]
        for path in ("/info/main/workers.html", "/json/counts.json", "/metrics"):
            with pytest.raises(urllib.error.HTTPError) as caught:
                urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5)
            assert caught.value.code == 404
    finally:
        runner.close()


def test_an_unreadable_compiled_module_folder_is_skipped_with_one_line(monkeypatch, capsys):
    """A home folder that cannot be entered made every command fail at import."""
    monkeypatch.delenv("PREFIXSIM_PURE", raising=False)
    monkeypatch.setenv("PREFIXSIM_ACCEL_DIR", "/nonexistent/accel")

    def refuse(self: Path) -> bool:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(Path, "is_dir", refuse)
    assert accel.install() is None
    err = capsys.readouterr().err.splitlines()
    assert err == ["prefixsim: warning: compiled modules not used: cannot read their folder "
                   "(Permission denied)"]


def test_ctrl_c_while_the_command_line_loads_exits_130_in_one_line(monkeypatch, capsys):
    def interrupted(name: str) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(entry.importlib, "import_module", interrupted)
    with pytest.raises(SystemExit) as caught:
        entry.main()
    assert caught.value.code == 130
    assert capsys.readouterr().err == "prefixsim: interrupted while starting\n"


def test_a_ray_address_that_is_open_but_silent_is_refused_before_ray_starts(
        silent_port, monkeypatch):
    """Ray retried such a port for over 400 s; its GCS and client server speak gRPC, so the
    port must answer the HTTP/2 greeting within CONNECT_TIMEOUT_S (here 1 s)."""
    monkeypatch.setattr(executors, "CONNECT_TIMEOUT_S", 1.0)
    started = time.monotonic()
    with pytest.raises(InputError, match="is open but does not answer as a gRPC server"):
        executors.check_reachable(f"127.0.0.1:{silent_port}", 6379, grpc=True)
    assert time.monotonic() - started < 5


def test_a_grpc_server_passes_the_greeting():
    grpc = pytest.importorskip("grpc")
    from concurrent import futures

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=1))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        executors.check_reachable(f"127.0.0.1:{port}", 6379, grpc=True)
    finally:
        server.stop(None)
