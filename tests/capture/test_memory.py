"""The pieces of capture's memory: saved-tensor bytes, the resident set, the file names."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tracekit.capture import files, memory

torch = pytest.importorskip("torch")


def test_saved_tensors_count_each_storage_once_and_only_inside_the_block() -> None:
    saved = memory.SavedTensors()
    x = torch.randn(100, requires_grad=True)  # 400 bytes
    with saved.counting():
        b = x * 2  # a scalar factor: nothing saved
        c = b.sin()  # saves b: 400
        d = c * c  # saves c twice: one storage, 400
        e = c[:50] * b[:50]  # views of c and b: their storages are counted already
    assert saved.bytes == 800
    (d.sum() + e.sum()).backward()  # the saved tensors unpack right: the same gradient as without hooks
    plain = x.detach().clone().requires_grad_()
    pb = plain * 2
    pc = pb.sin()
    ((pc * pc).sum() + (pc[:50] * pb[:50]).sum()).backward()
    assert x.grad is not None and torch.equal(x.grad, plain.grad)
    c.detach().exp().sum()  # outside the block: nothing counted
    y = (x * 3).sin()
    assert saved.bytes == 800 and y.requires_grad


def test_saved_tensors_leave_out_parameters_and_start_from_zero() -> None:
    linear = torch.nn.Linear(256, 8)  # its weight (8 KiB) is saved for the input's gradient, as weight.t()
    x = torch.randn(16, 256, requires_grad=True)  # 16 KiB
    saved = memory.SavedTensors()
    with saved.counting():
        out = linear(x).relu()  # saves x, weight.t() and relu's output (16 x 8 x 4 bytes)
    assert saved.bytes == 16 * 256 * 4 + 16 * 8 * 4
    out.sum().backward()
    assert linear.weight.grad is not None and x.grad is not None
    with saved.counting():
        pass
    assert saved.bytes == 0


def test_the_resident_set_grows_with_what_the_process_touches() -> None:
    before = memory.current_rss_bytes()
    assert before is not None and before > 0
    page = os.sysconf("SC_PAGE_SIZE")
    resident = int(Path("/proc/self/statm").read_text().split()[1]) * page
    assert abs(resident - before) < 64 * 2**20
    block = b"x" * (64 * 2**20)  # written, so resident
    after = memory.current_rss_bytes()
    assert after is not None and after - before > 48 * 2**20
    assert memory.peak_rss_bytes() >= after - 4 * 2**20  # ru_maxrss lags a little
    assert len(block) == 64 * 2**20


def test_no_proc_means_no_resident_set(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(memory, "_STATM", str(tmp_path / "missing"))
    monkeypatch.setattr(memory, "_statm_fd", {})
    assert memory.current_rss_bytes() is None
    assert memory.sample(cuda=False) == {}


def test_samples_on_cpu_and_their_difference() -> None:
    sample = memory.sample(cuda=False)
    assert set(sample) == {"rss_bytes"} and sample["rss_bytes"] > 0
    assert memory.delta(
        {"allocated_bytes": 10, "reserved_bytes": 20}, {"allocated_bytes": 4, "reserved_bytes": 25}
    ) == {
        "allocated_bytes": -6,
        "reserved_bytes": 5,
    }


def test_memory_files_are_captures_own() -> None:
    assert files.memory_timeline_name(3) == "memory_timeline.rank3.raw.json.gz"
    assert files.memory_snapshot_name(3) == "memory_snapshot.rank3.pickle"
    for name in (
        "memory_timeline.rank3.raw.json.gz",
        ".memory_timeline.rank3.4242.raw.json.gz",  # its temporary name while written
        "memory_snapshot.rank0.pickle",
        ".memory_snapshot.rank0.pickle.4242.tmp",
    ):
        assert files.is_own_output(name), name
    assert not files.is_own_output("memory_snapshot.pickle")
    assert not files.is_own_output("my_timeline.raw.json.gz")


def test_a_forked_child_reads_its_own_resident_set() -> None:
    assert memory.current_rss_bytes() is not None  # the parent's file is open now
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child grows by 64 MiB: its reading must show it, not the parent's
        try:
            before = memory.current_rss_bytes() or 0
            block = b"x" * (64 * 2**20)
            grew = (memory.current_rss_bytes() or 0) - before > 48 * 2**20 and len(block) > 0
            os.write(write, b"1" if grew else b"0")
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    assert os.read(read, 1) == b"1"


def test_a_cuda_sample_reads_the_allocators_stats_once(monkeypatch: pytest.MonkeyPatch) -> None:
    torch = pytest.importorskip("torch")
    reads: list[int] = []
    stats = {
        "allocated_bytes": {"all": {"current": 3 << 20, "peak": 5 << 20}, "large_pool": {"current": 1}},
        "reserved_bytes": {"all": {"current": 8 << 20, "peak": 8 << 20}},
    }

    def nested() -> dict[str, object]:
        reads.append(1)
        return stats

    monkeypatch.setattr(torch.cuda, "memory_stats_as_nested_dict", nested)
    monkeypatch.setattr(torch.cuda, "memory_stats", lambda *a, **k: pytest.fail("flattens every stat in Python"))
    assert memory.sample(cuda=True) == {"allocated_bytes": 3 << 20, "reserved_bytes": 8 << 20}
    assert reads == [1]
    monkeypatch.setattr(torch.cuda, "memory_stats_as_nested_dict", dict)  # CUDA not initialized yet
    assert memory.sample(cuda=True) == {"allocated_bytes": 0, "reserved_bytes": 0}
