"""Issue 48's targets (issue 35's, and its own), every one measured in one run on this machine,
and whether each is met.

``python -m benchmarks.targets`` runs, one after the other on an otherwise idle machine:

1. ``benchmarks.run`` on 8 ranks x 125 MB: the floor, tracekit cold and warm, HTA
   (warm >= 50x HTA; cold >= 20x HTA and <= 0.7x the floor; cold's peak RSS <= 0.2x HTA's);
2. ``benchmarks.compare``: ``tracekit compare`` of two analyses saved by this tracekit, all
   three formats written (< 0.5 s);
3. ``benchmarks.scale_file``: one rank of every trace shape (``a100``, ``mi300``, ``dlrm``)
   tiled to 2 GB of JSON, ``tracekit analyze`` alone (peak RSS of its process tree < 0.5 GB);
4. ``benchmarks.scale_ranks``: 1,024 ranks x 3 MB through the local executor and through Dask
   (peak RSS < 1 GB each, the same JSON), and the fitted cost model's 1,024 ranks x 1 GB on 64
   Dask workers (< 60 s, with a reduce < 5 s that does not grow with the MB per rank), its
   reduce as a running cluster of 64 workers runs it: the ranks re-timed on the workers, the
   slopes measured on a running cluster here (``scale_ranks``' points apart, among them 1,024
   ranks of the ``dense`` shape, which hold the collective instances of an A100 rank of a GB,
   and 4 A100 ranks of a GB, whose workers' CPU a rank stands for the workers' part);
5. ``benchmarks.client_reduce``: the client's part of that reduce measured at the target's size
   (its reduce of 1,024 copies of one mapped A100 rank of a GB), which then stands in the
   model's reduce for the client's terms fitted on ranks of a few MB (:func:`measured_reduce`;
   the fitted terms' per rank-MB slope is a few tenths of a second between two points, which
   two runs of one point differ by, extrapolated 300 times); and the map of that A100 rank of a
   GB, once more as a worker maps it, whose CPU stands for the model's map term fitted on ranks
   of 3 to 64 MB (:func:`measured_map`).

Writes every part's own results and the table of targets to one JSON file (``--out``) and
prints the table as Markdown, with the machine and the load it ran under. ``--quick`` runs
small sizes only: a check that the runner works, whose figures mean nothing for the targets.
About 45 minutes in full (HTA, the 2 GB tiles and the 1,024-rank points are most of it).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Final

from benchmarks import client_reduce, compare, run, scale_file, scale_ranks
from benchmarks.generate import DATA_DIR, SHAPES, Spec
from benchmarks.scale_model import Model

HERE: Final = Path(__file__).resolve().parent
#: The scale target: ranks, MB of JSON per rank, Dask workers.
SCALE: Final = (1024, 1000.0, 64)
#: (name, what, bound, "min" or "max")
TARGETS: Final = (
    ("warm_speedup_vs_hta", "HTA wall / tracekit warm wall, 8 x 125 MB", 50.0, "min"),
    ("cold_speedup_vs_hta", "HTA wall / tracekit cold wall, 8 x 125 MB", 20.0, "min"),
    ("cold_over_floor", "tracekit cold wall / floor wall (gunzip + typed decode), 8 x 125 MB", 0.7, "max"),
    ("rss_over_hta", "tracekit cold peak RSS / HTA's, 8 x 125 MB", 0.2, "max"),
    ("compare_s", "tracekit compare of two saved 8 x 125 MB analyses, all formats, wall s", 0.5, "max"),
    ("scale_total_s", "model: 1,024 ranks x 1 GB on 64 Dask workers, wall s", 60.0, "max"),
    ("scale_reduce_s", "model: its reduce (the ranks re-timed on the workers, where measured), wall s", 5.0, "max"),
    ("ranks_1024_local_rss_mb", "1,024 ranks x 3 MB, local executor, peak RSS MB", 1000.0, "max"),
    ("ranks_1024_dask_rss_mb", "1,024 ranks x 3 MB, Dask, peak RSS MB", 1000.0, "max"),
    ("ranks_1024_same_json", "1,024 ranks x 3 MB, the local and Dask JSON reports identical (1: yes)", 1.0, "min"),
    (
        "ranks_1024_apart_same_json",
        "1,024 ranks x 3 MB, re-timed apart on a running cluster's workers, the JSON the local run's (1: yes)",
        1.0,
        "min",
    ),
    *((f"rss_2gb_{s}_mb", f"one 2 GB rank of the {s} shape, peak RSS MB", 500.0, "max") for s in SHAPES),
)


def measured_reduce(parts: dict[str, Any], model: Model) -> dict[str, float] | None:
    """The reduce of 1,024 ranks x 1 GB on 64 workers with the client's part measured at that size
    (``benchmarks.client_reduce``: its reduce of 1,024 copies of a 1 GB A100 rank, the what-ifs
    aside), not extrapolated from ranks of a few MB: that CPU, plus the client's part of the
    what-ifs re-timed apart (``scale_ranks``' 1,024 dense ranks apart less ``client_reduce``'s
    copies of a dense rank: both hold the instances of a rank of a GB), plus the workers' part
    (``scale_ranks``' A100 ranks of the target's size apart: their workers' CPU in the reduce's tasks
    a rank, spread over the workers; the model's terms where that point did not run). None where either
    of the client's parts did not run. ``workers_per_rank_s``: the workers' CPU a rank, and
    ``workers_measured``: 1 where measured at the target's size, 0 where the model's."""
    points = parts.get("client_reduce", {}).get("points", [])
    apart = parts["scale_ranks"].get("apart", {}).get("points", [])
    ranks, mb, workers = SCALE
    a100 = [p for p in points if p["shape"] == "a100"]
    dense = [p for p in points if p["shape"] == "dense"]
    dense_apart = [p for p in apart if p.get("shape") == "dense" and p["ranks"] == ranks]
    if not (a100 and dense and dense_apart and model.apart):
        return None
    client = max(a100, key=lambda p: p["mb_per_rank"])["reduce_cpu_s"]
    rounds = max(0.0, dense_apart[0]["reduce_client_cpu_s"] - dense[0]["reduce_cpu_s"])
    _, gb_mb, gb_shape = scale_ranks.GB_APART
    at_size = [
        p for p in apart if (p.get("shape"), p["mb_per_rank"]) == (gb_shape, gb_mb) and "reduce_workers_cpu_s" in p
    ]
    if at_size:
        gb = at_size[0]  # the reduce's tasks there, where measured; else all the workers' CPU in it
        per_rank = gb.get("reduce_workers_task_cpu_s", gb["reduce_workers_cpu_s"]) / gb["ranks"]
    else:
        n = model.instances(mb)
        per_rank = model.wa1_per_rank + model.wa2_per_rank_mb * mb + model.wa3_per_rank_instance * n
    return {
        "client_s": client,
        "rounds_s": round(rounds, 3),
        "workers_s": round(ranks * per_rank / workers, 3),
        "workers_per_rank_s": round(per_rank, 4),
        "workers_measured": float(bool(at_size)),
    }


def measured_map(parts: dict[str, Any], model: Model) -> dict[str, float] | None:
    """The map of 1,024 ranks x 1 GB on 64 workers with a rank's CPU measured at that size
    (``benchmarks.client_reduce``'s A100 rank of a GB mapped once more as a worker maps it, on one
    core with an empty cache: :func:`~benchmarks.client_reduce.timed_map`), not the model's map
    term, whose fit on ranks of 3 to 64 MB it extrapolates 16 times: a rank's CPU per MB is lower
    at a GB (its fixed costs, a chunk's and a query's, spread over more events). That CPU a rank,
    the ranks spread over the workers, plus the scheduler's CPU per task (the model's). None where
    it was not measured. ``model_map_s``: the model's own map term, beside it."""
    points = parts.get("client_reduce", {}).get("points", [])
    ranks, mb, workers = SCALE
    at_size = [p for p in points if (p["shape"], p["mb_per_rank"]) == ("a100", mb) and "map_cpu_s" in p]
    if not at_size:
        return None
    per_rank = at_size[0]["map_cpu_s"]
    tasks = model.tasks(ranks, mb, workers)
    return {
        "map_s": round(ranks * per_rank / workers + tasks * model.o_per_task, 2),
        "per_rank_cpu_s": per_rank,
        "model_map_s": model.stages(ranks, mb, workers, scheduled=True)["map_s"],
    }


