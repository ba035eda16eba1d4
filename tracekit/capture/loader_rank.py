"""One rank of ``tracekit dataloader``: the training DataLoader alone, timed batch by batch.

Started by the launcher on every rank as
``python -m tracekit.capture.loader_rank CONFIG FOLDER BATCHES WARMUP``. The rank builds its
workload's data exactly as a capture's rank does (:func:`tracekit.capture.runner.build_workload`,
:func:`~tracekit.capture.runner.make_dataloader`, accelerate's ``prepare_data_loader``: the same
sharding per rank, workers, prefetch and pinning), drops the model and optimizer, and times
``WARMUP + BATCHES`` calls of ``next()``, epoch after epoch as training draws them. No
collective runs (the process group accelerate joins is not used); each rank writes its
times to ``loader_fetch.rank{r}.json`` (atomically) and the parent merges them.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Final

from tracekit.capture import files
from tracekit.capture.config import CaptureConfig, load_config
from tracekit.capture.runner import build_workload, end_rank, forever, make_accelerator, make_dataloader, run_rank
from tracekit.capture.user_code import user_code
from tracekit.capture.workloads import resolve

if TYPE_CHECKING:
    from tracekit.capture.ranks import RankProgress

#: The phase a rank's progress shows while it waits in ``next()``.
_PHASE: Final = "dataload_wait"


def fetch_name(rank: int) -> str:
    """Where one rank leaves its fetch times."""
    return f"loader_fetch.rank{rank}.json"


def probe(config: CaptureConfig, folder: Path, progress: RankProgress, *, batches: int, warmup: int) -> None:
    """Time ``warmup + batches`` fetches of this rank's training DataLoader; write them to ``folder``."""
    import torch.distributed as dist

    progress.stage("init")
    accelerator, _backend = make_accelerator(config)
    rank = accelerator.process_index
    progress.stage("workload")
    workload = build_workload(config, rank, accelerator.num_processes)
    workload.model = workload.optimizer = workload.scheduler = None  # no model: the loader alone
    progress.stage("prepare")
    data = f"workload {config.workload!r}: its data"
    blame = (workload.dataloader or workload.dataset, resolve(config.workload))
    with user_code(data, blame=blame):
        loader = accelerator.prepare_data_loader(make_dataloader(config, workload), device_placement=False)
    progress.stage("steps")
    batches_iter = forever(loader)
    fetch_ns: list[int] = []
    measured_start = time.perf_counter_ns()
    for i in range(warmup + batches):
        progress.phase(i, _PHASE)
        start = time.perf_counter_ns()
        with user_code(f"{data} (batch {i})", blame=blame):
            next(batches_iter)
        end = time.perf_counter_ns()
        if i == warmup:
            measured_start = start
        if i >= warmup:
            fetch_ns.append(end - start)
    wall_ns = time.perf_counter_ns() - measured_start
    progress.stage("finishing")
    record = {"rank": rank, "world_size": accelerator.num_processes, "fetch_ns": fetch_ns, "wall_ns": wall_ns}
    files.write_json_atomic(folder / fetch_name(rank), record)
    del batches_iter, loader  # stop the workers before leaving the group
    if dist.is_initialized():
        dist.destroy_process_group()


def main(argv: list[str] | None = None) -> None:
    """Entry point of one rank."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 4:
        raise SystemExit("usage: python -m tracekit.capture.loader_rank CONFIG.json FOLDER BATCHES WARMUP")
    config, folder = load_config(args[0]), Path(args[1])
    batches, warmup = int(args[2]), int(args[3])
    run_rank(folder, lambda progress: probe(config, folder, progress, batches=batches, warmup=warmup))
    end_rank()


if __name__ == "__main__":
    main()
