"""The user-facing Profiler in one process: phases, steps, files, timings."""

from __future__ import annotations

import gzip
import json
import time
import types
from typing import TYPE_CHECKING

import pytest

from tracekit.readers import load_run

if TYPE_CHECKING:
    from pathlib import Path

torch = pytest.importorskip("torch")


def test_user_loop_writes_trace_phases_and_summary(tmp_path: Path) -> None:
    from tracekit.capture import Profiler

    model = torch.nn.Linear(8, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    data = [torch.randn(4, 8) for _ in range(20)]
    with Profiler(out_dir=tmp_path, warmup_steps=1, measured_steps=3, wait=1, warmup=1, active=2) as prof:
        for batch in prof.loader(data):
            with prof.phase("forward"):
                loss = model(batch).sum()
                time.sleep(0.004)  # wall time, no CPU time
                spin_until = time.thread_time() + 0.003
                while time.thread_time() < spin_until:  # 3 ms of CPU time
                    pass
            with prof.phase("backward"):
                loss.backward()
            with prof.phase("optim_step"):
                optimizer.step()
                optimizer.zero_grad()
            if not prof.step():
                break
    phases = json.loads((tmp_path / "phases.rank0.json").read_text())
    assert [s["step"] for s in phases["steps"]] == [1, 2, 3]
    for step in phases["steps"]:
        assert sum(step["phases_ns"].values()) == step["step_ns"]
        assert step["phases_ns"]["forward"] >= 4_000_000
        assert set(step["phases_ns"]) >= {"dataload_wait", "forward", "backward", "optim_step", "device_sync", "other"}
    assert phases["memory"]["peak_rss_bytes"] >= phases["memory"]["rss_bytes"] > 0
    # where the rank's time went: the process's age at each mark, in order (this process is
    # pytest's: it started before the profiler)
    timeline = phases["timeline_s"]
    assert list(timeline) == ["profiling", "steps", "steps_done", "written"]
    assert 0 < timeline["profiling"] <= timeline["steps"] <= timeline["steps_done"] <= timeline["written"]
    for step in phases["steps"]:  # memory around every phase; the phases' changes and other's make the step's
        assert set(step["phase_memory"]) == set(step["phases_ns"]) - {"other"}
        for m in step["phase_memory"].values():
            assert m["delta"]["rss_bytes"] == m["end"]["rss_bytes"] - m["start"]["rss_bytes"]
        assert step["memory_end"]["rss_bytes"] == step["phase_memory"]["device_sync"]["end"]["rss_bytes"]
        assert step["saved_tensor_bytes"] == 4 * 8 * 4  # Linear saves its input, not its weight
        # the process's CPU time over the step: the 3 ms spun, not the 4 ms slept
        assert 3_000_000 <= step["cpu_ns"] < step["step_ns"]
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["per_rank"][0]["step_cpu_ns"] == [s["cpu_ns"] for s in phases["steps"]]
    assert sum(p["share_pct"] for p in summary["phases"]) == pytest.approx(100)
    with gzip.open(tmp_path / "rank0.pt.trace.json.gz", "rt") as f:
        names = {e.get("name") for e in json.load(f)["traceEvents"]}
    assert {"tracekit.phase/forward", "tracekit.phase/dataload_wait", "ProfilerStep#2", "ProfilerStep#3"} <= names
    rank = summary["per_rank"][0]
    assert rank["phase_memory_measure"] == "rss_bytes" and rank["saved_tensor_bytes_mean"] == 128
    assert sum(rank["phase_memory_deltas"].values()) == pytest.approx(rank["step_memory_change_bytes"])
    assert {"kind": "cpu_memory"} in summary["notes"]
    assert not list(tmp_path.glob("memory_*"))  # neither asked for
    run = load_run([tmp_path])
    assert run.rank_ids == [0]
    assert not list(tmp_path.glob(".*.tmp"))  # atomic writes leave no temporary file


def test_an_exception_inside_the_loop_propagates_and_writes_no_phase_file(tmp_path: Path) -> None:
    from tracekit.capture import Profiler

    with (
        pytest.raises(ValueError, match="boom"),
        Profiler(out_dir=tmp_path, warmup_steps=0, measured_steps=3) as prof,
        prof.phase("forward"),
    ):
        raise ValueError("boom")
    assert not (tmp_path / "phases.rank0.json").exists()


def test_saved_tensors_are_counted_in_forward_of_measured_steps_only(tmp_path: Path) -> None:
    from tracekit.capture import Profiler

    weight = torch.randn(64, requires_grad=True)
    held = []
    with Profiler(out_dir=tmp_path, warmup_steps=1, measured_steps=2, wait=0, warmup=1, active=1, nvtx=False) as prof:
        while True:
            with prof.phase("forward"):
                loss = (weight * torch.randn(16, 64)).sin().sum()  # saves the input and the product: 2 x 4 KiB
            with prof.phase("h2d"):
                held.append((weight * torch.randn(1024, 64)).exp())  # saves 256 KiB, outside forward
            with prof.phase("backward"):
                loss.backward()
            if not prof.step():
                break
    steps = json.loads((tmp_path / "phases.rank0.json").read_text())["steps"]
    assert [s["saved_tensor_bytes"] for s in steps] == [2 * 16 * 64 * 4] * 2


def test_memory_timeline_beside_the_trace_and_no_snapshot_on_cpu(tmp_path: Path) -> None:
    from tracekit.capture import Profiler

    model = torch.nn.Linear(32, 4)
    with Profiler(
        out_dir=tmp_path,
        warmup_steps=0,
        measured_steps=3,
        wait=0,
        warmup=1,
        active=2,
        memory_timeline=True,
        memory_snapshot=True,
    ) as prof:
        assert prof.options == {"record_shapes": True, "profile_memory": True, "with_stack": True}
        while True:
            with prof.phase("forward"):
                loss = model(torch.randn(8, 32)).sum()
            with prof.phase("backward"):
                loss.backward()
            if not prof.step():
                break
    with gzip.open(tmp_path / "memory_timeline.rank0.raw.json.gz", "rt") as f:
        rows = json.load(f)
    assert rows and all(len(row) == 4 for row in rows)
    assert not list(tmp_path.glob("*.pickle")) and not list(tmp_path.glob(".*"))
    notes = json.loads((tmp_path / "summary.json").read_text())["notes"]
    assert {"kind": "cpu_snapshot"} in notes
    options = {"kind": "memory_timeline_options", "items": ["record_shapes", "profile_memory", "with_stack"]}
    assert options in notes


@pytest.fixture
def fake_cuda(monkeypatch: pytest.MonkeyPatch) -> tuple[list[object], list[int]]:
    """CUDA with the allocator faked (no GPU here): the calls made, the bytes allocated."""
    import pickle

    calls: list[object] = []
    allocated = [0]

    def dump(path: str) -> None:
        calls.append("dump")
        with open(path, "wb") as f:
            pickle.dump({"segments": [], "device_traces": []}, f)

    fakes = {
        "is_available": lambda: True,
        "synchronize": lambda *a, **k: None,
        "current_device": lambda: 0,
        "memory_stats_as_nested_dict": lambda *a: {
            "allocated_bytes": {"all": {"current": allocated[0]}},
            "reserved_bytes": {"all": {"current": 2 * allocated[0]}},
        },
        "max_memory_allocated": lambda *a: 999,
        "max_memory_reserved": lambda *a: 1999,
        "reset_peak_memory_stats": lambda *a: calls.append("reset"),
        "get_device_properties": lambda device: types.SimpleNamespace(total_memory=80 * 2**30),
    }
    for name, fake in fakes.items():
        monkeypatch.setattr(torch.cuda, name, fake)
    monkeypatch.setattr(torch.cuda.memory, "_record_memory_history", lambda *a, **k: calls.append(k))
    monkeypatch.setattr(torch.cuda.memory, "_dump_snapshot", dump)
    return calls, allocated


def test_on_cuda_peaks_reset_where_measured_steps_begin_and_the_snapshot_is_written(
    tmp_path: Path, fake_cuda: tuple[list[object], list[int]]
) -> None:
    """Device memory at phase boundaries, peaks reset and the allocator's history started
    after the warm-up, its snapshot written atomically at the end and the history stopped."""
    import pickle

    from tracekit.capture import Profiler

    calls, allocated = fake_cuda
    with Profiler(
        out_dir=tmp_path, warmup_steps=1, measured_steps=2, wait=0, warmup=1, active=1, memory_snapshot=True, nvtx=False
    ) as prof:
        while True:
            calls.append(f"step {prof._step}")
            with prof.phase("forward"):
                allocated[0] += 100
            with prof.phase("backward"):
                allocated[0] -= 60
            if not prof.step():
                break
    assert calls == ["step 0", "reset", {"max_entries": 100_000}, "step 1", "step 2", "dump", {"enabled": None}]
    with (tmp_path / "memory_snapshot.rank0.pickle").open("rb") as f:
        assert pickle.load(f)["segments"] == []
    assert not list(tmp_path.glob(".*"))
    record = json.loads((tmp_path / "phases.rank0.json").read_text())
    assert record["notes"] == []  # nothing left unrecorded
    memory = record["memory"]
    assert (memory["device"], memory["scope"]) == ("cuda", "measured steps")
    assert (memory["peak_allocated_bytes"], memory["peak_reserved_bytes"]) == (999, 1999)
    assert (memory["allocated_bytes"], memory["reserved_bytes"]) == (120, 240)
    assert memory["total_bytes"] == 80 * 2**30  # the device's capacity, for the headroom
    step = record["steps"][0]
    assert step["memory_start"] == {"allocated_bytes": 40, "reserved_bytes": 80}
    assert step["phase_memory"]["forward"]["delta"] == {"allocated_bytes": 100, "reserved_bytes": 200}
    assert step["phase_memory"]["backward"]["delta"] == {"allocated_bytes": -60, "reserved_bytes": -120}
    rank = json.loads((tmp_path / "summary.json").read_text())["per_rank"][0]
    assert rank["phase_memory_measure"] == "allocated_bytes"
    assert rank["phase_memory_deltas"] == {"forward": 100, "backward": -60, "device_sync": 0, "other": 0}
    assert rank["phase_reserved_deltas"]["forward"] == 200 and rank["step_memory_change_bytes"] == 40


def test_a_failing_step_still_leaves_the_snapshot(tmp_path: Path, fake_cuda: tuple[list[object], list[int]]) -> None:
    """An out-of-memory is when the allocator's snapshot matters most."""
    from tracekit.capture import Profiler

    calls, _ = fake_cuda
    with (
        pytest.raises(MemoryError),
        Profiler(
            out_dir=tmp_path, warmup_steps=0, measured_steps=3, wait=0, warmup=1, active=1, memory_snapshot=True
        ) as prof,
        prof.phase("forward"),
    ):
        raise MemoryError("CUDA out of memory")
    assert calls == ["reset", {"max_entries": 100_000}, "dump", {"enabled": None}]
    assert (tmp_path / "memory_snapshot.rank0.pickle").exists()
    assert not (tmp_path / "phases.rank0.json").exists()


@pytest.mark.parametrize(("reuse_ns", "expected"), [(3_600 * 10**9, 4 + 1), (0, 2 * 4 + 2)])
def test_one_memory_read_per_phase_boundary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reuse_ns: int, expected: int
) -> None:
    # a phase that starts right after the previous one ended reuses its end sample: 4 phases
    # read memory once each (as they end; the first starts on the step's start sample) and the
    # step once more after the device sync (before it, the last phase's end is reused): not 2
    # reads per phase. "Right after" is a time window: it is set here (an hour, or nothing) so
    # that the count does not depend on how busy the machine is; with no window every boundary
    # reads twice
    from tracekit.capture import Profiler, memory, profiler

    monkeypatch.setattr(profiler, "SAMPLE_REUSE_NS", reuse_ns)
    reads: list[int] = []
    real = memory.sample
    monkeypatch.setattr(memory, "sample", lambda cuda: reads.append(1) or real(cuda))
    with Profiler(out_dir=tmp_path, warmup_steps=0, measured_steps=1, trace=False, wait=0, warmup=0, active=1) as prof:
        reads.clear()
        for name in ("h2d", "forward", "backward", "optim_step"):
            with prof.phase(name):
                pass
        prof.step()
    assert len(reads) == expected
    record = prof.phase_record()["steps"][0]
    assert set(record["phase_memory"]) >= {"h2d", "forward", "backward", "optim_step"}


