"""accelerate configs shipped with tracekit, selectable by name in ``accelerate_config``.

``ddp``, ``fsdp`` (FSDP1, FULL_SHARD), ``fsdp_shard_grad_op``, ``fsdp2`` (``fully_shard``),
``deepspeed_zero2`` and ``deepspeed_zero3`` are YAML files in this folder (package data). A
bare name (``fsdp``, or ``fsdp.yaml`` where no such file exists) names the shipped file; any
other value is the path of the user's own config.

:func:`backend` names what a config runs (``DDP``, ``FSDP FULL_SHARD``, ``FSDP2``,
``ZeRO-2``), for the sweep's table; :func:`check` refuses, before any rank starts, a config
that cannot run here (a missing file, DeepSpeed without the deepspeed package, more than one
machine: a capture runs on one).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any, Final

from tracekit.errors import InputError

__all__ = ["BUILTIN", "backend", "check", "is_deepspeed", "read", "resolve"]

FOLDER: Final = Path(__file__).resolve().parent
#: The shipped configs, by name.
BUILTIN: Final = tuple(sorted(p.stem for p in FOLDER.glob("*.yaml")))
_SUFFIXES: Final = (".yaml", ".yml")


def resolve(value: str) -> Path:
    """The file ``value`` names: an existing path as given, else a shipped config by name."""
    path = Path(value).expanduser()
    if path.is_file():
        return path
    name = path.name.removesuffix(".yaml").removesuffix(".yml") if path.parent == Path() else None
    if name in BUILTIN:
        return FOLDER / f"{name}.yaml"
    raise InputError(
        f"accelerate_config {value!r}: no such file, and not a built-in config ({', '.join(BUILTIN)})", path=value
    )


def read(value: str) -> dict[str, Any]:
    """The accelerate config ``value`` names, as plain data."""
    import yaml  # accelerate's dependency: there whenever a capture can run

    path = resolve(value)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise InputError(f"cannot read the accelerate config ({exc.strerror})", path=path) from None
    except yaml.YAMLError as exc:
        raise InputError(f"the accelerate config is not valid YAML ({exc})".replace("\n", " "), path=path) from None
    if not isinstance(data, dict):
        raise InputError("the accelerate config is not a YAML mapping", path=path)
    return data


def is_deepspeed(data: dict[str, Any]) -> bool:
    """Whether an accelerate config runs DeepSpeed."""
    return str(data.get("distributed_type", "")).upper() == "DEEPSPEED"


def backend(value: str | None, *, nproc: int) -> str:
    """What the accelerate config ``value`` runs: ``DDP``, ``FSDP FULL_SHARD``,
    ``FSDP SHARD_GRAD_OP``, ``FSDP2``, ``FSDP2 (no reshard)``, ``ZeRO-2`` ...; with no config,
    what the launcher generates (``DDP`` on several ranks, ``single process`` on one)."""
    if value is None:
        return "DDP" if nproc > 1 else "single process"
    data = read(value)
    kind = str(data.get("distributed_type", "NO")).upper()
    if kind == "FSDP":
        fsdp = data.get("fsdp_config") or {}
        if str(fsdp.get("fsdp_version", 1)) == "2":
            reshard = str(fsdp.get("fsdp_reshard_after_forward", True)).lower() not in ("false", "shard_grad_op")
            return "FSDP2" if reshard else "FSDP2 (no reshard)"
        return f"FSDP {fsdp.get('fsdp_sharding_strategy', 'FULL_SHARD')}"
    if kind == "DEEPSPEED":
        stage = (data.get("deepspeed_config") or {}).get("zero_stage")
        return f"ZeRO-{stage}" if stage is not None else "DeepSpeed"
    if kind == "NO" or nproc == 1:
        return "single process"
    return "DDP"


def check(value: str | None) -> Path | None:
    """The file of the accelerate config ``value`` (None: none given), checked to run here."""
    if value is None:
        return None
    path = resolve(value)
    data = read(value)
    machines = data.get("num_machines", 1)
    if machines not in (1, "1", None):
        raise InputError(
            f"num_machines: {machines}: tracekit captures on one machine (its ranks would wait for the other "
            "machines until the timeout); set num_machines: 1",
            path=path,
        )
    if is_deepspeed(data) and importlib.util.find_spec("deepspeed") is None:
        raise InputError(
            "deepspeed is not installed (the accelerate config runs DeepSpeed): pip install deepspeed", path=path
        )
    return path