#: The parts of :func:`measured_reduce` that add up to the reduce.
_REDUCE_PARTS: Final = ("client_s", "rounds_s", "workers_s")


def values(parts: dict[str, Any]) -> dict[str, float | None]:
    """Each target's measured value from the parts' results (None: that part failed)."""
    eight = parts["8x125mb"]["targets"]
    model = Model(**parts["scale_ranks"]["model"])
    ranks, mb, workers = SCALE
    # a running cluster of 64 workers re-times the ranks on its workers: the model apart, where
    # measured, with the client's part measured at the target's size where it was
    stages = model.stages(ranks, mb, workers, scheduled=True, apart=model.apart)
    if (mapped := measured_map(parts, model)) is not None:
        stages = {**stages, "map_s": mapped["map_s"]}
    if (measured := measured_reduce(parts, model)) is not None:
        stages = {**stages, "reduce_s": round(sum(measured[k] for k in _REDUCE_PARTS), 2)}
    stages = {**stages, "total_s": round(stages["map_s"] + stages["reduce_s"] + stages["report_s"], 2)}
    shapes = parts["scale_file"]["targets"]
    large = parts["scale_ranks"]["large"]
    out: dict[str, float | None] = {
        "warm_speedup_vs_hta": eight["warm_speedup_vs_hta"]["value"],
        "cold_speedup_vs_hta": eight["speedup_vs_hta"]["value"],
        "cold_over_floor": eight["cold_over_floor"]["value"],
        "rss_over_hta": eight["rss_over_hta"]["value"],
        "compare_s": parts["compare"]["target"]["value"],
        "scale_total_s": stages["total_s"],
        "scale_reduce_s": stages["reduce_s"],
        "ranks_1024_local_rss_mb": large["local"]["peak_rss_mb"],
        "ranks_1024_dask_rss_mb": large["dask"]["peak_rss_mb"],
        "ranks_1024_same_json": float(large["json_identical"]),
        "ranks_1024_apart_same_json": (
            float(parts["scale_ranks"]["apart"]["json_identical_to_local"]) if "apart" in parts["scale_ranks"] else None
        ),
    }
    for shape in SHAPES:
        out[f"rss_2gb_{shape}_mb"] = shapes.get(shape, {}).get("rss_2gb_mb", {}).get("value")
    return out


