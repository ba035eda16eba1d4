"""One rank of ``tracekit capture``: the training step loop under ``accelerate.Accelerator``.

Started by the launcher on every rank as ``python -m tracekit.capture.runner CONFIG [FOLDER]``
(FOLDER, where the files go, defaults to the config's ``out_dir``). A failure leaves
``.rank{r}.error.txt`` there: its first line is one line for the user, the rest the
traceback. The rank also records its progress and, once it has finished, ``.rank{r}.done``;
under ``tracekit capture`` a supervisor records how its process ended
(:mod:`tracekit.capture.ranks`, :mod:`tracekit.capture.supervisor`).
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
import traceback
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from tracekit.capture import ddp, files, optimizer_impl, sharding, supervisor
from tracekit.capture.config import CaptureConfig, load_config, to_dict
from tracekit.capture.launcher import free_port
from tracekit.capture.profiler import Profiler
from tracekit.capture.ranks import RankProgress
from tracekit.capture.workloads import Workload, WorkloadContext, resolve
from tracekit.errors import InputError, TracekitError
from tracekit.results.capture import ALLOC_CONF_VARS, CaptureNote
from tracekit.results.vocab import CaptureNoteKind

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator


def forever(loader: Any) -> Iterator[Any]:
    """The loader's batches, epoch after epoch (as training draws them)."""
    while True:
        empty = True
        for batch in loader:
            empty = False
            yield batch
        if empty:  # a batch larger than this rank's share of the data set (drop_last)
            raise InputError("the DataLoader gives no batch: batch_size is larger than this rank's share of the data")


def to_device(batch: Any, device: Any, non_blocking: bool) -> Any:
    """``batch`` (tensors in lists, tuples and dicts) moved to ``device``."""
    if isinstance(batch, (list, tuple)):
        return type(batch)(to_device(b, device, non_blocking) for b in batch)
    if isinstance(batch, dict):
        return {k: to_device(v, device, non_blocking) for k, v in batch.items()}
    return batch.to(device, non_blocking=non_blocking) if hasattr(batch, "to") else batch


def build_workload(config: CaptureConfig, rank: int, world_size: int) -> Workload:
    """The configured workload for ``rank`` of ``world_size``; bad factories are an :class:`InputError`."""
    factory = resolve(config.workload)
    ctx = WorkloadContext(rank, world_size, config.batch_size, config.seed, config.learning_rate)
    try:
        workload = factory(ctx, **config.workload_args)
    except TracekitError:  # the command's timeout (tracekit.capture.deadline), not the factory's error
        raise
    except TypeError as exc:
        raise InputError(f"workload {config.workload!r}: {exc}") from exc
    except Exception as exc:
        raise InputError(f"workload {config.workload!r} raised {type(exc).__name__}: {exc}") from exc
    if not isinstance(workload, Workload) or (workload.dataset is None and workload.dataloader is None):
        raise InputError(f"workload {config.workload!r} must return a tracekit.capture.Workload with data")
    return workload


def make_dataloader(config: CaptureConfig, workload: Workload) -> Any:
    """The workload's DataLoader with the config's knobs (or the workload's own loader)."""
    from torch.utils.data import DataLoader

    if workload.dataloader is not None:
        return workload.dataloader
    extra: dict[str, Any] = {}
    if config.num_workers > 0:
        extra["persistent_workers"] = config.persistent_workers
        if config.prefetch_factor is not None:
            extra["prefetch_factor"] = config.prefetch_factor
    return DataLoader(
        workload.dataset,
        batch_size=config.batch_size,
        shuffle=False,
        drop_last=True,
        num_workers=config.num_workers,
        pin_memory=config.pin_memory,
        **extra,
    )


