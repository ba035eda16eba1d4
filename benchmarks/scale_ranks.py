"""Benchmark: 1,024 rank files through the local executor and a local Dask cluster, and a cost model.

``python -m benchmarks.scale_ranks`` writes (or reuses) rank files of a few MB of JSON each
with ``benchmarks.generate`` (a real A100 trace repeated in time, the same events on every
rank, each file with its own ``distributedInfo``: the world is the files, so every NCCL
collective is held by every rank and matches across all of them), then analyzes each set in
its own process, with an empty cache (decoding included):

* points of the model: 64 and 256 ranks of 3 MB and of 12 MB, and 16 ranks of 64 MB, through
  the local executor (``--jobs 2``);
* 1,024 ranks of 3 MB through a local Dask cluster of 2 single-threaded workers;
* the Dask scheduler's own cost per task: tasks that do nothing on that cluster;
* the reduce apart: 256 ranks of 3 MB and 1,024 ranks of 3 and of 6 MB, 64 and 1,024 ranks
  of 4 MB of the ``dense`` shape (:func:`benchmarks.generate.dense_source`: each rank the 224
  steps and 2,231 collective instances of an A100 rank of a GB), and 4 ranks of 1 GB (the
  workers' CPU a rank at the size the issue's prediction is of), through a running Dask
  cluster (started here, reached at its address as a user's would be) of
  :data:`APART_WORKERS` workers, more than ``ROUNDS`` times this machine's cores, so that the
  what-ifs re-time each rank on the workers (:mod:`tracekit.analyzers.retime_parallel`): the
  client's CPU seconds and the workers' during the reduce, which the model's apart terms are
  fitted on (:func:`benchmarks.scale_model.fit_apart`), each point run :data:`APART_REPEATS`
  times in turns and the run of least client CPU kept, and the client's CPU by thread (its own,
  polars' pool, the Dask client's event loop). Their JSON is compared with the local run's too:
  the gains are the same whichever way they were re-timed.

Each run reports its stages: ``start`` (the executor: a process pool starts with the first
shard, a Dask cluster up front), ``map`` (every file read and analyzed per rank, up to the
summaries back on the client), ``reduce`` (ranks decided, collectives matched, stragglers,
verdict: on the client), ``report`` (the JSON and terminal reports); the process tree's peak
RSS (workers included) sampled with psutil, its CPU seconds, and the machine's load. The two
1,024-rank JSON reports are compared byte for byte, with their one measured figure (the
analysis's own duration, ``analysis_seconds``) blanked. The model
(:mod:`benchmarks.scale_model`) is fitted on the local points other than 1,024 x 3 MB,
checked against both 1,024-rank runs, and gives 1,024 ranks x 500 MB on 64 workers, with the
reduce on the client and with the ranks re-timed apart on the workers (what a running cluster
of 64 workers does).
Results: ``benchmarks/results/scale_ranks.json``.

    python -m benchmarks.scale_ranks           # all of it: about 25 minutes on 2 cores
    python -m benchmarks.scale_ranks --quick   # 64 and 128 ranks: a check that it runs
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from benchmarks.generate import DATA_DIR, SOURCES, Spec, describe, generate
from benchmarks.run import _env, _last_json, _machine, measure
from benchmarks.scale_model import ApartPoint, Point, check, client_terms, fit, fit_apart
from benchmarks.worker_tasks import time_worker_tasks, worker_tasks_cpu

if TYPE_CHECKING:
    from collections.abc import Callable

HERE: Final = Path(__file__).resolve().parent
JOBS: Final = 2
#: The points the model is fitted on: (ranks, MB per rank).
POINTS: Final = ((64, 3.0), (256, 3.0), (64, 12.0), (256, 12.0), (16, 64.0))
QUICK_POINTS: Final = ((64, 3.0), (64, 6.0))
#: The run checked against the model, through both executors.
LARGE: Final = (1024, 3.0)
QUICK_LARGE: Final = (128, 3.0)
#: The prediction asked for: ranks, MB per rank, workers.
TARGET: Final = (1024, 500.0, 64)
#: Issue 48's: where the client's reduce apart is also given term by term, with its errors.
ISSUE_TARGET: Final = (1024, 1000.0, 64)
NOOP_TASKS: Final = 2000
TARGETS: Final = {"peak_rss_mb_max": 1000, "reduce_s_max": 5.0}  # issue 48 (4,000 MB before)
#: The points of the reduce apart (ranks, MB per rank, shape): two sizes per rank at 1,024 ranks,
#: and fewer ranks, of the A100 shape; ranks of the ``dense`` shape, which hold at 4 MB the
#: collective instances and steps of an A100 rank of a GB (what grows with ranks x instances) ...
APART_POINTS: Final = (
    (256, 3.0, "a100"),
    (1024, 3.0, "a100"),
    (1024, 6.0, "a100"),
    (64, 4.0, "dense"),
    (1024, 4.0, "dense"),
    (4, 1000.0, "a100"),
)
#: ... and a few ranks of the size the issue's prediction is of (:data:`ISSUE_TARGET`: 1 GB of JSON
#: a rank, the last point above): the workers' CPU a rank in the reduce, which grows with the
#: rank's tasks, measured at that size, not extrapolated 166 times from the slope between 3 and
#: 6 MB (``benchmarks.targets.measured_reduce`` reads it; ranks generated once, 4 GB of JSON)
GB_APART: Final = APART_POINTS[-1]
QUICK_APART_POINTS: Final = ((64, 3.0, "a100"), (128, 3.0, "a100"), (128, 6.0, "a100"), (32, 4.0, "dense"))
#: ... on a running cluster of this many single-threaded workers: more than ``ROUNDS`` (3)
#: times the processes the client re-times in (its cores, 2 here), the condition for re-timing
#: the ranks on the workers (the fewest that meet it: this machine's 2 cores run them all)
APART_WORKERS: Final = 7
#: Each point apart is run this many times, in turns, and the run of least client CPU in the
#: reduce kept: the model's growth per rank-MB is the difference of two points' CPU (a few tenths
#: of a second at these sizes), which one disturbed run of a shared machine swamps.
APART_REPEATS: Final = 2


def child(executor_name: str, folder: Path, out: Path, cache: Path) -> None:
    """One analysis, timed per stage (runs in the measured process): prints one JSON line."""
    from tracekit.executors import make_executor  # noqa: PLC0415  (in the measured process only)
    from tracekit.pipeline import AnalyzeOptions, analyze_paths  # noqa: PLC0415
    from tracekit.pipeline.shards import plan  # noqa: PLC0415
    from tracekit.readers.discover import discover_files  # noqa: PLC0415
    from tracekit.reports import TerminalRenderer, renderer  # noqa: PLC0415

    marks = [_now()]
    # a scheduler's address: a running cluster (the reduce apart); else one analysis's own executor,
    # as the command line makes it
    running = "://" in executor_name
    if running:
        executor = make_executor("dask", scheduler=executor_name)
    else:
        executor = make_executor(executor_name, jobs=JOBS, single_use=True)
    workers_cpu = _workers_cpu(executor_name) if running else None
    cpu_marks: list[tuple[float, float]] = []  # (all the workers' CPU, that in the reduce's tasks)
    marks.append(_now())

    threads: list[dict[int, tuple[str, float]]] = []

    def staged(_: str) -> None:  # the reduce begins
        marks.append(_now())
        threads.append(_threads_cpu())
        if workers_cpu is not None:
            cpu_marks.append(workers_cpu())

    apart = _count_apart() if running else None
    # the JSON and terminal reports: no details, as the command line without --details
    options = AnalyzeOptions(executor=executor, jobs=JOBS, cache_dir=cache, stage=staged, details=False)
    analysis = analyze_paths([folder], options).analysis
    marks.append(_now())
    threads.append(_threads_cpu())
    if workers_cpu is not None:
        cpu_marks.append(workers_cpu())
    out.write_text(renderer("json").render(analysis))
    TerminalRenderer(top=10, width=120, color=False).render(analysis)
    marks.append(_now())
    tasks = len(plan(discover_files([folder])[0], workers=executor.workers))
    executor.close()
    stages = {
        f"{name}_{unit}": round(b[i] - a[i], 3)
        for name, a, b in zip(("start", "map", "reduce", "report"), marks, marks[1:], strict=False)
        for i, unit in enumerate(("s", "client_cpu_s"))
    }
    print(
        json.dumps(
            {
                **stages,
                **(_reduce_cpu(*cpu_marks) if len(cpu_marks) == 2 else {}),
                **({"reduce_threads_cpu_s": _by_thread(*threads)} if len(threads) == 2 and threads[0] else {}),
                **({"scenarios_apart": apart} if apart is not None else {}),
                "client_cpu_s": round(time.process_time(), 2),
                "tasks": tasks,
                "ranks": len(analysis.run.ranks),
                "collective_instances": analysis.collectives.count,
                "collectives_complete": sum(1 for i in analysis.collectives.instances if i.complete),
                "verdict": getattr(analysis.verdict.primary.bound or analysis.verdict.primary.note, "value", None),
            }
        )
    )


def _count_apart() -> dict[str, int]:
    """How many scenarios the what-ifs sent to the workers, and how many settled there (the rest
    were re-timed on the client): counted as they run, so that a point apart says it was. The
    what-ifs held on the workers (:mod:`tracekit.analyzers.gains_held`) settle through
    ``settle_each``; plans re-timed apart without them through ``simulate_apart``."""
    from tracekit.analyzers import gains_held, retime_parallel  # noqa: PLC0415  (the measured process only)

    counts = {"sent": 0, "settled": 0}
    apart = retime_parallel.simulate_apart
    settle = gains_held.settle_each

    def tally(out: dict[Any, Any]) -> dict[Any, Any]:
        counts["sent"] += len(out)
        counts["settled"] += sum(1 for v in out.values() if v is not None)
        return out

    def counted(scenarios: dict[Any, Any], *args: Any) -> dict[Any, Any]:
        return tally(apart(scenarios, *args))

    def settled(*args: Any) -> dict[Any, Any]:
        return tally(settle(*args))

    retime_parallel.simulate_apart = counted  # type: ignore[assignment]
    gains_held.settle_each = settled  # type: ignore[assignment]
    return counts


def _workers_cpu(address: str) -> Callable[[], tuple[float, float]]:
    """The CPU seconds the workers of the cluster at ``address`` have spent, summed, and of those
    the seconds in the reduce's tasks since this was called (:data:`~benchmarks.worker_tasks.WORKER_TASKS`,
    each worker's threads inside them), as a function to call (a client of its own, beside the
    analysis's). The tasks' seconds are the work the reduce asks of the workers, without Dask's
    own (heartbeats, its profiler, its event loop), which runs on every worker for as long as the
    reduce lasts, whatever the work."""
    import distributed  # noqa: PLC0415  (the measured process of a point apart only)

    client = distributed.Client(address, set_as_default=False)
    client.run(time_worker_tasks)

    def spent() -> tuple[float, float]:
        return float(sum(client.run(time.process_time).values())), float(sum(client.run(worker_tasks_cpu).values()))

    return spent


def _reduce_cpu(start: tuple[float, float], end: tuple[float, float]) -> dict[str, float]:
    """The workers' CPU seconds in the reduce, all of it and in its tasks, from two marks of
    :func:`_workers_cpu`."""
    return {
        "reduce_workers_cpu_s": round(end[0] - start[0], 3),
        "reduce_workers_task_cpu_s": round(end[1] - start[1], 3),
    }


def _threads_cpu() -> dict[int, tuple[str, float]]:
    """This process's threads (Linux: ``/proc/self/task``): each one's name (Python's, else the
    system's) and CPU seconds; empty where there is no ``/proc``."""
    import threading  # noqa: PLC0415

    named = {t.native_id: t.name for t in threading.enumerate()}
    tick = os.sysconf("SC_CLK_TCK")
    out = {}
    for task in Path("/proc/self/task").glob("*"):
        try:
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
            name = named.get(int(task.name)) or (task / "comm").read_text().strip()
        except (OSError, ValueError, IndexError):
            continue
        out[int(task.name)] = (name, (int(fields[11]) + int(fields[12])) / tick)
    return out


def _by_thread(before: dict[int, tuple[str, float]], after: dict[int, tuple[str, float]]) -> dict[str, float]:
    """The CPU seconds between two :func:`_threads_cpu` by kind of thread: the analysis's own
    (``main``), polars' pool, the Dask client's event loop (``io_loop``: the messages to and from
    the workers), and the rest."""
    kinds = {"MainThread": "main", "IO loop": "io_loop"}
    out = dict.fromkeys(("main", "polars", "io_loop", "other"), 0.0)
    for tid, (name, cpu) in after.items():
        kind = kinds.get(name) or ("polars" if name.startswith("polars") else "other")
        out[kind] += cpu - before.get(tid, (name, 0.0))[1]
    return {k: round(v, 2) for k, v in out.items()}


def _now() -> tuple[float, float]:
    """Wall time, and this process's CPU time."""
    return time.perf_counter(), time.process_time()


def noop_overhead(tasks: int) -> dict[str, float]:
    """Per task, of a local Dask cluster (2 workers) running tasks that do nothing: the wall
    seconds, and the CPU seconds of this process (the client and the scheduler, which a local
    cluster runs in its process)."""
    from tracekit.executors.dask import DaskExecutor  # noqa: PLC0415

    executor = DaskExecutor(workers=JOBS)
    try:
        list(executor.map(abs, list(range(100))))  # warm: the workers have imported what they need
        wall, cpu = _now()
        results = list(executor.map(abs, list(range(tasks))))
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    finally:
        executor.close()
    assert len(results) == tasks
    return {"wall_s": wall / tasks, "cpu_s": cpu / tasks}


def run_point(
    ranks: int,
    mb: float,
    executor: str,
    *,
    data_dir: Path,
    out_dir: Path,
    log: Any,
    scheduler: str | None = None,
    workers: int = JOBS,
    shape: str = "a100",
) -> dict[str, Any]:
    """Generate (or reuse) R files of S MB of ``shape``; analyze them in a measured process with
    an empty cache. ``scheduler``: the address of a running cluster of ``workers`` workers, which
    the measured process reaches (its workers are not in the measured process tree)."""
    spec = Spec(ranks=ranks, mb_per_rank=mb, world_size=ranks, source=str(SOURCES[shape]))
    folder = generate(spec, data_dir)
    out = out_dir / f"{ranks}x{mb:g}mb-{shape}-{executor}.json"
    with tempfile.TemporaryDirectory(prefix="tracekit-scale-cache-") as cache:
        name = scheduler or executor
        command = [sys.executable, "-m", "benchmarks.scale_ranks", "--child", name, str(folder), str(out), cache]
        load_before = os.getloadavg()[0]
        measured = measure(command, env=_env())
    if measured.returncode:
        raise SystemExit(f"{' '.join(command)} failed:\n{measured.stdout_tail}")
    stages = _last_json(measured.stdout_tail)
    row = {
        "ranks": ranks,
        "mb_per_rank": mb,
        "shape": shape,
        "json_mb": round(sum(describe(spec, data_dir)["json_bytes"]) / 1e6, 1),
        "executor": executor,
        "workers": workers,
        **stages,
        "wall_s": round(measured.wall_s, 2),
        "cpu_s": round(measured.cpu_s, 1),
        "workers_cpu_s": round(measured.cpu_s - stages["client_cpu_s"], 1),
        "peak_rss_mb": round(measured.peak_rss_mb),
        "max_process_rss_mb": round(measured.max_process_rss_mb),
        "load_1min": [round(load_before, 2), round(os.getloadavg()[0], 2)],
        "json": str(out),
    }
    shown = {k: row[k] for k in ("wall_s", "peak_rss_mb")} | stages
    log(f"  {ranks} x {mb:g} MB ({shape}) on {executor}: {json.dumps(shown)}")
    return row


def run_apart(
    points: tuple[tuple[int, float, str], ...], *, data_dir: Path, out_dir: Path, log: Any
) -> list[dict[str, Any]]:
    """``points`` analyzed through a running cluster of :data:`APART_WORKERS` workers, started
    here: the what-ifs re-time the ranks on its workers."""
    import distributed  # noqa: PLC0415

    with distributed.LocalCluster(
        n_workers=APART_WORKERS,
        threads_per_worker=1,
        processes=True,
        dashboard_address=":0",
        silence_logs=logging.ERROR,
    ) as cluster:
        runs: list[list[dict[str, Any]]] = [[] for _ in points]
        reports: list[bytes] = [b"" for _ in points]
        for _ in range(APART_REPEATS):  # in turns: every point once, then again
            for i, (r, mb, shape) in enumerate(points):
                row = run_point(
                    r,
                    mb,
                    "dask-apart",
                    data_dir=data_dir,
                    out_dir=out_dir,
                    log=log,
                    scheduler=str(cluster.scheduler_address),
                    workers=APART_WORKERS,
                    shape=shape,
                )
                report = without_time(Path(row["json"]))
                if reports[i] and report != reports[i]:
                    raise SystemExit(f"{r} x {mb:g} MB ({shape}) apart: two runs gave different reports")
                reports[i] = report
                runs[i].append(row)
    rows = []
    for tries in runs:  # the run of least client CPU in the reduce: the least disturbed by the machine
        row = min(tries, key=lambda t: t["reduce_client_cpu_s"])
        row["reduce_client_cpu_s_runs"] = [t["reduce_client_cpu_s"] for t in tries]
        row["reduce_workers_cpu_s_runs"] = [t["reduce_workers_cpu_s"] for t in tries]
        row["reduce_workers_task_cpu_s_runs"] = [t.get("reduce_workers_task_cpu_s") for t in tries]
        rows.append(row)
    for row in rows:
        if not row["scenarios_apart"]["settled"]:
            raise SystemExit(f"{row['ranks']} x {row['mb_per_rank']:g} MB: no scenario was re-timed apart")
    return rows


def apart_point_of(row: dict[str, Any]) -> ApartPoint:
    """The apart model's view of a measured row: :func:`point_of`'s, and the workers' reduce: their
    CPU in the reduce's tasks where measured (``reduce_workers_task_cpu_s``), which grows with the
    ranks, else all their CPU in the reduce, Dask's own included (rows from before stop 92)."""
    p = point_of(row)
    workers = row.get("reduce_workers_task_cpu_s", row["reduce_workers_cpu_s"])
    return ApartPoint(p.ranks, p.mb, p.workers, p.reduce_cpu_s, workers, row["collective_instances"], p.report_cpu_s)


def without_time(path: Path) -> bytes:
    """A JSON report with its measured duration (``analysis_seconds``) blanked."""
    data = path.read_bytes()
    seconds = json.loads(data)["analysis_seconds"]
    return data.replace(f'"analysis_seconds": {seconds}'.encode(), b'"analysis_seconds": null')


def point_of(row: dict[str, Any]) -> Point:
    """The model's view of a measured row: the map's CPU is the workers' and the client's during
    the map (the local executor's client maps shards beside its processes since stop 63)."""
    return Point(
        ranks=row["ranks"],
        mb=row["mb_per_rank"],
        workers=row["workers"],
        executor=row["executor"],
        map_cpu_s=round(row["workers_cpu_s"] + row["map_client_cpu_s"], 3),
        reduce_cpu_s=row["reduce_client_cpu_s"],
        report_cpu_s=row["report_client_cpu_s"],
        wall_s=row["wall_s"],
    )


def run_all(*, quick: bool, data_dir: Path, log: Any) -> dict[str, Any]:
    """Every point, the two large runs, the model and its checks."""
    points = QUICK_POINTS if quick else POINTS
    large = QUICK_LARGE if quick else LARGE
    out_dir = Path(tempfile.mkdtemp(prefix="tracekit-scale-"))
    try:
        rows = [run_point(r, mb, "local", data_dir=data_dir, out_dir=out_dir, log=log) for r, mb in points]
        local = run_point(*large, "local", data_dir=data_dir, out_dir=out_dir, log=log)
        dask = run_point(*large, "dask", data_dir=data_dir, out_dir=out_dir, log=log)
        identical = without_time(Path(local["json"])) == without_time(Path(dask["json"]))
        apart = run_apart(QUICK_APART_POINTS if quick else APART_POINTS, data_dir=data_dir, out_dir=out_dir, log=log)
        same = next(r for r in apart if (r["ranks"], r["mb_per_rank"], r["shape"]) == (*large, "a100"))
        apart_identical = without_time(Path(local["json"])) == without_time(Path(same["json"]))
    finally:
        shutil.rmtree(out_dir, ignore_errors=True)
    overhead = noop_overhead(200 if quick else NOOP_TASKS)
    model = fit(
        [point_of(r) for r in rows],
        task_overhead_s=overhead["cpu_s"],
        instances=[r["collective_instances"] for r in rows],
    )
    model = fit_apart(model, [apart_point_of(r) for r in apart])
    r_issue, mb_issue, _ = ISSUE_TARGET
    terms = client_terms(
        [apart_point_of(r) for r in apart],
        [r["reduce_client_cpu_s_runs"] for r in apart],
        r_issue,
        mb_issue,
        model.instances(mb_issue),
    )
    ranks, mb, workers = TARGET
    for row in [*rows, local, dask, *apart]:
        del row["json"]
    return {
        "machine": _machine(),
        "load_1min_end": round(os.getloadavg()[0], 2),
        "points": rows,
        "large": {"local": local, "dask": dask, "json_identical": identical},
        "apart": {"points": apart, "json_identical_to_local": apart_identical},
        "dask_noop_per_task": {k: round(v, 5) for k, v in overhead.items()},
        "model": model.as_dict(),
        "checks": [check(model, point_of(local)), check(model, point_of(dask))],
        "prediction": {
            "ranks": ranks,
            "mb_per_rank": mb,
            "workers": workers,
            "executor": "dask (a running scheduler and workers: no start-up)",
            **model.stages(ranks, mb, workers, scheduled=True),
        },
        "client_terms_apart": {
            "ranks": r_issue,
            "mb_per_rank": mb_issue,
            "instances_per_rank": round(model.instances(mb_issue)),
            "terms_s": {name: {"value": v, "error": e} for name, (v, e) in terms.items()},
        },
        "prediction_apart": {
            "ranks": ranks,
            "mb_per_rank": mb,
            "workers": workers,
            "executor": "dask (a running cluster: the ranks re-timed on its workers)",
            **model.stages(ranks, mb, workers, scheduled=True, apart=True),
        },
        "targets": {
            **TARGETS,
            "local_peak_rss_mb": local["peak_rss_mb"],
            "local_reduce_s": local["reduce_s"],
            "dask_reduce_s": dask["reduce_s"],
            "json_identical": identical,
            "apart_json_identical": apart_identical,
        },
    }


def table(doc: dict[str, Any]) -> str:
    """The measured points and the model's predictions, as Markdown."""
    lines = [
        "| ranks x MB | executor | tasks | map s | reduce s | report s | wall s | load | peak RSS MB "
        "| map CPU s (model) |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    checked = {(c["point"]["ranks"], c["point"]["executor"]): c for c in doc["checks"]}
    for row in [*doc["points"], doc["large"]["local"], doc["large"]["dask"], *doc["apart"]["points"]]:
        c = checked.get((row["ranks"], row["executor"]))
        model = f"{c['map_cpu_s']['predicted']} ({c['map_cpu_error_pct']:+}%)" if c else "fitted"
        lines.append(
            f"| {row['ranks']} x {row['mb_per_rank']:g}{_shape(row)} | {row['executor']} | {row['tasks']} "
            f"| {row['map_s']:.1f} "
            f"| {row['reduce_s']:.2f} | {row['report_s']:.2f} | {row['wall_s']:.1f} | {max(row['load_1min']):.1f} "
            f"| {row['peak_rss_mb']} | {point_of(row).map_cpu_s:g} {model} |"
        )
    p = doc["prediction"]
    lines.append(
        f"| {p['ranks']} x {p['mb_per_rank']:g} | dask, {p['workers']} workers | {p['tasks']} | {p['map_s']:.0f} "
        f"| {p['reduce_s']:.1f} | {p['report_s']:.1f} | {p['total_s']:.0f} (model) | - | - | - |"
    )
    p = doc["prediction_apart"]
    lines.append(
        f"| {p['ranks']} x {p['mb_per_rank']:g} | dask, {p['workers']} workers, apart | {p['tasks']} "
        f"| {p['map_s']:.0f} | {p['reduce_s']:.1f} | {p['report_s']:.1f} | {p['total_s']:.0f} (model) | - | - | - |"
    )
    return "\n".join(lines)


def _shape(row: dict[str, Any]) -> str:
    """A row's shape where it is not the A100's (rows of runs before stop 76 have none)."""
    shape = row.get("shape", "a100")
    return "" if shape == "a100" else f" {shape}"


def main(argv: list[str] | None = None) -> None:
    """Command line: see ``--help``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small points: a check that it runs")
    parser.add_argument("--data-dir", type=Path, default=DATA_DIR, help="where generated traces are kept")
    parser.add_argument("--out", type=Path, help="results JSON [benchmarks/results/scale_ranks.json]")
    parser.add_argument("--child", nargs=4, metavar=("EXECUTOR", "FOLDER", "OUT", "CACHE"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        name, folder, out, cache = args.child
        child(name, Path(folder), Path(out), Path(cache))
        return

    def log(text: str) -> None:
        print(text, file=sys.stderr, flush=True)

    doc = run_all(quick=args.quick, data_dir=args.data_dir, log=log)
    out = args.out or HERE / "results" / ("scale_ranks_quick.json" if args.quick else "scale_ranks.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=1) + "\n")
    print(table(doc))
    keys = ("model", "prediction", "client_terms_apart", "prediction_apart", "targets")
    print(json.dumps({k: doc[k] for k in keys}, indent=1))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
