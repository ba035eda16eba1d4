"""Generate a small, real multi-rank Kineto trace set from a CPU DDP run.

This script starts ``--nproc`` ranks (default 8) on the local machine with
``torch.multiprocessing.start_processes`` (``spawn`` semantics; by default via
a ``forkserver`` that preloads torch once, which keeps the run fast on small
machines), joins them into a ``gloo`` process group and
runs a short DistributedDataParallel training loop of a small MLP on synthetic
data.  The loop runs under ``torch.profiler.profile`` with a
``wait=1, warmup=1, active=3`` schedule, so each trace contains three
``ProfilerStep#N`` ranges.

Every phase of a training step is wrapped in a
``torch.profiler.record_function("tracekit.phase/<name>")`` user annotation:

* ``dataload_wait`` -- ``next()`` on the DataLoader iterator
* ``h2d``           -- ``.to(device)`` of the batch (a no-op copy on CPU)
* ``forward``       -- model forward and loss
* ``backward``      -- ``loss.backward()`` (DDP gradient all-reduce happens here)
* ``optim_step``    -- ``optimizer.step()``
* ``zero_grad``     -- ``optimizer.zero_grad()``
* ``sync``          -- ``all_reduce`` of the loss for logging, then ``.item()``

Optional knobs inject known pathologies so the sample has something to find:
``--straggler-rank R --straggler-ms MS`` makes rank ``R`` sleep inside its
``forward`` phase, and ``--loader-delay-ms`` sleeps inside the Dataset's
``__getitem__`` on every rank.

Each rank writes ``<out>/rank{r}.pt.trace.json.gz``; the chrome trace is first
exported to a temporary ``.json`` file, then gzipped to a temporary file and
atomically renamed into place.

The committed sample was produced with::

    python3 samples/make_cpu_sample.py --straggler-rank 3 --straggler-ms 20
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import gzip
import json
import multiprocessing
import os
import socket
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import torch
import torch.distributed as dist
from torch import nn
from torch.multiprocessing.spawn import start_processes
from torch.nn.parallel import DistributedDataParallel
from torch.profiler import ProfilerActivity, profile, record_function, schedule
from torch.utils.data import DataLoader, Dataset, DistributedSampler

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

PHASE_PREFIX = "tracekit.phase/"
DEFAULT_OUT = Path("samples") / "cpu-ddp-8rank"

# Profiler schedule: one skipped step, one warm-up step, three recorded steps.
SCHED_WAIT = 1
SCHED_WARMUP = 1
SCHED_ACTIVE = 3

# Modules imported once by the forkserver so that forked ranks inherit them.
# ``torch._dynamo`` is imported lazily by the DDP constructor; importing it in
# eight fresh processes on two cores alone costs ~8 s.
FORKSERVER_PRELOAD = (
    "__main__",
    "torch",
    "torch.distributed",
    "torch.nn.parallel",
    "torch.profiler",
    "torch.utils.data",
    "torch._dynamo",
)

IN_FEATURES = 256
HIDDEN = 512
NUM_CLASSES = 10


@dataclasses.dataclass(frozen=True)
class Config:
    """Run configuration shared (pickled) with every spawned rank."""

    nproc: int
    out_dir: Path
    steps: int
    batch_size: int
    lr: float
    seed: int
    straggler_rank: int | None
    straggler_ms: float
    loader_delay_ms: float
    master_addr: str
    master_port: int


class SyntheticDataset(Dataset[tuple[torch.Tensor, torch.Tensor]]):
    """Deterministic random classification data, optionally slow to load."""

    def __init__(self, length: int, seed: int, delay_ms: float = 0.0) -> None:
        self.length = length
        self.seed = seed
        self.delay_s = delay_ms / 1000.0

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        if self.delay_s > 0:
            time.sleep(self.delay_s)
        gen = torch.Generator().manual_seed(self.seed * 1_000_003 + index)
        x = torch.randn(IN_FEATURES, generator=gen)
        y = torch.randint(0, NUM_CLASSES, (), generator=gen)
        return x, y


def build_model() -> nn.Module:
    """Return the small MLP used by every rank (256 -> 512 -> 512 -> 10)."""
    return nn.Sequential(
        nn.Linear(IN_FEATURES, HIDDEN),
        nn.ReLU(),
        nn.Linear(HIDDEN, HIDDEN),
        nn.ReLU(),
        nn.Linear(HIDDEN, NUM_CLASSES),
    )


def find_free_port(host: str = "127.0.0.1") -> int:
    """Ask the OS for a currently free TCP port on ``host``."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