def environment(accelerator: Any, backend: str) -> dict[str, Any]:
    """Versions, devices and the distributed setup, for summary.json."""
    import accelerate
    import torch

    cuda = torch.cuda.is_available()
    return {
        "torch": str(torch.__version__),  # a TorchVersion, not a plain str
        "accelerate": accelerate.__version__,
        "cuda": torch.version.cuda if cuda else None,
        "devices": [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())] if cuda else ["cpu"],
        "backend": backend,
        "world_size": accelerator.num_processes,
        "distributed_type": str(accelerator.distributed_type).split(".")[-1],
        "mixed_precision": accelerator.mixed_precision,
        "python": sys.version.split()[0],
        "cpu_count": cpu_count(),
        "alloc_conf": alloc_conf(),
    }


def alloc_conf() -> dict[str, str]:
    """The caching allocator's settings this rank runs with (those of :data:`ALLOC_CONF_VARS`
    set, by name): the report does not advise what is already on (``expandable_segments``)."""
    return {name: os.environ[name] for name in ALLOC_CONF_VARS if os.environ.get(name)}


def cpu_count() -> int | None:
    """The CPU cores this process may run on (its affinity, where the OS has one), else the
    machine's: what the ranks of a capture, all started on this machine, share."""
    affinity = getattr(os, "sched_getaffinity", None)
    return len(affinity(0)) if affinity is not None else os.cpu_count()


def make_accelerator(config: CaptureConfig) -> tuple[Any, str]:
    """This rank's ``Accelerator`` as training uses it (the process group joined, gloo on CPU,
    DDP's options from the config: :func:`tracekit.capture.ddp.kwargs_handler`), and the backend's name.

    One rank with a backend named (not ``auto``) joins a process group of one, so DDP and its
    collectives run as they would on N ranks (one GPU checks the NCCL path). Ranks that share a
    GPU (more ranks on this node than GPUs: gloo only) each take GPU ``local rank % GPUs``.
    """
    import torch
    import torch.distributed as dist
    from accelerate import Accelerator

    cuda = torch.cuda.is_available()
    backend = config.backend if config.backend != "auto" else ("nccl" if cuda else "gloo")
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    if world_size == 1 and config.backend != "auto":
        _one_rank_group(config.main_process_port)
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if cuda:
        gpus = torch.cuda.device_count()
        local_ranks = int(os.environ.get("LOCAL_WORLD_SIZE", str(world_size)))
        if local_ranks > gpus:
            if backend == "nccl":
                raise InputError(
                    f"nccl needs a GPU per rank: {local_ranks} ranks on {gpus} GPU(s) on this node; "
                    "--backend gloo lets ranks share a GPU"
                )
            # accelerate would give DDP device_ids=[local rank], a GPU that does not exist:
            # without device_ids DDP keeps the module on the device it is on
            os.environ["ACCELERATE_BYPASS_DEVICE_MAP"] = "true"
        torch.cuda.set_device(local_rank % gpus)
        if config.cuda_memory_fraction is not None:
            torch.cuda.set_per_process_memory_fraction(config.cuda_memory_fraction)
    if "LOCAL_RANK" in os.environ and not dist.is_initialized():
        dist.init_process_group(backend=backend)
    if not cuda:
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // max(1, world_size)))
    # without cpu=True, accelerate on a machine without GPU sees one process (DistributedType.NO)
    # on every rank: no DDP, no gradient all-reduce, every rank "rank 0"
    accelerator = Accelerator(
        cpu=not cuda,
        mixed_precision=config.mixed_precision,
        gradient_accumulation_steps=config.gradient_accumulation_steps,
        kwargs_handlers=[ddp.kwargs_handler(config)],
    )
    if accelerator.num_processes != world_size:
        raise RuntimeError(
            f"accelerate set up {accelerator.num_processes} process(es) ({accelerator.distributed_type}) "
            f"but the launcher started {world_size}"
        )
    return accelerator, backend


def _one_rank_group(port: int) -> None:
    """The environment of a launcher's one rank, for a process group of one (and accelerate,
    which runs DDP when it finds ``LOCAL_RANK``)."""
    for key, value in (("RANK", "0"), ("LOCAL_RANK", "0"), ("WORLD_SIZE", "1"), ("LOCAL_WORLD_SIZE", "1")):
        os.environ.setdefault(key, value)
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(port or free_port()))


