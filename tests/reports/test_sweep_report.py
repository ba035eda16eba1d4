"""The sweep's matrix from a saved sweep record, and every renderer on it: the best cell
under the headroom, its margin with an interval, OOM and failed cells, the probe, the
DeepSpeed caveat, heatmaps in the offline HTML, and JSON that loads back."""

from __future__ import annotations

import json
import re
from pathlib import Path

import msgspec
import pytest

from tracekit.analyzers.sweep import build_matrix
from tracekit.pipeline import sweep_matrix
from tracekit.reports import TerminalRenderer, renderer
from tracekit.reports import sweep_tables as st
from tracekit.results.sweep import (
    CellRun,
    GridAxis,
    MatrixNote,
    ProbeRecord,
    Sweep,
    SweepMatrix,
    dump_sweep,
    load_matrix,
    load_sweep,
)
from tracekit.results.vocab import CapacitySource, Change, MatrixNoteKind, MeasureNote, ProbeStop, Unit

GIB = 1 << 30


def _run(config: str, batch: int, steps_ms: list[float], peak_gib: float | None, **kw: object) -> CellRun:
    return CellRun(
        cell=f"accelerate_config={config},batch_size={batch}",
        values={"accelerate_config": config, "batch_size": str(batch)},
        repeat=kw.pop("repeat", 1),  # type: ignore[arg-type]
        folder=f"cells/{config}-{batch}",
        status=kw.pop("status", "ok"),  # type: ignore[arg-type]
        started="2026-01-01T00:00:00+00:00",
        seconds=5.0,
        backend={"ddp": "DDP", "fsdp": "FSDP FULL_SHARD", "deepspeed_zero2": "ZeRO-2"}[config],
        batch_size=batch,
        world_size=4,
        step_ns=[round(ms * 1e6) for ms in steps_ms],
        step_mean_ns=sum(steps_ms) / len(steps_ms) * 1e6 if steps_ms else None,
        memory_device="cuda",
        peak_allocated_bytes=None if peak_gib is None else round(peak_gib * 0.9 * GIB),
        peak_reserved_bytes=None if peak_gib is None else round(peak_gib * GIB),
        gap_bytes=None if peak_gib is None else round(peak_gib * 0.1 * GIB),
        **kw,  # type: ignore[arg-type]
    )


def _sweep() -> Sweep:
    # device of 10 GiB, 10% headroom: a cell may peak at 9 GiB
    steady = [100.0, 101.0, 99.0, 100.5, 99.5]
    runs = [
        _run("ddp", 8, steady, 4.0),  # 320 samples/s
        _run("fsdp", 8, [150.0, 151.0, 149.0, 150.5, 149.5], 3.0),  # 213 samples/s
        _run("deepspeed_zero2", 8, [], None, status="failed", reason="deepspeed is not installed"),
        _run("ddp", 16, [x * 1.5 for x in steady], 9.5),  # fastest, 427 samples/s, but over the headroom
        _run("fsdp", 16, [x * 1.6 for x in steady], 8.0),  # 400 samples/s: the best within the headroom
        _run("deepspeed_zero2", 16, [], None, status="failed", reason="deepspeed is not installed"),
    ]
    probe = ProbeRecord(
        base="accelerate_config=fsdp",
        values={"accelerate_config": "fsdp"},
        tried=[32, 24],
        last_fit=24,
        first_oom=32,
        error="OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
        done=True,
    )
    return Sweep(
        grid=[
            GridAxis(key="batch_size", values=["8", "16"]),
            GridAxis(key="accelerate_config", values=["ddp", "fsdp", "deepspeed_zero2"]),
        ],
        device_memory_bytes=10 * GIB,
        cells=[r.cell for r in runs],
        runs=runs,
        probes=[probe],
        probe_oom=True,
        finished=True,
    )


@pytest.fixture(scope="module")
def matrix() -> SweepMatrix:
    return build_matrix(_sweep(), source="sweep-dir", headroom_pct=10.0)