def targets(parts: dict[str, Any]) -> list[dict[str, Any]]:
    """The table: each target, its bound, the value measured and whether it is met."""
    got = values(parts)
    rows = []
    for name, what, bound, kind in TARGETS:
        value = got[name]
        met = None if value is None else value >= bound if kind == "min" else value <= bound
        rows.append(
            {"name": name, "what": what, "bound": f"{'>=' if kind == 'min' else '<='} {bound:g}"}
            | {"value": None if value is None else round(value, 3), "met": met}
        )
    return rows


def markdown(doc: dict[str, Any]) -> str:
    """The table of targets as Markdown, with the machine and the load."""
    m = doc["machine"]
    lines = [
        f"Measured {doc['started']} to {doc['ended']} UTC, commit {doc['commit']}, on {m['cpus']} cores and "
        f"{m['memory_gb']} GB ({m['platform']}); 1-minute load {doc['load_before']} before, "
        f"{doc['load_after']} after."
        + (" **Quick: small sizes, not the targets' own; the values mean nothing for them.**" if doc["quick"] else ""),
        "",
        "| target | bound | measured | met |",
        "|---|---:|---:|---|",
    ]
    for t in doc["targets"]:
        value = "n/a" if t["value"] is None else f"{t['value']:g}"
        met = {None: "n/a", True: "yes", False: "**no**"}[t["met"]]
        lines.append(f"| {t['what']} | {t['bound']} | {value} | {met} |")
    return "\n".join(lines)


