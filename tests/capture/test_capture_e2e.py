"""End to end: ``tracekit capture`` on gloo ranks on CPU (8, the normal case, where the ranks' number
matters; 4 where a verdict is asked of one injected cause: half the processes to start), then
``tracekit analyze``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import SAMPLES
from tracekit.readers import load_run
from tracekit.results.capture import ALLOC_CONF_VARS

pytest.importorskip("torch")
pytest.importorskip("accelerate")

FEW_STEPS = ["--warmup_steps=1", "--measured_steps=3", "--profiler.warmup=0", "--profiler.active=2"]


def tracekit(
    *args: str | Path, env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """``tracekit ARGS``: ``python -m tracekit``, or with ``cwd`` the installed ``tracekit``
    command run there, as a user does (``python -m`` would put the folder on ``sys.path``)."""
    command = [sys.executable, "-m", "tracekit"] if cwd is None else [str(Path(sys.executable).parent / "tracekit")]
    return subprocess.run(
        [*command, *map(str, args)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, **(env or {})},
        cwd=cwd,
    )


def capture(config: str, out: Path, *extra: str, nproc: int = 8) -> dict[str, object]:
    result = tracekit(
        "capture",
        "--config_path",
        SAMPLES / "configs" / f"{config}.json",
        "--nproc",
        str(nproc),
        "--out_dir",
        out,
        *FEW_STEPS,
        *extra,
    )
    assert result.returncode == 0, result.stderr + result.stdout
    assert "Phases over" in result.stdout
    assert result.stdout.rstrip().endswith(f"next: tracekit analyze {out}")  # what to run next (issue 46)
    summary: dict[str, object] = json.loads((out / "summary.json").read_text())
    return summary


@pytest.mark.e2e
@pytest.mark.concurrent  # its outcome does not depend on timing (tests/conftest.py)
def test_healthy_capture_is_read_by_analyze(tmp_path: Path) -> None:
    out = tmp_path / "healthy"
    summary = capture("healthy", out)
    assert sorted(p.name for p in out.glob("rank*.pt.trace.json.gz")) == [f"rank{r}.pt.trace.json.gz" for r in range(8)]
    assert len(list(out.glob("phases.rank*.json"))) == 8
    # where each rank's time went: its start-up stages, then the profiler's marks, in order
    for path in out.glob("phases.rank*.json"):
        timeline = json.loads(path.read_text())["timeline_s"]
        marks = ["start", "init", "workload", "prepare", "profiling", "steps", "steps_done", "written"]
        assert list(timeline) == marks, path
        assert list(timeline.values()) == sorted(timeline.values()), path
    env = summary["environment"]
    assert isinstance(env, dict)
    assert env["backend"] == "gloo" and env["world_size"] == 8 and env["distributed_type"] == "MULTI_CPU"
    # the allocator's settings the ranks ran with (capture 1.8): this process's, which they inherit
    assert env["alloc_conf"] == {k: os.environ[k] for k in ALLOC_CONF_VARS if os.environ.get(k)}
    phases = summary["phases"]
    step = summary["step"]
    assert isinstance(phases, list) and isinstance(step, dict)
    assert sum(p["mean_ns"] for p in phases) == pytest.approx(step["mean_ns"], rel=0.05)
    assert sum(p["share_pct"] for p in phases) == pytest.approx(100)
    run = load_run([out])
    assert run.rank_ids == list(range(8)) and run.world_size == 8 and run.backend == "gloo"
    result = tracekit("analyze", out, "--full")
    assert result.returncode == 0 and "ranks: 8 (0-7)" in result.stdout
    # the phases table names each phase without its tracekit.phase/ prefix
    assert any(line.startswith("│ forward ") for line in result.stdout.splitlines()), result.stdout


def verdict_of(out: Path) -> tuple[str, list[str], str]:
    """The verdict of ``tracekit analyze --json``: primary kind, secondary kinds, the terminal's headline."""
    report = out.parent / f"{out.name}.tracekit.json"
    result = tracekit("analyze", out, "--json", report)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("tracekit verdict")
    verdict = json.loads(report.read_text())["verdict"]

    def kind(finding: dict[str, str | None]) -> str:
        return str(finding.get("bound") or finding.get("note"))

    return kind(verdict["primary"]), [kind(f) for f in verdict["secondary"]], result.stdout.splitlines()[1]


