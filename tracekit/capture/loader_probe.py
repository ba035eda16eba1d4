"""``tracekit dataloader``: the input pipeline's ceiling, measured without the model.

:func:`probe_dataloader` starts the config's ranks under the capture's launcher (same
launcher, supervisors, timeout and clean-up: :func:`tracekit.capture.launcher.run_ranks`),
each running :mod:`tracekit.capture.loader_rank`, and merges their fetch times into a
:class:`~tracekit.results.loader_probe.LoaderProbe` (statistics:
:mod:`tracekit.capture.loader_stats`), written as ``dataloader.json`` into
``<out_dir>.dataloader`` (replaced only when the run succeeds, as a capture folder is).

The cluster's samples/s is the global batch (per-rank batch x ranks) times the batches per
second of the slowest rank: in training every rank takes one batch per step and the
step waits for the slowest, as training's own samples/s is set by its slowest rank. When a
capture is given (or ``out_dir`` holds one), the headroom compares the two.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import msgspec

from tracekit.capture import accelerate_configs, files, outdir, processes
from tracekit.capture.config import CaptureConfig, to_dict
from tracekit.capture.deadline import deadline
from tracekit.capture.launcher import run_ranks
from tracekit.capture.loader_rank import fetch_name
from tracekit.capture.loader_stats import headroom, rank_fetches
from tracekit.capture.workloads import resolve
from tracekit.errors import InputError
from tracekit.locks import folder_lock
from tracekit.results.capture import load_capture_summary
from tracekit.results.loader_probe import LOADER_PROBE_SCHEMA, ConfigChange, LoaderNote, LoaderProbe
from tracekit.results.records import dump_record
from tracekit.results.vocab import CeilingBy, LoaderNoteKind

if TYPE_CHECKING:
    from tracekit.results.loader_probe import Headroom

__all__ = ["DEFAULT_BATCHES", "PROBE_FILE", "probe_dataloader", "probe_folder"]

PROBE_FILE: Final = "dataloader.json"
DEFAULT_BATCHES: Final = 100
_OWN: Final = re.compile(r"^(dataloader\.json|loader_fetch\.rank\d+\.json)$")
#: Config fields that decide what the loader delivers and what training consumes.
_SAME: Final = (
    "workload",
    "workload_args",
    "batch_size",
    "num_workers",
    "pin_memory",
    "prefetch_factor",
    "persistent_workers",
    "nproc",
    "seed",
)


def _own(name: str) -> bool:
    return files.is_own_output(name) or _OWN.match(name) is not None


PROBE: Final = outdir.FolderKind("a tracekit dataloader probe", PROBE_FILE, LOADER_PROBE_SCHEMA, _own)


def probe_folder(config: CaptureConfig) -> Path:
    """Where the probe of ``config`` writes: ``<out_dir>.dataloader``, beside the capture."""
    out = Path(config.out_dir)
    return out.with_name(out.name + ".dataloader")


def probe_dataloader(
    config: CaptureConfig, *, batches: int = DEFAULT_BATCHES, capture: str | Path | None = None
) -> LoaderProbe:
    """Time ``batches`` batches per rank of ``config``'s DataLoader alone (after the config's
    warm-up steps' worth), on its ranks; compare with the capture in ``capture`` (default:
    the config's ``out_dir`` when it holds one). Writes ``dataloader.json`` into
    :func:`probe_folder` and returns it."""
    if batches < 1:
        raise InputError("--batches must be at least 1")
    config = msgspec.structs.replace(config, nsys=False)
    training = _training(config, capture)
    target = outdir.check(probe_folder(config), PROBE)
    accelerate_configs.check(config.accelerate_config)  # a missing file, several machines
    with deadline("dataloader", config.timeout):  # importing the workload's module runs its code here
        resolve(config.workload)  # an import error fails here, before N ranks start
    with folder_lock(target):  # a second probe into the same folder is refused, naming this one
        warmup = config.warmup_steps * config.gradient_accumulation_steps
        outdir.clear_stale(target)  # the folders of a probe killed before it could remove them
        folder = outdir.staging(target)
        args = [str(batches), str(warmup)]
        run_ranks(config, folder, target, module="tracekit.capture.loader_rank", args=args, kind=PROBE)
        try:
            probe = _merge(folder, config, warmup=warmup, training=training)
            files.write_bytes_atomic(folder / PROBE_FILE, dump_record(probe))
            with processes.interrupts_ignored():
                for rank in range(config.nproc):
                    for name in files.status_names(rank):
                        (folder / name).unlink(missing_ok=True)
                outdir.commit(folder, target, PROBE)
        except BaseException:
            with processes.interrupts_ignored():
                outdir.keep_failed(folder, target, PROBE)
            raise
        return probe


class _Training(msgspec.Struct, frozen=True):
    """What training consumed, from a capture's summary.json, and how its config differs."""

    folder: str
    samples_per_s: float | None
    differences: list[ConfigChange]


def _training(config: CaptureConfig, capture: str | Path | None) -> _Training | None:
    if capture is None:
        if not outdir.is_capture(Path(config.out_dir)):
            return None
        capture = config.out_dir
    path = Path(capture) / files.SUMMARY
    if not path.is_file():
        raise InputError(f"--capture: no {files.SUMMARY} in this folder (not a tracekit capture)", path=capture)
    summary = load_capture_summary(path.read_bytes(), source=str(path))
    ours, theirs = to_dict(config), summary.config or {}
    differences = [
        ConfigChange(key=key, captured=theirs.get(key), probed=ours[key])
        for key in _SAME
        if key in theirs and theirs[key] != ours[key]
    ]
    return _Training(str(capture), summary.throughput.global_samples_per_s, differences)


def _read_rank(folder: Path, rank: int) -> dict[str, Any]:
    path = folder / fetch_name(rank)
    try:
        data = json.loads(path.read_bytes())
    except (OSError, ValueError) as exc:
        raise InputError(f"rank {rank} left no readable fetch times ({exc})", path=path) from None
    if not isinstance(data, dict) or not data.get("fetch_ns"):
        raise InputError(f"rank {rank} measured no batch", path=path)
    return data


def _merge(folder: Path, config: CaptureConfig, *, warmup: int, training: _Training | None) -> LoaderProbe:
    per_rank = []
    for rank in range(config.nproc):
        data = _read_rank(folder, rank)
        per_rank.append(rank_fetches(rank, [int(v) for v in data["fetch_ns"]], int(data["wall_ns"])))
    slowest = min(per_rank, key=lambda r: r.batches_per_s)
    samples_per_s = slowest.batches_per_s * config.batch_size * config.nproc
    notes: list[LoaderNote] = []
    room: Headroom | None = None
    if training is not None:
        if training.samples_per_s:
            room = headroom(samples_per_s, training.samples_per_s, capture=training.folder)
        else:
            notes.append(LoaderNote(kind=LoaderNoteKind.NO_THROUGHPUT, capture=training.folder))
        if training.differences:
            notes.append(
                LoaderNote(kind=LoaderNoteKind.OTHER_CONFIG, capture=training.folder, differences=training.differences)
            )
    return LoaderProbe(
        config=to_dict(config),
        world_size=config.nproc,
        batch_size=config.batch_size,
        warmup_batches=warmup,
        per_rank=per_rank,
        slowest_rank=slowest.rank,
        samples_per_s=samples_per_s,
        samples_per_s_by=CeilingBy.SLOWEST_RANK,
        headroom=room,
        notes=notes,
    )