def trace_path(out_dir: Path, rank: int) -> Path:
    """Return the final trace path for ``rank``."""
    return out_dir / f"rank{rank}.pt.trace.json.gz"


def make_trace_handler(out_dir: Path, rank: int) -> Callable[[profile], None]:
    """Build an ``on_trace_ready`` callback that writes one gzipped trace.

    The chrome trace is exported to a temporary ``.json`` file, compressed to a
    temporary ``.gz`` file in the same directory, and renamed atomically, so a
    reader never sees a partially written ``rank{r}.pt.trace.json.gz``.
    """

    def handler(prof: profile) -> None:
        final = trace_path(out_dir, rank)
        tmp_json = out_dir / f".rank{rank}.{os.getpid()}.tmp.json"
        tmp_gz = out_dir / f".rank{rank}.{os.getpid()}.tmp.json.gz"
        try:
            prof.export_chrome_trace(str(tmp_json))
            data = tmp_json.read_bytes()
            # Kineto records the export path as "traceName"; point it at the
            # final file name instead of the pid-specific temporary path.
            data = data.replace(json.dumps(str(tmp_json)).encode(), json.dumps(final.name).encode(), 1)
            # mtime=0 and no embedded file name keep the gzip header stable.
            with (
                tmp_gz.open("wb") as raw,
                gzip.GzipFile(fileobj=raw, mode="wb", filename="", mtime=0) as dst,
            ):
                dst.write(data)
            os.replace(tmp_gz, final)
        finally:
            for tmp in (tmp_json, tmp_gz):
                with contextlib.suppress(FileNotFoundError):
                    tmp.unlink()

    return handler


def phase(name: str) -> record_function:
    """Return the ``record_function`` range for a training-step phase."""
    return record_function(PHASE_PREFIX + name)


def run_rank(rank: int, cfg: Config) -> None:
    """Body of one spawned rank: set up DDP, train, and write its trace."""
    # Two cores shared by many ranks: keep intra-op parallelism at one thread.
    torch.set_num_threads(1)
    os.environ["MASTER_ADDR"] = cfg.master_addr
    os.environ["MASTER_PORT"] = str(cfg.master_port)
    dist.init_process_group("gloo", rank=rank, world_size=cfg.nproc)
    try:
        train(rank, cfg)
    finally:
        dist.destroy_process_group()