@pytest.mark.e2e
def test_straggler_capture_names_the_injected_rank(tmp_path: Path) -> None:
    out = tmp_path / "s"
    # The sample's 80 ms sleep on a 3 MB model leaves gloo's all_reduce, which a loaded 2-core
    # machine stretches to 160 ms, as large as the wait for the straggler (comms-bound outright in
    # one CI run, a correct reading of that trace). A small model and a 250 ms sleep make the
    # injected straggler the largest waste by construction (78-84% of a step of 8 ranks with two
    # CPU hogs beside it). Four traced steps, not two: the verdict names the straggler alone only
    # when its wait exceeds the next waste (gloo's all_reduce, 15-18% under load) beyond the
    # step-to-step variation of the difference (a one-sided 95% Student's t bound). From two steps
    # (t = 6.31) a loaded CI run read "mixed" at 83% against 15%; from four (t = 2.35) three of
    # three runs of 8 ranks beside three CPU hogs read straggler-bound, 80-83%. Four ranks, as the
    # other verdicts of one injected cause here: the straggler, rank 3, is the last of them.
    straggler = '{"hidden": 64, "depth": 2, "straggler_rank": 3, "straggler_delay_ms": 250}'
    steps = ("--measured_steps=5", "--profiler.active=4")
    summary = capture("straggler", out, f"--workload_args={straggler}", *steps, nproc=4)
    throughput = summary["throughput"]
    assert isinstance(throughput, dict)
    assert throughput["slowest_rank"] == 3
    kind, secondary, title = verdict_of(out)
    # straggler-bound; or, on a machine loaded past its cores (stop 100's CI run beside two 2 GB
    # analyses, a 1-minute load of 5 to 7), mixed with the straggler the larger of the two bounds
    # the traced steps do not tell apart, and rank 3 named in its finding
    if kind == "mixed":
        (first, *_) = json.loads((out.parent / f"{out.name}.tracekit.json").read_text())["verdict"]["secondary"]
        assert secondary[0] == "straggler-bound" and first["straggler_rank"] == 3
    else:
        assert kind == "straggler-bound"
        assert "rank 3" in title
    from tracekit.analyzers import analyze

    (slowest,) = analyze(load_run([out])).stragglers.stragglers
    assert slowest.rank == 3 and slowest.phase == "tracekit.phase/forward"


@pytest.mark.e2e
def test_data_bound_capture_has_data_wait_as_largest_phase(tmp_path: Path) -> None:
    # The sample's 3-layer 512-wide model and 160 ms a batch: beside the other tests and CI's
    # doc commands, its 4 gloo ranks' wait for each other at the step's end (the "sync" phase,
    # the loss's all-reduce, where the ranks the load slowed most are waited for) once outgrew
    # the wait for data. A small model and 400 ms a batch (25 ms a sample, 16 a batch, no
    # workers) make the wait for data the largest phase by construction (3 CPU hogs beside it).
    loader = '{"hidden": 64, "depth": 2, "loader_delay_ms": 25}'
    summary = capture("data_bound", tmp_path / "d", f"--workload_args={loader}", nproc=4)
    phases = summary["phases"]
    assert isinstance(phases, list)
    assert max(phases, key=lambda p: p["share_pct"])["phase"] == "dataload_wait"
    kind, secondary, _ = verdict_of(tmp_path / "d")
    # two traced steps: data-bound, or mixed with communication when they do not separate the two
    assert kind == "data-bound" or (kind == "mixed" and "data-bound" in secondary)


@pytest.mark.e2e
def test_comm_heavy_capture_is_comms_bound(tmp_path: Path) -> None:
    out = tmp_path / "c"
    capture("healthy", out, '--workload_args={"comm_heavy": true}', nproc=4)
    kind, secondary, _ = verdict_of(out)
    # comms-bound; or, where the machine's load kept one rank late at the collectives in both
    # traced steps (stop 63's CI run, 4 ranks on 2 cores beside the other tests), straggler-bound
    # with the comms named beside it: the others' wait at the collectives is then that rank's,
    # rightly, and what is left of the collectives is still a bound of its own; or mixed, the
    # comms one of the bounds two traced steps do not tell apart (a loaded CI run, stop 87)
    assert kind == "comms-bound" or (kind in ("straggler-bound", "mixed") and "comms-bound" in secondary)


@pytest.mark.e2e
def test_host_sync_capture_names_the_syncs(tmp_path: Path) -> None:
    out = tmp_path / "h"
    capture("healthy", out, '--workload_args={"host_sync": true}', nproc=4)
    _, secondary, _ = verdict_of(out)
    assert "host-syncs" in secondary  # one .item() per forward: free on CPU, named all the same


USER_WORKLOAD = """
import torch
from tracekit.capture import Workload
from tracekit.capture.workloads import mlp

def crashing(ctx, crash_rank=1, crash_call=3):
    w = mlp(ctx, hidden=32, depth=1)
    calls = {"n": 0}
    def loss_fn(out, target):
        calls["n"] += 1
        if ctx.rank == crash_rank and calls["n"] == crash_call:
            raise RuntimeError("loss exploded on purpose")
        return torch.nn.functional.cross_entropy(out, target)
    w.loss_fn = loss_fn
    return w

def raising(ctx):
    raise ValueError("no such dataset: /data/imagenet")
"""


