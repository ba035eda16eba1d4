"""The capture configuration: a JSON file plus ``--field=value`` / ``--section.field=value``.

Validation is typed (msgspec): an unknown key is an error naming it and the closest valid
key, a value of the wrong type names the field. Command-line values are read as JSON when
they parse as JSON (``--nvtx=false``, ``--workload_args={"depth": 4}``), else as strings.
"""

from __future__ import annotations

import difflib
import json
import math
import os
import re
import typing
from pathlib import Path
from typing import Any, Final, Literal

import msgspec

from tracekit.capture.config_errors import BadField, blame, expected, split_validation
from tracekit.errors import InputError

Backend = Literal["auto", "nccl", "gloo"]
Precision = Literal["no", "fp16", "bf16"]
CommHook = Literal["default", "fp16", "bf16", "noop"]
#: ``default``: the optimizer as the workload built it; ``foreach`` / ``fused``: rebuilt with that
#: implementation (:mod:`tracekit.capture.optimizer_impl`).
OptimizerImpl = Literal["default", "foreach", "fused"]


class ProfilerConfig(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """torch.profiler's schedule and options. The active steps are those traced."""

    #: Steps the profiler skips first.
    wait: int = 1
    #: Steps it records but throws away (the profiler's own warm-up).
    warmup: int = 1
    #: Steps it traces.
    active: int = 3
    #: Cycles of wait + warmup + active.
    repeat: int = 1
    #: Record the input shapes of each operator.
    record_shapes: bool = False
    #: Record allocations and frees (the memory counters).
    profile_memory: bool = False
    #: Record the Python stack of each operator.
    with_stack: bool = False


class CaptureConfig(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """Everything ``tracekit capture`` needs to run a training step on N ranks."""

    #: "package.module:function" (a factory returning a Workload) or a built-in name.
    workload: str = "mlp"
    #: Keyword arguments for the workload factory.
    workload_args: dict[str, Any] = msgspec.field(default_factory=dict)
    #: Per-rank batch size.
    batch_size: int = 32
    #: DataLoader worker processes per rank (0: batches are loaded in the training process).
    num_workers: int = 0
    #: The DataLoader copies batches into pinned (page-locked) memory.
    pin_memory: bool = False
    #: Batches each DataLoader worker loads ahead (null: the DataLoader's default).
    prefetch_factor: int | None = None
    #: DataLoader workers live across epochs.
    persistent_workers: bool = False
    #: Steps run first and excluded from the timings.
    warmup_steps: int = 2
    #: Steps timed after warmup.
    measured_steps: int = 5
    profiler: ProfilerConfig = msgspec.field(default_factory=ProfilerConfig)
    #: Ranks (processes) started on this machine.
    nproc: int = 1
    #: ``auto``: nccl on GPU, gloo on CPU, and no process group for one rank. A backend named
    #: for one rank makes a process group of one (DDP over one rank: its collectives run).
    backend: Backend = "auto"
    #: Cap each rank's CUDA caching allocator at this fraction of its GPU's memory
    #: (``torch.cuda.set_per_process_memory_fraction``): a smaller GPU, for finding where a
    #: batch size runs out of memory. null: no cap; ignored on CPU.
    cuda_memory_fraction: float | None = None
    #: The user's accelerate YAML (DDP, FSDP, DeepSpeed); generated when absent.
    accelerate_config: str | None = None
    #: Micro-batches per optimizer step.
    gradient_accumulation_steps: int = 1
    #: accelerate's mixed precision.
    mixed_precision: Precision = "no"
    #: Clip gradients to this norm (adds the ``clip`` phase); none when null.
    max_grad_norm: float | None = None
    #: DDP's ``find_unused_parameters`` (DDP only): True walks the autograd graph after every
    #: forward to find parameters that get no gradient (``tracekit audit-params`` lists them).
    find_unused_parameters: bool = False
    #: DDP's ``bucket_cap_mb`` (DDP only): the MiB of gradients DDP gathers into one bucket before
    #: it all-reduces them during backward. null: DDP's default (25, and a first bucket of 1 MiB);
    #: a value set also sizes the first bucket.
    ddp_bucket_cap_mb: float | None = None
    #: DDP's ``gradient_as_bucket_view`` (DDP only): gradients are views into the all-reduce buckets,
    #: which saves a copy per bucket and the memory of one set of gradients.
    ddp_gradient_as_bucket_view: bool = False
    #: DDP's communication hook (DDP only): ``default`` all-reduces the gradients as they are;
    #: ``fp16`` / ``bf16`` compress them to half precision for the all-reduce (PyTorch's
    #: ``fp16_compress_hook`` / ``bf16_compress_hook``: half the bytes); ``noop`` skips the
    #: all-reduce (PyTorch's ``noop_hook``, for measuring the headroom of communication only: the
    #: ranks' gradients are no longer averaged, so training diverges).
    ddp_comm_hook: CommHook = "default"
    #: The optimizer's implementation: ``default`` keeps the workload's optimizer as built;
    #: ``foreach`` / ``fused`` rebuild it (its class, param groups and hyper-parameters) with
    #: ``foreach=True`` / ``fused=True``. ``fused``: torch's Adam, AdamW, SGD, Adagrad.
    optimizer_impl: OptimizerImpl = "default"
    #: Environment variables set for every rank process (``--env.PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True``);
    #: a number or true/false is written as its JSON text. Not those tracekit sets for its ranks
    #: (:data:`TRACEKIT_SETS`: RANK, WORLD_SIZE, MASTER_PORT, TRACEKIT_*, ...).
    env: dict[str, str] = msgspec.field(default_factory=dict)
    #: The learning rate the workload's optimizer gets.
    learning_rate: float = 1e-3
    #: The folder the capture is written to (replaced only when the run succeeds).
    out_dir: str = "tracekit-capture"
    #: The seed the workload gets (its model's initial weights and its data).
    seed: int = 0
    #: Mark each phase with an NVTX range too (shown by Nsight Systems).
    nvtx: bool = True
    #: Also record with Nsight Systems (needs nsys and a GPU).
    nsys: bool = False
    #: Write the profiler's categorized memory timeline per rank beside its trace
    #: (``memory_timeline.rank{r}.raw.json.gz``); turns on the profiler's ``record_shapes``,
    #: ``profile_memory`` and ``with_stack``, which it needs.
    memory_timeline: bool = False
    #: Record the CUDA allocator's history over the measured steps and write its snapshot per
    #: rank (``memory_snapshot.rank{r}.pickle``); CUDA only (on CPU a note says so).
    memory_snapshot: bool = False
    #: Count the bytes autograd saves in forward (a saved-tensors hook inside forward).
    memory_saved_tensors: bool = True
    #: Record torch.profiler traces; false times the steps and memory only (summary.json, phase
    #: files), as a sweep's cells do with ``--no-trace``.
    trace: bool = True
    #: Port of the rendezvous; 0 picks a free one.
    main_process_port: int = 0
    #: Seconds the whole run (start-up included) may take; then every process of it is
    #: stopped and the ranks that did not finish are named. null: no limit.
    timeout: float | None = 1800.0

    @property
    def total_steps(self) -> int:
        """Warmup plus measured steps."""
        return self.warmup_steps + self.measured_steps


#: The sections of the config (``--profiler.active=2``): key -> its struct.
SECTIONS: Final[dict[str, type[msgspec.Struct]]] = {"profiler": ProfilerConfig}
#: The config key whose ``env.NAME`` overrides keep their text as written (never read as JSON).
_ENV: Final = "env"
#: Variables tracekit's launch sets for every rank (the launcher's own, the rank and rendezvous
#: variables of accelerate's launch and torchrun): ``env`` may not set them.
TRACEKIT_SETS: Final = frozenset(
    {
        "RANK",
        "LOCAL_RANK",
        "GROUP_RANK",
        "ROLE_RANK",
        "ROLE_NAME",
        "WORLD_SIZE",
        "LOCAL_WORLD_SIZE",
        "GROUP_WORLD_SIZE",
        "ROLE_WORLD_SIZE",
        "MASTER_ADDR",
        "MASTER_PORT",
        "PYTHONUNBUFFERED",
    }
)
#: Prefixes of variables tracekit's launch sets: its own, torchrun's, and those accelerate's launch
#: writes from ``accelerate_config`` (set those there).
TRACEKIT_SETS_PREFIXES: Final = ("TRACEKIT_", "TORCHELASTIC_", "ACCELERATE_", "FSDP_", "MEGATRON_LM_")
_ENV_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_JSON_TYPES: Final = {type(None): "null", list: "an array", dict: "an object"}


def _check_keys(data: dict[str, Any], struct: type[msgspec.Struct], prefix: str) -> None:
    valid = list(struct.__struct_fields__)
    for key, value in data.items():
        if key not in valid:
            close = difflib.get_close_matches(key, valid, n=1, cutoff=0.5)
            flag = f"; did you mean --{prefix}{close[0]}?" if close else f"; valid keys: {', '.join(valid)}"
            hint = f"; did you mean {prefix}{close[0]}?" if close else f"; valid keys: {', '.join(valid)}"
            field = f"{prefix}{key}"
            raise BadField(field, f"unknown config key {field}{flag}", file_reason=f"unknown config key {field}{hint}")
        if key in SECTIONS and isinstance(value, dict):
            _check_keys(value, SECTIONS[key], f"{key}.")


def _choices(field: str) -> tuple[str, ...]:
    """The values a ``Literal`` field (dotted) allows; none for another type."""
    *section, name = field.split(".")
    struct = SECTIONS.get(section[0], CaptureConfig) if section else CaptureConfig
    kind = next((f.type for f in msgspec.structs.fields(struct) if f.name == name), None)
    return tuple(map(str, typing.get_args(kind))) if typing.get_origin(kind) is Literal else ()


def _parse_value(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def apply_overrides(data: dict[str, Any], overrides: dict[str, str]) -> dict[str, Any]:
    """``data`` with ``{"field": "value", "section.field": "value"}`` set."""
    merged: dict[str, Any] = json.loads(json.dumps(data))
    for dotted, text in overrides.items():
        target = merged
        *parents, leaf = dotted.split(".")
        for part in parents:
            node = target.setdefault(part, {})
            if not isinstance(node, dict):
                raise InputError(f"--{dotted}: {part} is not a section")
            target = node
        target[leaf] = text if parents == [_ENV] else _parse_value(text)  # --env.NAME=2 is the text "2"
    return merged


def build_config(
    data: dict[str, Any], *, source: str = "config", overrides: dict[str, str] | None = None
) -> CaptureConfig:
    """Validate plain data into a :class:`CaptureConfig`; errors name the field, and the flag when
    one of ``overrides`` (``{"batch_size": "abc"}``, applied to ``data``) set it."""
    try:
        _check_keys(data, CaptureConfig, "")
        try:
            config = msgspec.convert(_env_as_text(data), CaptureConfig, strict=False)
        except msgspec.ValidationError as exc:
            field, message = split_validation(str(exc))
            text = str(exc).replace("`$.", "`").replace("$.", "")
            raise BadField(field, expected(message, _choices(field)), file_reason=f"invalid config: {text}") from None
        _check_ranges(config)
    except BadField as bad:
        raise blame(bad, source=source, overrides=overrides or {}) from None
    _check_schedule(config, source)
    return config


def _env_bad(key: str, reason: str) -> BadField:
    return BadField(f"{_ENV}.{key}", reason, file_reason=f"invalid config: {reason}")


def _env_as_text(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` with its ``env`` checked (variable names, not those tracekit sets, no NUL) and
    its numbers and booleans written as their JSON text (``{"OMP_NUM_THREADS": 2}`` -> ``"2"``)."""
    env = data.get(_ENV)
    if not isinstance(env, dict):
        return data  # absent, or not an object: msgspec names the field
    text: dict[str, str] = {}
    for key, value in env.items():
        if not _ENV_NAME.fullmatch(key):
            raise _env_bad(key, f"env key {key!r} is not a variable name (letters, digits and _, not a digit first)")
        prefix = next((p for p in TRACEKIT_SETS_PREFIXES if key.startswith(p)), None)
        if key in TRACEKIT_SETS or prefix is not None:
            what = key if prefix is None else f"the {prefix}* variables"
            raise _env_bad(key, f"env.{key}: tracekit sets {what} for its ranks itself")
        if not isinstance(value, (str, bool, int, float)):
            what = _JSON_TYPES.get(type(value), type(value).__name__)
            raise _env_bad(key, f"env.{key} must be a string or a number, got {what}")
        text[key] = value if isinstance(value, str) else json.dumps(value)
        if "\0" in text[key]:
            raise _env_bad(key, f"env.{key} holds a NUL character")
    return {**data, _ENV: text}


#: The most of a count a config may set (a batch, a prefetch): int32's largest, which torch's
#: sizes and the DataLoader's take; beyond it a value is a typo, not a plan.
MAX_COUNT: Final = 2**31 - 1
#: The most ranks (or DataLoader workers per rank) one machine starts.
MAX_NPROC: Final = 4096
#: The most steps of one kind (warm-up, measured, a schedule's phase) a capture runs.
MAX_STEPS: Final = 1_000_000


def _check_ranges(config: CaptureConfig) -> None:
    """A :class:`BadField` for the first field out of its range, naming the range."""
    fraction, cap, norm = config.cuda_memory_fraction, config.ddp_bucket_cap_mb, config.max_grad_norm
    p = config.profiler

    def counted(name: str, value: int, low: int, high: int = MAX_COUNT) -> tuple[str, object, bool, str]:
        bound = f"at least {low}" if value < low else f"at most {high:,}"  # the one it crosses
        return name, value, low <= value <= high, bound

    checks: list[tuple[str, object, bool, str]] = [  # field, value, in range, the range
        counted("nproc", config.nproc, 1, MAX_NPROC),
        counted("batch_size", config.batch_size, 1),
        counted("measured_steps", config.measured_steps, 1, MAX_STEPS),
        counted("warmup_steps", config.warmup_steps, 0, MAX_STEPS),
        counted("gradient_accumulation_steps", config.gradient_accumulation_steps, 1, MAX_STEPS),
        counted("num_workers", config.num_workers, 0, MAX_NPROC),
        counted("profiler.wait", p.wait, 0, MAX_STEPS),
        counted("profiler.warmup", p.warmup, 0, MAX_STEPS),
        counted("profiler.active", p.active, 1, MAX_STEPS),
        counted("profiler.repeat", p.repeat, 1, MAX_STEPS),
        ("timeout", config.timeout, config.timeout is None or config.timeout > 0, "above 0 seconds, or null"),
        ("cuda_memory_fraction", fraction, fraction is None or 0 < fraction <= 1, "above 0 and at most 1, or null"),
        ("ddp_bucket_cap_mb", cap, cap is None or (math.isfinite(cap) and cap > 0), "a finite number above 0, or null"),
        ("max_grad_norm", norm, norm is None or (math.isfinite(norm) and norm > 0), "a finite number above 0, or null"),
        ("learning_rate", config.learning_rate, math.isfinite(config.learning_rate), "a finite number"),
        ("seed", config.seed, 0 <= config.seed < 2**63, "at least 0 and below 2**63"),
    ]
    if config.prefetch_factor is not None:
        checks.append(counted("prefetch_factor", config.prefetch_factor, 1, MAX_COUNT))
    for name, value, ok, allowed in checks:
        if not ok:
            shown = json.dumps(value)
            raise BadField(
                name,
                f"out of range: must be {allowed}",
                file_reason=f"invalid config: {name} is out of range: must be {allowed}, got {shown}",
            )


def _check_schedule(config: CaptureConfig, source: str) -> None:
    p = config.profiler
    needed = (p.wait + p.warmup + p.active) * p.repeat
    if config.trace and needed > config.total_steps:
        raise InputError(
            f"invalid config: the profiler schedule needs {needed} steps "
            f"((wait {p.wait} + warmup {p.warmup} + active {p.active}) x repeat {p.repeat}) but "
            f"warmup_steps + measured_steps is {config.total_steps}",
            path=source,
        )
    if config.prefetch_factor is not None and config.num_workers == 0:
        raise InputError("invalid config: prefetch_factor needs num_workers > 0", path=source)
    if config.persistent_workers and config.num_workers == 0:
        raise InputError("invalid config: persistent_workers needs num_workers > 0", path=source)


def load_config(path: str | Path | None, overrides: dict[str, str] | None = None) -> CaptureConfig:
    """Read a JSON config file (or defaults when ``path`` is None) and apply overrides."""
    data: dict[str, Any] = {}
    source = "command line"
    if path is not None:
        source = str(path)
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except OSError as exc:
            raise InputError(f"cannot read config ({exc.strerror})", path=path) from None
        except UnicodeDecodeError as exc:
            raise InputError(
                f"config is not UTF-8 text (byte {exc.start} is {exc.object[exc.start]:#x})", path=path
            ) from None
        except json.JSONDecodeError as exc:
            raise InputError(f"config is not valid JSON ({exc.msg} at line {exc.lineno})", path=path) from None
        except RecursionError:
            raise InputError(
                "config nests deeper than any config does (arrays or objects thousands deep)", path=path
            ) from None
        if not isinstance(data, dict):
            raise InputError("config must be a JSON object", path=path)
    return build_config(apply_overrides(data, overrides or {}), source=source, overrides=overrides)


def to_dict(config: CaptureConfig) -> dict[str, Any]:
    """The config as plain data (for summary.json and for the ranks)."""
    result: dict[str, Any] = dict(msgspec.structs.asdict(config))
    result["profiler"] = msgspec.structs.asdict(config.profiler)
    return result


def parse_overrides(args: list[str]) -> dict[str, str]:
    """``["--a=1", "--b.c", "2"]`` -> ``{"a": "1", "b.c": "2"}``; errors on stray words."""
    out: dict[str, str] = {}
    i = 0
    while i < len(args):
        arg = args[i]
        if not arg.startswith("--") or len(arg) == 2:
            raise InputError(f"unexpected argument {arg!r}; options look like --field=value")
        key, eq, value = arg[2:].partition("=")
        if not eq:
            if i + 1 >= len(args) or args[i + 1].startswith("--"):
                value = "true"  # a bare flag: --nsys
            else:
                i += 1
                value = args[i]
        out[key if key.startswith(f"{_ENV}.") else key.replace("-", "_")] = value  # a variable's name as written
        i += 1
    return out


#: The fields of :class:`CaptureConfig` a :class:`~tracekit.capture.profiler.Profiler` reads (the
#: others are the launcher's and the step loop's); with :class:`ProfilerConfig`'s, the options
#: ``Profiler(...)`` takes by keyword.
PROFILER_FIELDS: Final = (
    "out_dir",
    "warmup_steps",
    "measured_steps",
    "memory_timeline",
    "memory_snapshot",
    "memory_saved_tensors",
    "nvtx",
    "trace",
    "nsys",
)


def profiler_config(config: CaptureConfig | None = None, /, **options: Any) -> CaptureConfig:
    """``config`` (default: the defaults of ``tracekit capture``) with ``options`` set by name: any
    of :data:`PROFILER_FIELDS`, or of :class:`ProfilerConfig`'s (``wait``, ``warmup``, ``active``,
    ``repeat``, ``record_shapes``, ...), for a :class:`~tracekit.capture.profiler.Profiler`. Raises
    :class:`TypeError` naming an unknown option, or a value of the wrong type."""
    if config is not None and not isinstance(config, CaptureConfig):
        what = type(config).__name__
        raise TypeError(
            f"Profiler: config must be a CaptureConfig (tracekit.capture.load_config(path) reads a file), not a {what}"
        )
    if not options:
        return _in_range(config or CaptureConfig())
    config = config or CaptureConfig()
    schedule = ProfilerConfig.__struct_fields__
    known = (*PROFILER_FIELDS, *schedule)
    for name in options:
        if name not in known:
            close = difflib.get_close_matches(name, known, n=1)
            hint = f"; did you mean {close[0]}?" if close else f" (known: {', '.join(known)})"
            raise TypeError(f"Profiler: unknown option {name!r}{hint}")
    data = to_dict(config)
    data["profiler"] |= {k: v for k, v in options.items() if k in schedule}
    data |= {k: os.fspath(v) if k == "out_dir" else v for k, v in options.items() if k not in schedule}
    try:
        built = msgspec.convert(data, CaptureConfig)
    except msgspec.ValidationError as exc:
        raise TypeError(f"Profiler: {str(exc).replace('$.', '')}") from None
    return _in_range(built)


def _in_range(config: CaptureConfig) -> CaptureConfig:
    """``config``, held to the ranges the CLI and a config file are (an :class:`InputError` naming
    the field otherwise)."""
    try:
        _check_ranges(config)
    except BadField as bad:
        raise InputError(f"Profiler: {bad.file_reason.removeprefix('invalid config: ')}") from None
    return config