def run_all(*, quick: bool, data_dir: Path, log: Any) -> dict[str, Any]:
    """Every part, one after the other, and the table of targets."""
    started = time.strftime("%Y-%m-%d %H:%M", time.gmtime())
    load_before = round(os.getloadavg()[0], 2)
    mb = run.QUICK_MB if quick else 125.0
    parts: dict[str, Any] = {}
    log(f"== 8 ranks x {mb:g} MB: floor, tracekit cold and warm, HTA")
    parts["8x125mb"] = run.run_all(
        Spec(ranks=8, mb_per_rank=mb), data_dir=data_dir, jobs=None, hta=True, linearity=False, log=log
    )
    log("== tracekit compare of two saved analyses")
    with tempfile.TemporaryDirectory(prefix="tracekit-targets-") as saved:
        parts["compare"] = compare.run_compare(
            Spec(ranks=8, mb_per_rank=mb), repeat=3, data_dir=data_dir, saved_dir=Path(saved), log=log
        )
    sizes = (0.05,) if quick else (2.0,)
    log(f"== one rank of every shape at {sizes[0]:g} GB")
    parts["scale_file"] = scale_file.run_all(
        sizes,
        data_dir=Path(tempfile.gettempdir()),
        hta_max_gb=0,
        plain=False,
        log=log,
        shapes=tuple(SHAPES),
        only=("tracekit",),
    )
    log("== ranks at scale: the points, 1,024 ranks local and Dask, the model")
    parts["scale_ranks"] = scale_ranks.run_all(quick=quick, data_dir=data_dir, log=log)
    log("== the client's reduce of 1,024 ranks of a GB, measured")
    parts["client_reduce"] = client_reduce.run_all(quick=quick, data_dir=data_dir, repeat=2, log=log)
    doc: dict[str, Any] = {
        "issue": 48,
        "quick": quick,
        "commit": scale_file.measured_commit(),
        "machine": run._machine(),
        "started": started,
        "ended": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
        "load_before": load_before,
        "load_after": round(os.getloadavg()[0], 2),
        "scale": {"ranks": SCALE[0], "mb_per_rank": SCALE[1], "workers": SCALE[2]},
        "parts": parts,
    }
    doc["targets"] = targets(parts)
    doc["measured_reduce"] = measured_reduce(parts, Model(**parts["scale_ranks"]["model"]))
    doc["measured_map"] = measured_map(parts, Model(**parts["scale_ranks"]["model"]))
    return doc


def main(argv: list[str] | None = None) -> None:
    """Command line: see ``--help``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes: a check that it runs (~5 min)")
    parser.add_argument("--data-dir", type=Path, default=DATA_DIR, help="where generated traces are kept")
    parser.add_argument("--out", type=Path, help="results JSON [benchmarks/results/targets.json]")
    args = parser.parse_args(argv)

    def log(text: str) -> None:
        print(text, file=sys.stderr, flush=True)

    doc = run_all(quick=args.quick, data_dir=args.data_dir, log=log)
    out = args.out or HERE / "results" / ("targets_quick.json" if args.quick else "targets.json")
    run.write_results(doc, out, markdown(doc))


if __name__ == "__main__":
    main()