def test_best_is_the_fastest_within_the_headroom_with_its_margin(matrix: SweepMatrix) -> None:
    rows = {r.cell: r for r in matrix.rows}
    over = rows["accelerate_config=ddp,batch_size=16"]
    assert over.within_headroom is False and over.peak_pct == pytest.approx(95.0)
    assert matrix.best is not None
    assert matrix.best.cell == "accelerate_config=fsdp,batch_size=16"
    assert matrix.best.samples_per_s == pytest.approx(64 * 1e9 / 160e6, rel=1e-3)
    assert matrix.best.runner_up == "accelerate_config=ddp,batch_size=8"
    margin = matrix.best.margin
    assert margin is not None and margin.ci is not None
    assert margin.change is Change.FASTER  # 400 against 320 samples/s, steps steady within 1%
    assert margin.ci.low <= margin.delta <= margin.ci.high  # type: ignore[operator]
    assert margin.delta == pytest.approx(400 - 320, rel=0.01)
    failed = rows["accelerate_config=deepspeed_zero2,batch_size=8"]
    assert failed.status == "failed" and failed.reason == "deepspeed is not installed" and failed.samples_per_s is None
    assert rows["accelerate_config=fsdp,batch_size=8"].probe_last_fit == 24
    assert rows["accelerate_config=ddp,batch_size=8"].probe_last_fit is None
    assert matrix.deepspeed and matrix.capacity_source is CapacitySource.DEVICE


def test_no_capacity_means_no_headroom_check() -> None:
    sweep = _sweep()
    m = build_matrix(
        Sweep(**{**{f: getattr(sweep, f) for f in sweep.__struct_fields__}, "device_memory_bytes": None}), source="x"
    )
    assert m.best is not None and m.best.cell == "accelerate_config=ddp,batch_size=16"
    assert all(r.within_headroom is None for r in m.rows)
    assert [n.kind for n in m.notes] == [MatrixNoteKind.NO_CAPACITY]
    assert st.lines(m)[-1] == "no memory capacity known (CPU run without --mem-budget-gb): the headroom is not checked"


def test_every_format_renders_the_matrix(matrix: SweepMatrix, tmp_path: Path) -> None:
    text = TerminalRenderer(width=250).render(matrix)
    assert "FSDP FULL_SHARD" in text and "ok, best" in text and "FAILED" in text and "ok, over headroom" in text
    assert "DeepSpeed runs its optimizer work inside backward hooks" in text
    md = renderer("md").render(matrix)
    assert re.search(r"\| fsdp \| FSDP FULL\\?_SHARD \| 16 \| 64 \| 160\.\d+ \| 400\.0 \|", md)
    assert "24 / 32" in md and "CUDA out of memory" in md
    html = renderer("html").render(matrix)
    charts = json.loads(re.search(r'id="tracekit-charts">(.*?)</script>', html, re.S).group(1))  # type: ignore[union-attr]
    assert set(charts) == {"throughput", "memory"}
    heat = charts["throughput"]["data"][0]
    assert heat["type"] == "heatmap" and heat["x"] == ["8", "16"]
    assert heat["z"][heat["y"].index("accelerate_config=fsdp")][1] == pytest.approx(400.0, rel=1e-3)
    assert "https://" not in html.split("<script>", 1)[0]  # plotly is inlined: opens offline
    loaded = load_matrix(renderer("json").render(matrix), source="m.json")
    assert loaded == matrix


def test_report_reads_a_saved_sweep_folder(tmp_path: Path) -> None:
    (tmp_path / "sweep.json").write_bytes(dump_sweep(_sweep()))
    m = sweep_matrix(tmp_path, headroom_pct=5.0)
    assert m.best is not None and m.best.cell == "accelerate_config=ddp,batch_size=16"  # 9.5 GiB fits 95%
    assert m.source == str(tmp_path)


#: Why a probe ended without an OOM, and its words (as sweep 1.0 held them in ``stopped``).
PROBE_STOPS = [
    ({"stopped": ProbeStop.FAILED, "failed_batch": 48, "failure": "rank 1 hung"}, "batch size 48: rank 1 hung"),
    ({"stopped": ProbeStop.NONE_FIT}, "no batch size fit"),
    ({"stopped": ProbeStop.NO_OOM, "last_fit": 64}, "no OOM up to batch size 64"),
]


@pytest.mark.parametrize(("fields", "words"), PROBE_STOPS)
def test_each_probe_stop_is_words(fields: dict[str, object], words: str) -> None:
    probe = ProbeRecord(base="", values={}, done=True, **fields)  # type: ignore[arg-type]
    assert st.probe_stop(probe) == words
    matrix = build_matrix(msgspec.structs.replace(_sweep(), probes=[probe]), source="x")
    assert st.probes_table(matrix).rows[0][-1] == words


def test_every_sweep_kind_has_its_words() -> None:
    assert {f["stopped"] for f, _ in PROBE_STOPS} == set(ProbeStop) == set(st.PROBE_STOPS)
    assert set(st.CAPACITIES) == set(CapacitySource)
    assert set(st.MATRIX_NOTES) == set(MatrixNoteKind)