def test_a_profiler_is_built_from_the_capture_config_or_its_options_as_keywords(tmp_path: Path) -> None:
    from tracekit.capture import Profiler
    from tracekit.capture.config import load_config

    config = load_config(None, {"out_dir": str(tmp_path), "measured_steps": "4", "profiler.active": "2"})
    prof = Profiler(config, samples_per_step=8)
    assert prof.config is config  # nothing overridden: the config as given
    assert (prof.out_dir, prof.measured_steps, prof.schedule, prof.samples_per_step) == (tmp_path, 4, (1, 1, 2, 1), 8)
    same = Profiler(out_dir=tmp_path, measured_steps=4, active=2, samples_per_step=8)
    assert same.config == config
    # keywords override the config given; the schedule's fields set its profiler section
    other = Profiler(config, out_dir=tmp_path / "b", wait=0, memory_saved_tensors=False, nsys=True)
    assert (other.out_dir, other.schedule, other.measured_steps) == (tmp_path / "b", (0, 1, 2, 1), 4)
    assert (other._saved, other.cuda_profiler_range, config.profiler.wait) == (None, True, 1)


def test_an_unknown_option_or_a_wrong_type_is_a_type_error_naming_it(tmp_path: Path) -> None:
    from tracekit.capture import Profiler

    with pytest.raises(TypeError, match=r"unknown option 'mesured_steps'; did you mean measured_steps\?"):
        Profiler(out_dir=tmp_path, mesured_steps=3)
    with pytest.raises(TypeError, match=r"unknown option 'batch_size' \(known: out_dir, warmup_steps"):
        Profiler(out_dir=tmp_path, batch_size=8)  # the launcher's, not the profiler's
    with pytest.raises(TypeError, match=r"Expected `int`, got `str` - at `measured_steps`"):
        Profiler(out_dir=tmp_path, measured_steps="3")