@pytest.fixture
def user_module(tmp_path: Path) -> Path:
    """The user's folder, holding their workload's module ``userwl.py`` (not on ``PYTHONPATH``:
    the tests run ``tracekit`` from this folder, or name the file)."""
    (tmp_path / "userwl.py").write_text(USER_WORKLOAD)
    return tmp_path


@pytest.mark.e2e
@pytest.mark.concurrent  # its outcome does not depend on timing (tests/conftest.py)
def test_a_crashing_rank_stops_the_run_with_its_number_and_error(tmp_path: Path, user_module: Path) -> None:
    # the workload's module is in the folder tracekit runs from: found as python -m would (issue 46)
    out = tmp_path / "c"
    crashing = "--workload=userwl:crashing"
    result = tracekit("capture", crashing, "--nproc=2", "--out_dir", out, *FEW_STEPS, cwd=user_module)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert "rank 1 failed" in lines[-1] and "loss exploded on purpose" in lines[-1]
    assert "Traceback (most recent call last)" not in result.stderr
    assert 'raise RuntimeError("loss exploded on purpose")' in lines[-1]  # where it raised


@pytest.mark.e2e
@pytest.mark.concurrent  # its outcome does not depend on timing (tests/conftest.py)
def test_a_raising_factory_is_one_line_exit_2(tmp_path: Path, user_module: Path) -> None:
    # the workload named by its file, from another folder: its ranks import it from there too
    spec = f"{user_module / 'userwl.py'}:raising"
    out = tmp_path / "r"
    result = tracekit("capture", f"--workload={spec}", "--nproc=2", "--out_dir", out, *FEW_STEPS, cwd=Path("/"))
    assert result.returncode == 2
    last = result.stderr.strip().splitlines()[-1]
    assert "Traceback" not in result.stderr
    # the short form when every rank reported it; named ranks when the launcher stopped one first
    assert last == f"tracekit: error: workload {spec!r} raised ValueError: no such dataset: /data/imagenet" or (
        last.startswith("tracekit: error: rank ") and "raised ValueError: no such dataset: /data/imagenet" in last
    )


def test_config_errors_are_one_line_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"workload": "mlp", "batchsize": 4}))
    result = tracekit("capture", "--config_path", bad)
    assert result.returncode == 2
    assert result.stderr.strip() == f"tracekit: error: {bad}: unknown config key batchsize; did you mean batch_size?"
    result = tracekit("capture", "--workload=nosuch.module:make")
    assert result.returncode == 2 and "cannot import nosuch.module" in result.stderr


@pytest.mark.e2e
@pytest.mark.concurrent  # its outcome does not depend on timing (tests/conftest.py)
def test_gradient_accumulation_counts_optimizer_phases_once_per_step(tmp_path: Path) -> None:
    import polars as pl

    out = tmp_path / "ga"
    result = tracekit(
        "capture",
        "--nproc",
        "2",
        "--out_dir",
        out,
        "--gradient_accumulation_steps=2",
        "--max_grad_norm=1.0",
        "--batch_size=8",
        *FEW_STEPS,
    )
    assert result.returncode == 0, result.stderr
    run = load_run([out])
    events = run.events.filter(pl.col("rank") == 0)
    steps = events.filter(kind="step")
    assert steps.height == 2
    phases = events.filter(pl.col("name").cast(pl.String).str.starts_with("tracekit.phase/"))
    counts = dict(phases.group_by(pl.col("name").cast(pl.String)).len().iter_rows())
    assert counts["tracekit.phase/forward"] == 2 * counts["tracekit.phase/optim_step"]
    assert counts["tracekit.phase/clip"] == counts["tracekit.phase/optim_step"]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["throughput"]["samples_per_step_per_rank"] == 16


@pytest.mark.e2e
@pytest.mark.concurrent  # its outcome does not depend on timing (tests/conftest.py)
def test_transformer_with_host_sync_and_comm_heavy_knobs(tmp_path: Path) -> None:
    import polars as pl

    out = tmp_path / "tf"
    args = '{"layers": 1, "d_model": 64, "seq_len": 16, "host_sync": true, "comm_heavy": true}'
    result = tracekit(
        "capture",
        "--workload=transformer",
        f"--workload_args={args}",
        "--nproc",
        "2",
        "--batch_size=4",
        "--out_dir",
        out,
        *FEW_STEPS,
    )
    assert result.returncode == 0, result.stderr
    events = load_run([out]).events.filter(pl.col("rank") == 0)
    names = events["name"].cast(pl.String)
    assert (names == "aten::item").sum() >= 2  # host_sync: one .item() in every forward
    assert (names == "gloo:all_reduce").sum() >= 2  # gradients of a 32k vocabulary all-reduced
