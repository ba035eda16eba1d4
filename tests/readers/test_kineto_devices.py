"""Device events of accelerators other than CUDA and ROCm, as libkineto names their categories."""

from __future__ import annotations

from typing import TYPE_CHECKING

import polars as pl

from tests.factories import write_kineto
from tests.factories_devices import DEVICE, MTIA_COPY, MTIA_LAUNCH, host, mtia_steps, on_device
from tracekit.model.input_warnings import InputWarning
from tracekit.readers import kineto_native
from tracekit.readers.kineto import _read_whole, read_chunked

if TYPE_CHECKING:
    from pathlib import Path

    from tracekit.readers.trace import RankTrace

MTIA = ("MTIA",)


def read_both(path: Path) -> RankTrace:
    """``path`` read whole (msgspec) and in small chunks (the native decoder where it was built):
    the same frames and warnings either way."""
    assert kineto_native.ENABLED or kineto_native._native is None  # chunks decoded natively where built
    whole = _read_whole(path)
    chunked = read_chunked(path, chunk_bytes=2048, jobs=1)
    assert chunked is not None
    assert whole.events.equals(chunked.events) and whole.warnings == chunked.warnings
    return whole


def kinds_by_name(trace: RankTrace) -> dict[str, set[str]]:
    rows = trace.events.group_by("name", "kind").len().select(pl.col("name").cast(pl.String), "kind").rows()
    out: dict[str, set[str]] = {}
    for name, kind in rows:
        out.setdefault(name, set()).add(kind)
    return out


def test_mtia_launches_and_device_work_are_read(tmp_path: Path) -> None:
    trace = read_both(write_kineto(tmp_path / "mtia.json", mtia_steps(), world_size=1, devices=MTIA))
    kinds = kinds_by_name(trace)
    assert kinds[MTIA_LAUNCH] == {"runtime"} and kinds["synchronize"] == {"runtime"}
    assert kinds["fused_linear_relu"] == {"kernel"} and kinds[MTIA_COPY] == {"memcpy"}  # HTA: dma* is memory
    device = trace.events.filter(pl.col("kind").is_in(["kernel", "memcpy"]))
    assert device.height == 20
    assert set(device["device"]) == {DEVICE} and set(device["stream"]) == {3}
    # every device event has the launch of its correlation id on the host
    launches = trace.events.filter(pl.col("name") == MTIA_LAUNCH).select("correlation")
    assert device.join(launches, on="correlation", how="anti").height == 0
    assert trace.warnings == ()


def test_other_accelerators_calls_are_runtime_and_driver_calls(tmp_path: Path) -> None:
    events = [
        host("xpu_runtime", "zeCommandListAppendLaunchKernel", 10, 2, correlation=1),
        host("xpu_driver", "zeEventHostSynchronize", 13, 2, correlation=2),
        host("privateuse1_runtime", "aiuLaunchControlBlocks", 16, 2, correlation=3),
        host("privateuse1_driver", "drvSubmit", 19, 2, correlation=4),
        host("hpu_op", "launch_recipe", 22, 2),
        host("glow_runtime", "glow::execute", 25, 2),
    ]
    trace = read_both(write_kineto(tmp_path / "calls.json", events))
    assert trace.events["kind"].to_list() == ["runtime", "driver", "runtime", "driver", "runtime", "runtime"]
    assert trace.events["device"].null_count() == len(events)  # host calls: on no device


def test_an_unknown_category_on_a_device_track_is_device_work(tmp_path: Path) -> None:
    # a vendor plugin's own category: on its device's track (pid 1, args.device 1) device work,
    # a copy or set where the name says so; on the host's track, or without a device id, not;
    # nor are libkineto's own categories of no work (a CUPTI range, a CUDA event record, MTIA's
    # counters, the profiler's overhead), wherever they lie
    events = [
        on_device("acme_device_op", "acme_gemm", 10, 5, pid=1, device=1, stream=4, correlation=7),
        on_device("acme_device_op", "acme_memcpy_h2d", 16, 2, pid=1, device=1),
        on_device("acme_device_op", "Memset (Device)", 19, 1, pid=1, device=1),
        host("acme_device_op", "acme_host_side", 20, 3, device=1),
        on_device("acme_device_op", "acme_no_device_id", 24, 3, pid=1),
        *(
            on_device(cat, cat, 30 + i, 1, device=DEVICE)
            for i, cat in enumerate(("cuda_profiler_range", "cuda_event", "mtia_counters", "overhead"))
        ),
    ]
    trace = read_both(write_kineto(tmp_path / "acme.json", events))
    got = trace.events.select(pl.col("name").cast(pl.String), "kind", "device", "stream").rows()
    assert got == [
        ("acme_gemm", "kernel", 1, 4),
        ("acme_memcpy_h2d", "memcpy", 1, 3),  # no stream in its args: its track's thread, as for CUDA
        ("Memset (Device)", "memset", 1, 3),
        ("acme_host_side", "other", None, None),
        ("acme_no_device_id", "other", None, None),
        ("cuda_profiler_range", "other", None, None),
        ("cuda_event", "other", None, None),
        ("mtia_counters", "other", None, None),
        ("overhead", "other", None, None),
    ]
    assert trace.warnings == ()


def test_device_events_that_are_not_read_say_which_device(tmp_path: Path) -> None:
    # MTIA Insight's on-device events: the device's, but no work tracekit reads
    events = mtia_steps(2, device_cat="mtia_insight")
    trace = read_both(write_kineto(tmp_path / "insight.json", events, world_size=1, devices=MTIA))
    assert not trace.events["kind"].is_in(["kernel", "memcpy", "memset"]).any()
    assert trace.warnings == (InputWarning(kind="device_events_unread", key="mtia", value="mtia_insight", count=10),)