def test_two_loops_writing_one_out_dir_at_once_the_second_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Outside ``tracekit capture`` (an integration, a loop of the user's) each rank holds the lock
    of its part of ``out_dir``: a second run of the same rank into it is refused, naming the first,
    and nothing of the first is written over; once the first is done, a new run may replace it."""
    from tracekit.capture import Profiler, processes
    from tracekit.errors import InputError

    monkeypatch.delenv(processes.RUN_ENV, raising=False)
    options = {"out_dir": tmp_path / "out", "warmup_steps": 0, "measured_steps": 1, "wait": 0, "warmup": 0}
    with Profiler(**options, active=1, trace=False) as first:
        with pytest.raises(InputError, match=r"out_dir is in use by another tracekit run, pid \d+"):
            Profiler(**options, active=1, trace=False).__enter__()
        first.step()
    assert (tmp_path / "out" / "phases.rank0.json").is_file()
    with Profiler(**options, active=1, trace=False) as again:  # the lock was released
        again.step()


def test_an_out_dir_that_is_a_file_is_refused_naming_it(tmp_path: Path) -> None:
    from tracekit.capture import Profiler
    from tracekit.errors import InputError

    (tmp_path / "out").write_text("a file")
    with pytest.raises(InputError, match="out_dir is an existing file") as caught:
        Profiler(out_dir=tmp_path / "out", warmup_steps=0, measured_steps=1, wait=0, warmup=0, active=1).__enter__()
    assert str(tmp_path / "out") in str(caught.value)


def test_a_phase_name_the_reports_could_not_show_is_refused(tmp_path: Path) -> None:
    from tracekit.capture import Profiler
    from tracekit.errors import InputError

    with Profiler(out_dir=tmp_path, warmup_steps=0, measured_steps=1, trace=False, wait=0, warmup=0, active=1) as prof:
        for name, error in (("", "is empty"), ("  ", "is empty"), ("x" * 101, "101 characters"), ("a\nb", "control")):
            with pytest.raises(InputError, match=error), prof.phase(name):
                pass
        with pytest.raises(TypeError, match="must be a str"), prof.phase(3):  # type: ignore[arg-type]
            pass
        with prof.phase("forward"):
            pass
        prof.step()


def test_a_forked_rank_counts_its_age_from_its_parent_s_start() -> None:
    from tracekit.capture import files

    own = files.process_age()
    assert own is not None and own > 0  # Linux: /proc
    try:
        files.forked_at(100.0)
        age = files.process_age()
        # both ages are rounded to 0.01 s: 100.0 + 422.67 is 522.6700000000001, a read of 522.67
        assert age is not None and 100.0 + own - 0.01 <= age < 100.0 + own + 60
    finally:
        files.forked_at(None)
    assert files.process_age() == pytest.approx(own, abs=60)