def barrier() -> None:
    """Wait for every rank (no-op without a process group). Not accelerate's
    ``wait_for_everyone``: it names GPU ``local rank``, which ranks sharing a GPU lack."""
    import torch
    import torch.distributed as dist

    if not dist.is_initialized():
        return
    if dist.get_backend() == "nccl":
        dist.barrier(device_ids=[torch.cuda.current_device()])
    else:
        dist.barrier()


def run(config: CaptureConfig, out_dir: Path | None = None, progress: RankProgress | None = None) -> None:
    """Run warmup + measured steps of the configured workload on this rank, writing into
    ``out_dir`` (default: the config's) and recording ``progress`` when given."""
    import torch
    import torch.distributed as dist

    folder = Path(config.out_dir) if out_dir is None else out_dir
    stage = progress.stage if progress is not None else (lambda _name: None)
    stage("init")
    accelerator, backend = make_accelerator(config)
    cuda = torch.cuda.is_available()
    rank = accelerator.process_index
    stage("workload")
    workload = build_workload(config, rank, accelerator.num_processes)
    stage("prepare")
    loader = accelerator.prepare_data_loader(make_dataloader(config, workload), device_placement=False)
    prepared, notes, used = prepare(config, accelerator, workload, cuda=cuda)
    prof = Profiler(
        config,
        out_dir=folder,
        samples_per_step=config.batch_size * config.gradient_accumulation_steps,
        summary_extra={
            "config": to_dict(config),
            "environment": environment(accelerator, backend) | used,
            "notes": notes,
        },
        progress=progress.phase if progress is not None else None,
    )
    if progress is not None:  # the start-up stages, before the profiler's own marks
        prof.timeline.update(progress.ages)
    _loop(config, accelerator, prof, workload=workload, loader=loader, prepared=prepared)
    stage("finishing")
    barrier()
    if dist.is_initialized():
        dist.destroy_process_group()


def prepare(
    config: CaptureConfig, accelerator: Any, workload: Workload, *, cuda: bool
) -> tuple[tuple[Any, ...], list[CaptureNote], dict[str, Any]]:
    """The workload's model, optimizer (rebuilt with ``optimizer_impl``) and scheduler as
    accelerate prepares them (FSDP on CPU: the model sharded by tracekit); the notes of how, and
    what DDP and the optimizer run with, read from them (for summary.json's environment)."""
    workload.optimizer = optimizer_impl.rebuild(workload.optimizer, config.optimizer_impl)
    notes: list[CaptureNote] = []
    scheduler = [workload.scheduler] if workload.scheduler is not None else []
    distributed = str(accelerator.distributed_type).split(".")[-1]
    if sharding.wanted(cuda):  # accelerate applies FSDP on accelerators only
        model, sharded = sharding.shard(workload.model, workload.optimizer)
        notes.append(sharded)
        distributed = "FSDP"
        rest = accelerator.prepare(workload.optimizer, *scheduler)
        prepared = (model, *(rest if isinstance(rest, tuple) else (rest,)))
    else:
        prepared = accelerator.prepare(workload.model, workload.optimizer, *scheduler)
    if distributed == "DEEPSPEED":
        notes.append(CaptureNote(kind=CaptureNoteKind.DEEPSPEED_OPTIMIZER))
    hook = ddp.register_hook(prepared[0], config.ddp_comm_hook)
    settings = ddp.settings(prepared[0])
    if settings is not None:
        settings["comm_hook"] = hook
    unused = ddp.no_effect(config, wrapped=settings is not None, distributed=distributed)
    notes += [unused] if unused is not None else []
    used = {"optimizer": optimizer_impl.implementation(workload.optimizer)}
    return prepared, notes, used | ({"ddp": settings} if settings is not None else {})


