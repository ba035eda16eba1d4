"""Where ``tracekit analyze`` spends its time, cold and warm, by stage: a pyinstrument profile.

``python -m benchmarks.profile`` generates (or reuses) the benchmark's traces (``--quick``: 8 x
16 MB; default 8 x 125 MB), then runs ``tracekit analyze DIR --json --md --html --jobs 1`` in a
fresh process under pyinstrument, first with an empty cache (cold), then twice with the cache it
filled (warm; the second warm run counts). ``--jobs 1`` keeps the per-rank map in the profiled
process (with more jobs it runs in workers that the profiler does not see); the wall time of the
same command with the default jobs is measured beside it. The profile's call tree is cut into
stages by the functions that own them:

* ``imports``: every import, wherever it happens (``_find_and_load``);
* ``read: cache (events)``, ``write: cache (events)``: the event cache's Parquet entries;
* ``read: cache (map)``, ``write: cache (map)``: the per-rank map results' entries;
* ``read: decode``: the rest of reading the files (cold: the JSON decode);
* ``map: <entry>``: each registered analysis's per-rank part; ``map: classify``: the run of a shard;
* ``reduce: <entry>``: each cross-rank part (a shared intermediate is charged to the first entry
  that asks for it); ``reduce: other``: gathering the shards' tables, the run's metadata;
* ``render: <renderer>``: each report format; ``write: reports``: writing them;
* ``other``: the rest (the command line, the capture summary, the executor).

Python's own start-up (before the profiler starts) is measured as ``python -c pass``. Prints
the table and writes the JSON (``--out``, default ``benchmarks/results/profile_<size>.json``).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Final

from benchmarks.generate import DATA_DIR, Spec, generate
from benchmarks.run import _env

HERE: Final = Path(__file__).resolve().parent
QUICK_MB: Final = 16.0
#: Functions whose whole time is one stage (matched on the function's name and its file).
WHOLE: Final = (
    ("_find_and_load", "importlib", "imports"),
    ("load", "readers/cache.py", "read: cache (events)"),
    ("store", "readers/cache.py", "write: cache (events)"),
    ("load", "pipeline/map_cache.py", "read: cache (map)"),
    ("store", "pipeline/map_cache.py", "write: cache (map)"),
    ("rank_run", "pipeline/shards.py", "map: classify"),
    ("collective_counts", "readers/load.py", "map: classify"),
    ("emit", "cli/emit.py", "write: reports"),
)
#: Functions whose time, less that of the stages found inside them, is one stage.
CONTAINERS: Final = (
    ("parse_files", "readers/parse.py", "read: decode"),
    ("map_ranks", "analyzers/mapreduce.py", "map: other"),
    ("reduce_outcome", "analyzers/analysis.py", "reduce: other"),
)


def _entry_functions() -> dict[tuple[str, str], str]:
    """(function name, module file) of every registered per-rank and cross-rank part -> stage."""
    from tracekit.analyzers.registry import ANALYSES  # noqa: PLC0415

    out: dict[tuple[str, str], str] = {}
    for entry in ANALYSES:
        for fn, stage in ((entry.per_rank, "map"), (entry.cross_rank, "reduce")):
            if fn is not None:
                module = fn.__module__.replace(".", "/") + ".py"
                out.setdefault((fn.__name__, module), f"{stage}: {entry.name}")
    return out


def _stage_of(frame: Any, entries: dict[tuple[str, str], str]) -> tuple[str, bool] | None:
    """The stage ``frame`` starts, and whether it is a container (its inner stages apart)."""
    path = frame.file_path or ""
    for function, where, stage in WHOLE:
        if frame.function == function and where in path:
            return stage, False
    for function, where, stage in CONTAINERS:
        if frame.function == function and where in path:
            return stage, True
    for (function, module), stage in entries.items():
        if frame.function == function and path.endswith(module):
            return stage, True
    if frame.function == "render" and "tracekit/reports/" in path:
        return f"render: {frame.class_name or Path(path).stem}", True
    return None


def breakdown(root: Any) -> dict[str, float]:
    """Seconds per stage of a pyinstrument frame tree (every second counted once)."""
    entries = _entry_functions()
    totals: dict[str, float] = {}

    def visit(frame: Any, current: str) -> None:
        found = _stage_of(frame, entries)
        if found is not None and not (found[0] == "imports" and current == "imports"):
            stage, container = found
            if not container:
                totals[stage] = totals.get(stage, 0.0) + frame.time
                return
            current = stage
        inner = sum(c.time for c in frame.children)
        totals[current] = totals.get(current, 0.0) + frame.time - inner
        for child in frame.children:
            visit(child, current)

    visit(root, "other")
    return dict(sorted(totals.items(), key=lambda kv: -kv[1]))


def child(out: Path, args: list[str]) -> None:
    """Run ``tracekit`` with ``args`` in this process under pyinstrument; write the breakdown to ``out``."""
    from pyinstrument import Profiler  # noqa: PLC0415

    profiler = Profiler(interval=0.001)
    profiler.start()
    sys.argv = ["tracekit", *args]
    started = time.perf_counter()
    try:
        from tracekit.cli.main import main  # noqa: PLC0415

        main()
    except SystemExit as exc:
        if exc.code:
            raise
    finally:
        profiler.stop()
    wall = time.perf_counter() - started
    root = profiler.last_session.root_frame() if profiler.last_session else None
    stages = breakdown(root) if root is not None else {}
    out.write_text(json.dumps({"profiled_s": round(wall, 3), "stages": {k: round(v, 3) for k, v in stages.items()}}))


def _wall(command: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(command, check=True, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - started


def profile(folder: Path, work: Path) -> dict[str, Any]:
    """Cold and warm profiles of ``tracekit analyze folder``, and their wall times unprofiled."""
    cache = work / "cache"
    reports = ["--json", str(work / "a.json"), "--md", str(work / "a.md"), "--html", str(work / "a.html")]
    analyze = ["analyze", str(folder), *reports, "--cache-dir", str(cache)]
    out: dict[str, Any] = {"python_start_s": round(min(_wall([sys.executable, "-c", "pass"]) for _ in range(3)), 3)}
    for name in ("cold", "warm", "warm"):
        if name == "cold" and cache.exists():
            subprocess.run(["rm", "-rf", str(cache)], check=True)
        result = work / f"{name}.json"
        command = [sys.executable, "-m", "benchmarks.profile", "--child", str(result), "--", *analyze, "--jobs", "1"]
        wall = _wall(command)
        out[name] = json.loads(result.read_text()) | {"wall_s": round(wall, 3)}
    subprocess.run(["rm", "-rf", str(cache)], check=True)
    command = [sys.executable, "-m", "tracekit", *analyze]
    out["unprofiled_default_jobs"] = {"cold_s": round(_wall(command), 3), "warm_s": round(_wall(command), 3)}
    return out


def table(doc: dict[str, Any]) -> str:
    """The cold and warm stages side by side."""
    stages = list(dict.fromkeys([*doc["warm"]["stages"], *doc["cold"]["stages"]]))
    lines = ["| stage | cold s | warm s |", "|---|---:|---:|", f"| Python start-up | {doc['python_start_s']:.2f} | |"]
    for stage in stages:
        cold, warm = doc["cold"]["stages"].get(stage, 0.0), doc["warm"]["stages"].get(stage, 0.0)
        if max(cold, warm) >= 0.005:
            lines.append(f"| {stage} | {cold:.2f} | {warm:.2f} |")
    lines.append(f"| **profiled in all** | {doc['cold']['profiled_s']:.2f} | {doc['warm']['profiled_s']:.2f} |")
    lines.append(f"| wall, `--jobs 1`, profiled | {doc['cold']['wall_s']:.2f} | {doc['warm']['wall_s']:.2f} |")
    plain = doc["unprofiled_default_jobs"]
    lines.append(f"| wall, default jobs, not profiled | {plain['cold_s']:.2f} | {plain['warm_s']:.2f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    """Command line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=8, help="ranks (files) [8]")
    parser.add_argument("--mb-per-rank", type=float, default=125.0, help="MB of JSON per rank [125]")
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_MB:g} MB per rank")
    parser.add_argument("--data-dir", type=Path, default=DATA_DIR, help="where generated traces are kept")
    parser.add_argument("--out", type=Path, help="results JSON [benchmarks/results/profile_<size>.json]")
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args, rest = parser.parse_known_args(argv)
    if args.child is not None:
        child(args.child, [a for a in rest if a != "--"])
        return
    mb = QUICK_MB if args.quick else args.mb_per_rank
    spec = Spec(ranks=args.ranks, mb_per_rank=mb)
    folder = generate(spec, args.data_dir, log=True)
    with tempfile.TemporaryDirectory(prefix="tracekit-profile-") as tmp:
        doc = {"spec": {"ranks": args.ranks, "mb_per_rank": mb}, **profile(folder, Path(tmp))}
    out = args.out or HERE / "results" / f"profile_{args.ranks}x{mb:g}mb.json"
    out.write_text(json.dumps(doc, indent=2) + "\n")
    print(table(doc))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
