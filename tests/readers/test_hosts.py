"""The host each trace records: ranks of one host share one clock (``RankInfo.host``)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest

from tests.conftest import SAMPLES
from tracekit.readers.kineto import read_chunked, read_kineto
from tracekit.readers.nsys import read_nsys

if TYPE_CHECKING:
    from pathlib import Path


def _trace(folder: Path, name: str, *, pid: int, host_name: str | None = None) -> Path:
    doc: dict[str, object] = {
        "schemaVersion": 1,
        "traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": pid, "tid": 1, "ts": 10.0, "dur": 5.0}],
    }
    if host_name is not None:
        doc["host_name"] = host_name
    path = folder / name
    path.write_text(json.dumps(doc))
    return path


def test_kineto_host_name_is_the_host(tmp_path: Path) -> None:
    assert read_kineto(_trace(tmp_path, "rank0.json", pid=7, host_name="node-3")).host == "node-3"


@pytest.mark.parametrize(
    ("name", "pid", "host"),
    [
        ("node7_4242.1700000000000.pt.trace.json", 4242, "node7"),  # tensorboard_trace_handler's default
        ("gpu-a_b_4242.1700000000000.pt.trace.json", 4242, "gpu-a_b"),
        ("node7_4242.1700000000000.pt.trace.json", 999, None),  # the pid is not the trace's process
        ("worker0_step_12.1694128201545.pt.trace.json", 59811, None),  # a worker name of one's own
        ("rank0.pt.trace.json", 4242, None),
    ],
)
def test_the_trace_handlers_file_name_gives_the_host_when_its_pid_is_the_traces(
    tmp_path: Path, name: str, pid: int, host: str | None
) -> None:
    assert read_kineto(_trace(tmp_path, name, pid=pid)).host == host


@pytest.mark.parametrize("value", ["", "   ", 42, None, "a\nb"])
def test_a_host_name_that_is_no_name_is_none(tmp_path: Path, value: object) -> None:
    path = tmp_path / "rank0.json"
    path.write_text(json.dumps({"traceEvents": [], "host_name": value}))
    assert read_kineto(path).host is None


def test_real_traces_hosts(shared_traces: Path) -> None:
    kineto = shared_traces / "kineto"
    assert read_kineto(kineto / "hta-misc" / "ns-resolution-rank0.pt.trace.json.gz").host == (
        "twshared39868.02.pnb3.facebook.com"
    )
    dlrm = kineto / "param-dlrm-8rank-v100" / "worker0_step_12.1694128201545.pt.trace.json"
    assert read_kineto(dlrm).host is None
    nsys = shared_traces / "nsys"
    assert {t.host for t in read_nsys(nsys / "nsysai-mfu-2gpu-before.sqlite")} == {"modal"}
    assert [t.host for t in read_nsys(nsys / "pipit-saxpy-mpi-a100-oldschema.sqlite")] == ["nid001608"]


def test_a_capture_records_its_host_read_whole_or_in_chunks() -> None:
    # torch 2.13's Kineto writes host_name before traceEvents: the chunked reader takes it from the head
    trace = SAMPLES / "captures" / "straggler" / "rank0.pt.trace.json.gz"
    chunked = read_chunked(trace, chunk_bytes=64 * 1024)
    assert chunked is not None
    assert read_kineto(trace).host == chunked.host == "vm"
