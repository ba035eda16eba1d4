"""Comparing the real pairs in ../shared/traces, with the numbers checked against the files themselves."""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING

import pytest

from tracekit.analyzers.compare import compare
from tracekit.pipeline import analyze_paths
from tracekit.results.compare import RunDifference
from tracekit.results.vocab import Change, WarningKind, WorkKind

if TYPE_CHECKING:
    from pathlib import Path

    from tracekit.results.analysis import Analysis
    from tracekit.results.compare import Comparison

pytestmark = pytest.mark.real


def _kernels_per_second(path: Path) -> dict[str, float]:
    """Kernels by demangled name, per second of every device's span: count / summed spans (SQL)."""
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        spans = db.execute(
            "SELECT SUM(s) FROM (SELECT MAX(end) - MIN(start) AS s FROM CUPTI_ACTIVITY_KIND_KERNEL GROUP BY deviceId)"
        ).fetchone()[0]
        rows = db.execute(
            "SELECT n.value, COUNT(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds n ON n.id = k.demangledName "
            "GROUP BY n.value"
        ).fetchall()
    return {name: count / (spans / 1e9) for name, count in rows}


def _busy_share(path: Path) -> float:
    """The share of each device's span covered by its activities (kernels, copies, sets: their union), SQL + merge."""
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        parts = [
            f"SELECT deviceId, start, end FROM {t}"
            for t in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET")
            if t in tables
        ]
        rows = db.execute(" UNION ALL ".join(parts) + " ORDER BY deviceId, start").fetchall()
    busy = span = 0
    for device in {r[0] for r in rows}:
        mine = [(s, e) for d, s, e in rows if d == device]
        span += max(e for _, e in mine) - min(s for s, _ in mine)
        reach = None
        for s, e in mine:
            if reach is None or s > reach:
                busy += e - s
                reach = e
            elif e > reach:
                busy += e - reach
                reach = e
    return 100.0 * busy / span


@pytest.fixture(scope="module")
def nsys_pair(shared_traces: Path) -> tuple[Path, Path, Comparison]:
    before = shared_traces / "nsys" / "nsysai-mfu-2gpu-before.sqlite"
    after = shared_traces / "nsys" / "nsysai-mfu-2gpu-after.sqlite"
    a: Analysis = analyze_paths([before]).analysis
    b: Analysis = analyze_paths([after]).analysis
    return before, after, compare([a], [b])


def test_nsys_pair_has_no_steps_and_says_so(nsys_pair: tuple[Path, Path, Comparison]) -> None:
    _, _, c = nsys_pair
    assert c.noise.unit == "second"
    assert c.step.change is Change.NOT_MEASURED
    assert RunDifference(kind=WarningKind.NO_STEPS, a=0, b=0) in c.warnings
    assert c.a.world_size == c.b.world_size == 2


def test_nsys_pair_kernel_rates_match_sql(nsys_pair: tuple[Path, Path, Comparison]) -> None:
    before, after, c = nsys_pair
    rate_a, rate_b = _kernels_per_second(before), _kernels_per_second(after)
    kernels = [w for w in c.work if w.kind is WorkKind.KERNEL]
    assert kernels, "the kernel changes are listed"
    checked = 0
    for w in kernels:
        if w.name in rate_a and w.a_count is not None:
            assert w.a_count == pytest.approx(rate_a[w.name], rel=1e-3), w.name
            checked += 1
        if w.name in rate_b and w.b_count is not None:
            assert w.b_count == pytest.approx(rate_b[w.name], rel=1e-3), w.name
    assert checked >= 10
    flash = next(w for w in kernels if w.name.startswith("void flash::flash_fwd_kernel"))
    # 68 flash_fwd kernels in 0.599 s of device spans before, 60 in 0.598 s after: fewer per second
    assert flash.change is Change.LOWER
    assert flash.a_count == pytest.approx(113.6, abs=0.1)
    assert flash.b_count == pytest.approx(100.2, abs=0.1)


def test_nsys_pair_idle_share_matches_sql(nsys_pair: tuple[Path, Path, Comparison]) -> None:
    before, after, c = nsys_pair
    idle = next(m for m in c.measures if m.key == "idle_pct")
    assert idle.a == pytest.approx(100 - _busy_share(before), abs=0.05)
    assert idle.b == pytest.approx(100 - _busy_share(after), abs=0.05)
    assert idle.change is Change.HIGHER  # the GPUs sat idle more after the change
    compute = next(m for m in c.measures if m.key == "compute_pct")
    assert compute.change is Change.LOWER
    assert c.verdicts.a.bound == c.verdicts.b.bound  # GPU-compute-bound on both, at a lower share
    shift = next(s for s in c.verdicts.costs if s.bound == "gpu-compute-bound")
    assert shift.delta_pct is not None and shift.delta_pct < -5


def test_hta_trace_diff_pair_warns_of_different_gpus_and_lists_kernel_changes(kineto_dir: Path) -> None:
    folder = kineto_dir / "hta-trace-diff"
    a = analyze_paths([folder / "control-rank3-a100.json.gz"]).analysis
    b = analyze_paths([folder / "test-rank1-v100.json.gz"]).analysis
    c = compare([a], [b])
    [devices] = [w for w in c.warnings if w.kind is WarningKind.DEVICES]
    assert any("A100" in str(d) for d in devices.a_items) and any("V100" in str(d) for d in devices.b_items)
    assert any(w.kind is WarningKind.WORLD_SIZE for w in c.warnings)
    kernels = [w for w in c.work if w.kind is WorkKind.KERNEL]
    appeared = {w.name for w in kernels if w.change is Change.APPEARED}
    disappeared = {w.name for w in kernels if w.change is Change.DISAPPEARED}
    assert any(n.startswith("volta_sgemm") for n in appeared)  # V100 kernels only in B
    assert disappeared
    assert c.step.change is Change.SLOWER  # 77 ms -> 124 ms per step
    assert c.step.a == pytest.approx(77.49e6, rel=1e-3)
    assert c.step.b == pytest.approx(124.07e6, rel=1e-3)
    assert c.verdicts.a.bound is not None and c.verdicts.a.bound.value == "comms-bound"
    assert c.verdicts.b.bound is not None and c.verdicts.b.bound.value == "gpu-compute-bound"
    assert not c.verdicts.same_bound
    forward = next(m for m in c.phases if m.key == "phase:## forward ##")
    assert forward.n_a == forward.n_b == 6