@pytest.mark.parametrize(
    ("note", "words"),
    [
        (
            MatrixNote(kind=MatrixNoteKind.NO_CAPACITY),
            "no memory capacity known (CPU run without --mem-budget-gb): the headroom is not checked",
        ),
        (
            MatrixNote(kind=MatrixNoteKind.CPU_RSS),
            "CPU run: peak memory is the worst rank's peak RSS of its whole process (torch included)",
        ),
        (
            MatrixNote(kind=MatrixNoteKind.UNFINISHED, ran=3, cells=6),
            "the sweep did not finish: 3 of 6 cells ran (--resume continues it)",
        ),
    ],
)
def test_each_matrix_note_is_words(note: MatrixNote, words: str) -> None:
    assert st.matrix_note(note) == words


@pytest.mark.parametrize(
    ("source", "words"), [(CapacitySource.DEVICE, "device memory"), (CapacitySource.BUDGET, "memory budget")]
)
def test_each_capacity_is_words(matrix: SweepMatrix, source: CapacitySource, words: str) -> None:
    m = msgspec.structs.replace(matrix, capacity_source=source)
    assert st.capacity(m) == words
    assert f"leaving 10% of {words} free" in st.best_line(m)


def test_a_sweep_record_of_schema_1_0_loads_its_sentences_as_kinds() -> None:
    doc = json.loads(dump_sweep(_sweep()))
    doc["schema_version"] = "1.0"
    stops = ["no batch size fit", "no OOM up to batch size 24", "batch size 48: rank 0 failed first: boom"]
    doc["probes"] = [{**doc["probes"][0], "stopped": s} for s in stops]
    loaded = load_sweep(json.dumps(doc), source="sweep.json")
    assert loaded.schema_version == "1.1"  # in the layout of 1.1 now: saved again, it says so
    probes = loaded.probes
    assert [(p.stopped, p.failed_batch, p.failure) for p in probes] == [
        (ProbeStop.NONE_FIT, None, None),
        (ProbeStop.NO_OOM, None, None),
        (ProbeStop.FAILED, 48, "rank 0 failed first: boom"),
    ]
    assert [st.probe_stop(msgspec.structs.replace(p, last_fit=24)) for p in probes] == stops


def test_a_matrix_of_schema_1_0_loads_its_sentences_as_kinds(matrix: SweepMatrix) -> None:
    doc = json.loads(renderer("json").render(matrix))
    doc["schema_version"] = "1.0"
    doc["capacity_source"] = "memory budget"
    doc["notes"] = [
        "CPU run: peak memory is the worst rank's peak RSS of its whole process (torch included)",
        "the sweep did not finish: 5 of 6 cells ran (--resume continues it)",
    ]
    rows = doc["rows"]
    for row, note in zip(rows[:3], ["no batch size fit", "batch size 8: hung", "CUDA out of memory"], strict=True):
        del row["probe_error"], row["probe_stopped"]
        row["probe_note"] = note
    margin = doc["best"]["margin"]
    margin.update(label="throughput (samples/s, slowest rank per step)", unit="per_s", note="measured on one side only")
    loaded = load_matrix(json.dumps(doc), source="m.json")
    assert loaded.capacity_source is CapacitySource.BUDGET
    assert loaded.notes == [
        MatrixNote(kind=MatrixNoteKind.CPU_RSS),
        MatrixNote(kind=MatrixNoteKind.UNFINISHED, ran=5, cells=6),
    ]
    assert [(r.probe_stopped, r.probe_error) for r in loaded.rows[:3]] == [
        (ProbeStop.NONE_FIT, None),
        (ProbeStop.FAILED, "hung"),
        (None, "CUDA out of memory"),
    ]
    assert loaded.best is not None and loaded.best.margin is not None
    assert loaded.best.margin.unit is Unit.SAMPLES_PER_S and loaded.best.margin.note is MeasureNote.ONE_SIDE


@pytest.mark.parametrize(
    ("values", "digits"),
    [([0.324, 0.334], 3), ([12.3, 12.4], 2), ([1000.0, 2500.0], 1), ([5.0], 1), ([1.0, 1.00001], 4)],
)
def test_heatmap_labels_tell_the_cells_apart(values: list[float], digits: int) -> None:
    # issue 46, item 8: a memory heatmap of 0.324-0.334 GiB read "0.3" in every cell
    from tracekit.reports.sweep_figures import _digits

    assert _digits(values) == digits
    shown = {f"{v:,.{digits}f}" for v in values}
    assert len(shown) == len(set(values)) or digits == 4
