"""``--scheduler`` is checked before any connection, and a scheduler that is not there is one line at once
(``'not a url'`` waited 120 s, then printed a traceback after the error, issue 33)."""

from __future__ import annotations

import contextlib
import http.server
import socket
import threading
import time
from typing import TYPE_CHECKING

import pytest

from tests.cli.process import run_tracekit
from tests.conftest import SAMPLES
from tracekit.errors import ExecutorError
from tracekit.executors.dask import HANDSHAKE_S, DaskExecutor, check_address

if TYPE_CHECKING:
    from collections.abc import Iterator

distributed = pytest.importorskip("distributed")


@pytest.mark.parametrize(
    ("address", "why"),
    [
        ("not a url", "white space"),
        ("http://host:8786", "the scheme 'http' is none of tcp, tls, inproc, ucx, ws, wss"),
        ("tcp://host", "it names no port"),
        ("tcp://:8786", "it names no host"),
        ("tcp://host:99999", "its port is not a number from 1 to 65535"),
        ("tcp://host:port", "its port is not a number from 1 to 65535"),
        ("tls://host:8786/path", "more than a host and a port"),
        ("", "it names no host"),
    ],
)
def test_what_is_not_a_scheduler_address_is_refused(address: str, why: str) -> None:
    with pytest.raises(ExecutorError, match=rf"--scheduler '{address}': not a Dask scheduler address \(.*{why}"):
        check_address(address)


@pytest.mark.parametrize(
    "address",
    ["tcp://10.0.0.1:8786", "host:8786", "tls://sched.example.com:8786", "tcp://[::1]:8786", "inproc://x/1/2"],
)
def test_scheduler_addresses_pass(address: str) -> None:
    check_address(address)


def test_a_port_nothing_listens_on_fails_at_once() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    started = time.monotonic()
    with pytest.raises(ExecutorError, match=rf"at tcp://127.0.0.1:{port} \(Connection refused, within 60 s\)"):
        DaskExecutor(f"tcp://127.0.0.1:{port}")
    assert time.monotonic() - started < 30


def test_analyze_with_a_scheduler_that_is_not_an_address_is_one_line_at_once() -> None:
    started = time.monotonic()
    result = run_tracekit(
        "analyze", SAMPLES / "captures", "--executor", "dask", "--scheduler", "not a url", timeout=100
    )
    assert time.monotonic() - started < 60  # it waited 120 s
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip() == (
        "tracekit: error: --scheduler 'not a url': not a Dask scheduler address (it holds white space; "
        "e.g. tcp://host:8786)"
    )


@contextlib.contextmanager
def http_server() -> Iterator[int]:
    """A plain HTTP server on a free port of this machine (it waits for a request, says nothing first)."""
    server = http.server.HTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def test_a_port_held_by_an_http_server_fails_within_the_bound() -> None:
    """The TCP connection succeeds; Dask's client then read the handshake with no time limit (hung)."""
    with http_server() as port:
        started = time.monotonic()
        with pytest.raises(ExecutorError) as caught:
            DaskExecutor(f"tcp://127.0.0.1:{port}", connect_timeout=1)
    assert time.monotonic() - started < 20
    assert str(caught.value) == (
        f"cannot connect to the Dask scheduler at tcp://127.0.0.1:{port} (the server there sent nothing "
        "within 1 s: no Dask handshake; is another program on that port?)"
    )


def test_a_server_that_closes_at_once_is_named() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]

        def close_each() -> None:
            conn, _ = listener.accept()
            conn.close()

        threading.Thread(target=close_each, daemon=True).start()
        with pytest.raises(ExecutorError, match=r"\(the server there closed the connection: no Dask handshake"):
            DaskExecutor(f"tcp://127.0.0.1:{port}", connect_timeout=5)


@pytest.mark.e2e
def test_analyze_with_an_http_server_as_scheduler_is_one_line_within_the_bound() -> None:
    with http_server() as port:
        started = time.monotonic()
        result = run_tracekit(
            "analyze", SAMPLES / "captures", "--executor", "dask", "--scheduler", f"tcp://127.0.0.1:{port}", timeout=100
        )
    assert time.monotonic() - started < HANDSHAKE_S + 30  # it waited without end
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip() == (
        f"tracekit: error: cannot connect to the Dask scheduler at tcp://127.0.0.1:{port} (the server there sent "
        f"nothing within {HANDSHAKE_S:g} s: no Dask handshake; is another program on that port?)"
    )


@pytest.mark.e2e
def test_a_real_scheduler_passes_the_handshake_check() -> None:
    cluster = distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=":0")
    try:
        executor = DaskExecutor(str(cluster.scheduler_address), connect_timeout=30)
        assert executor.workers == 1
        executor.close()
    finally:
        cluster.close()