def train(rank: int, cfg: Config) -> None:
    """Run the profiled DDP training loop on an initialised process group."""
    device = torch.device("cpu")
    torch.manual_seed(cfg.seed)

    model = DistributedDataParallel(build_model().to(device))
    optimizer = torch.optim.SGD(model.parameters(), lr=cfg.lr, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()

    dataset = SyntheticDataset(
        length=cfg.steps * cfg.batch_size * cfg.nproc,
        seed=cfg.seed,
        delay_ms=cfg.loader_delay_ms,
    )
    sampler: DistributedSampler[tuple[torch.Tensor, torch.Tensor]] = DistributedSampler(
        dataset, num_replicas=cfg.nproc, rank=rank, shuffle=True, seed=cfg.seed
    )
    sampler.set_epoch(0)
    loader = DataLoader(dataset, batch_size=cfg.batch_size, sampler=sampler, num_workers=0)
    batches = iter(loader)
    straggle_s = cfg.straggler_ms / 1000.0 if cfg.straggler_rank == rank else 0.0

    with profile(
        activities=[ProfilerActivity.CPU],
        schedule=schedule(wait=SCHED_WAIT, warmup=SCHED_WARMUP, active=SCHED_ACTIVE, repeat=1),
        on_trace_ready=make_trace_handler(cfg.out_dir, rank),
        record_shapes=False,
        with_stack=False,
        profile_memory=False,
    ) as prof:
        for step in range(cfg.steps):
            with phase("dataload_wait"):
                x, y = next(batches)
            with phase("h2d"):
                x = x.to(device, non_blocking=True)
                y = y.to(device, non_blocking=True)
            with phase("forward"):
                logits = model(x)
                loss = loss_fn(logits, y)
                if straggle_s > 0:
                    time.sleep(straggle_s)
            with phase("backward"):
                loss.backward()
            with phase("optim_step"):
                optimizer.step()
            with phase("zero_grad"):
                optimizer.zero_grad(set_to_none=True)
            with phase("sync"):
                metric = loss.detach().clone()
                dist.all_reduce(metric, op=dist.ReduceOp.SUM)
                mean_loss = metric.item() / cfg.nproc
            prof.step()
            if rank == 0:
                print(f"step {step}: mean loss {mean_loss:.4f}", flush=True)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Parse command-line arguments."""
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n", 1)[0] if __doc__ else None,
    )
    parser.add_argument("--nproc", type=int, default=8, help="number of ranks")
    parser.add_argument(
        "--out",
        type=Path,
        default=DEFAULT_OUT,
        help=f"output directory (default: {DEFAULT_OUT})",
    )
    parser.add_argument(
        "--steps",
        type=int,
        default=SCHED_WAIT + SCHED_WARMUP + SCHED_ACTIVE + 1,
        help="training iterations (must cover the wait+warmup+active schedule)",
    )
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument(
        "--start-method",
        choices=("forkserver", "spawn"),
        default="forkserver",
        help="multiprocessing start method; forkserver preloads torch once (default: forkserver)",
    )
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--straggler-rank",
        type=int,
        default=None,
        help="rank that sleeps inside its forward phase (default: none)",
    )
    parser.add_argument(
        "--straggler-ms",
        type=float,
        default=0.0,
        help="straggler sleep per step in milliseconds",
    )
    parser.add_argument(
        "--loader-delay-ms",
        type=float,
        default=0.0,
        help="sleep inside Dataset.__getitem__ per sample, in milliseconds",
    )
    args = parser.parse_args(argv)
    if args.nproc < 1:
        parser.error("--nproc must be >= 1")
    if args.steps < SCHED_WAIT + SCHED_WARMUP + SCHED_ACTIVE:
        parser.error(f"--steps must be >= {SCHED_WAIT + SCHED_WARMUP + SCHED_ACTIVE}")
    if args.straggler_rank is not None and not 0 <= args.straggler_rank < args.nproc:
        parser.error("--straggler-rank must be in [0, nproc)")
    if args.straggler_ms < 0 or args.loader_delay_ms < 0:
        parser.error("delays must be non-negative")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: spawn the ranks and report where the traces went."""
    args = parse_args(argv)
    master_addr = "127.0.0.1"
    cfg = Config(
        nproc=args.nproc,
        out_dir=args.out.resolve(),
        steps=args.steps,
        batch_size=args.batch_size,
        lr=args.lr,
        seed=args.seed,
        straggler_rank=args.straggler_rank,
        straggler_ms=args.straggler_ms if args.straggler_rank is not None else 0.0,
        loader_delay_ms=args.loader_delay_ms,
        master_addr=master_addr,
        master_port=find_free_port(master_addr),
    )
    cfg.out_dir.mkdir(parents=True, exist_ok=True)
    for rank in range(cfg.nproc):
        # Remove stale traces so a failed rank cannot leave an old file behind.
        with contextlib.suppress(FileNotFoundError):
            trace_path(cfg.out_dir, rank).unlink()

    if args.start_method == "forkserver":
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(list(FORKSERVER_PRELOAD))

    start = time.perf_counter()
    # Equivalent to ``mp.spawn`` but with a selectable start method.
    start_processes(  # type: ignore[no-untyped-call]
        run_rank,
        args=(cfg,),
        nprocs=cfg.nproc,
        join=True,
        start_method=args.start_method,
    )
    elapsed = time.perf_counter() - start

    missing = [r for r in range(cfg.nproc) if not trace_path(cfg.out_dir, r).exists()]
    if missing:
        print(f"error: no trace written for ranks {missing}", file=sys.stderr)
        return 1
    for rank in range(cfg.nproc):
        path = trace_path(cfg.out_dir, rank)
        print(f"{path} ({path.stat().st_size / 1024:.1f} KiB)")
    print(f"{cfg.nproc} ranks finished in {elapsed:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
