"""``--scheduler`` is checked before any connection, and a scheduler that is not there is one line at once
(``'not a url'`` waited 120 s, then printed a traceback after the error, issue 33)."""

from __future__ import annotations

import socket
import time

import pytest

from tests.cli.process import run_tracekit
from tests.conftest import SAMPLES
from tracekit.errors import ExecutorError
from tracekit.executors.dask import DaskExecutor, check_address

pytest.importorskip("distributed")


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