def _loop(
    config: CaptureConfig, accelerator: Any, prof: Profiler, *, workload: Workload, loader: Any, prepared: Any
) -> None:
    """The training steps: each phase timed and marked; one optimizer step per step."""
    model, optimizer = prepared[0], prepared[1]
    scheduler = prepared[2] if len(prepared) > 2 else None
    model.train()
    losses = []
    with prof:
        batches = prof.loader(forever(loader))
        while not prof.done:
            for _ in range(config.gradient_accumulation_steps):
                inputs, targets = next(batches)
                with prof.phase("h2d"):
                    inputs, targets = to_device((inputs, targets), accelerator.device, config.pin_memory)
                with accelerator.accumulate(model):
                    with prof.phase("forward"), accelerator.autocast():
                        loss = workload.loss_fn(model(inputs), targets)
                    with prof.phase("backward"):
                        accelerator.backward(loss)
                    if accelerator.sync_gradients:
                        if config.max_grad_norm is not None:
                            with prof.phase("clip"):
                                accelerator.clip_grad_norm_(model.parameters(), config.max_grad_norm)
                        with prof.phase("optim_step"):
                            optimizer.step()
                        with prof.phase("zero_grad"):
                            if scheduler is not None:
                                scheduler.step()
                            optimizer.zero_grad(set_to_none=True)
            with prof.phase("sync"):
                losses.append(accelerator.reduce(loss.detach(), reduction="mean"))
            prof.step()


def main(argv: list[str] | None = None) -> None:
    """Entry point of one rank."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) not in (1, 2):
        raise SystemExit("usage: python -m tracekit.capture.runner CONFIG.json [FOLDER]")
    config = load_config(args[0])
    folder = Path(args[1] if len(args) == 2 else config.out_dir)
    run_rank(folder, lambda progress: run(config, folder, progress))
    end_rank()


def run_rank(folder: Path, body: Callable[[RankProgress], None]) -> None:
    """Run ``body`` as one rank of a launched run: supervised (when the launcher asks), its
    progress, error file and done marker written into ``folder`` (:mod:`tracekit.capture.ranks`)."""
    rank = int(os.environ.get("RANK", "0"))
    if os.environ.get(supervisor.PARENT_ENV) and supervisor.available():
        age = files.process_age()
        supervisor.fork(folder, rank)  # returns in the child; the parent waits and records its exit
        files.forked_at(age)
    progress = RankProgress(folder, rank)
    progress.stage("start")
    try:
        body(progress)
    except BaseException as exc:
        _report(exc, folder / files.error_name(rank))
        raise SystemExit(2 if isinstance(exc, InputError) else 1) from None
    progress.done()


def end_rank() -> None:
    """End a rank process whose work is done and written, without the interpreter's teardown.

    Finalizing torch's modules and objects took 1.8 s of every 11.5 s capture on this 2-core
    machine, after every file was written. What a normal exit does that matters still runs, in
    its order: the threads that are not daemons are joined, the ``atexit`` handlers run (the
    workload's own, logging's, multiprocessing's, which stops the DataLoader's workers), and the
    output is flushed. Only for a rank's ``__main__``: it ends the process."""
    for thread in threading.enumerate():
        if thread is not threading.main_thread() and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


#: The longest error headline a rank writes (the launcher's one line adds the last lines and the file).
HEADLINE_CHARS: Final = 1200


def _report(exc: BaseException, path: Path) -> None:
    """Write the error file: one line for the user, then the traceback."""
    if isinstance(exc, InputError):
        headline = exc.message
    elif isinstance(exc, SystemExit):
        headline = f"the workload called sys.exit({exc.code!r}) before the capture finished"
    else:
        # the whole message on one line (torch's run over several lines: the first alone stops mid-sentence)
        said = " ".join(f"{type(exc).__name__}: {exc}".split()) if str(exc) else type(exc).__name__
        headline = said if len(said) <= HEADLINE_CHARS else said[: HEADLINE_CHARS - 1] + "…"
    try:
        files.write_bytes_atomic(path, f"{headline}\n{traceback.format_exc()}".encode())
    except InputError:  # a full disk: the launcher finds the headline in capture.log instead
        print(files.rank_error_line(int(os.environ.get("RANK", "0")), headline), file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
