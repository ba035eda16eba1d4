"""The re-timed gains remembered: each scenario's gains are a function of the ranks' plans and
the scenario only (:func:`tracekit.analyzers.retime.simulate`), so a run analyzed again with the
same plans and what-ifs (a warm ``tracekit analyze``) reads them back instead of re-timing.

The key (:func:`scenario_key`) is a digest of everything the re-timing reads: every array and
number of every :class:`~tracekit.analyzers.retime_plan.RankPlan` and of the
:class:`~tracekit.analyzers.retime_plan.Scenario`, by value. Another option, another file, a
changed step: other plans, another key. Where the gains are kept, and that code other than
this re-timing's never answers, is the keeper's business (:class:`Memo`:
:class:`tracekit.pipeline.whatif_cache.WhatIfCache` adds the re-timing's code to the key).
"""

from __future__ import annotations

import dataclasses
import hashlib
from typing import TYPE_CHECKING, Any, Protocol

import msgspec
import numpy as np

if TYPE_CHECKING:
    from tracekit.analyzers.retime_plan import RankPlan, Scenario

__all__ = ["Memo", "decode", "encode", "feed", "hex_of", "new_digest", "plans_digest", "scenario_key"]


class Memo(Protocol):
    """Where gains are kept between runs (none in an analyzer: it does no I/O)."""

    def get(self, key: str) -> bytes | None:
        """What was put under ``key``, if it is still there and whole."""
        ...

    def put(self, key: str, data: bytes) -> None:
        """Keep ``data`` under ``key`` (never an error: a memo that cannot keep it forgets it)."""
        ...


def new_digest(key: bytes = b"") -> Any:
    """A digest for :func:`feed`, begun with ``key``: SHA-256, which the CPU's SHA instructions
    run at 1.8 GB/s here against BLAKE2b's 0.75 (the plans of 1,024 ranks of 6 MB hash their
    task arrays: 0.5 s of a warm run's reduce in BLAKE2b)."""
    return hashlib.sha256(key)


def hex_of(digest: Any) -> str:
    """What a key holds of ``digest``: 160 of its bits, in hex."""
    text: str = digest.hexdigest()[:40]
    return text


def feed(digest: Any, value: object) -> None:
    """Feed ``value`` (an array, a number, None, a dict or a dataclass of them) to ``digest``,
    each part with its kind and size, so that no two values feed the same bytes."""
    if isinstance(value, np.ndarray):
        data = np.ascontiguousarray(value)  # a view where it already is (no copy)
        digest.update(f"a{data.dtype.str}{data.shape}".encode())
        digest.update(data)
    elif (fields := _fields(type(value))) is not None:
        head, names = fields
        digest.update(head)
        for encoded, name in names:
            digest.update(encoded)
            feed(digest, getattr(value, name))
    elif isinstance(value, dict):
        digest.update(f"m{len(value)}".encode())
        for k in sorted(value):
            feed(digest, k)
            feed(digest, value[k])
    else:  # a number, a bool, None
        digest.update(f"v{type(value).__name__}:{value!r};".encode())


#: :func:`_fields` of each class met so far.
_FIELDS: dict[type, tuple[bytes, tuple[tuple[bytes, str], ...]] | None] = {}


def _fields(cls: type) -> tuple[bytes, tuple[tuple[bytes, str], ...]] | None:
    """What :func:`feed` feeds of an instance of the dataclass ``cls`` before its fields' values
    (its name), and each field's name, as bytes and as it is; None for a class that is not a
    dataclass. Looked up once per class: a rank's plan and scenario feed tens of them (1,024
    ranks' plans digested in 0.08 s against 0.09 to 0.10 s with the fields looked up at every
    instance)."""
    if cls not in _FIELDS:
        names = (
            tuple((f.name.encode(), f.name) for f in dataclasses.fields(cls)) if dataclasses.is_dataclass(cls) else None
        )
        _FIELDS[cls] = None if names is None else (f"d{cls.__name__}".encode(), names)
    return _FIELDS[cls]


def plans_digest(plans: list[RankPlan]) -> str:
    """A digest of every rank's plan, in rank order."""
    digest = new_digest()
    for plan in sorted(plans, key=lambda p: p.rank):
        feed(digest, plan)
    return hex_of(digest)


def scenario_key(plans: str, scenario: Scenario) -> str:
    """The key of ``scenario``'s gains on the plans of digest ``plans``."""
    digest = new_digest(plans.encode())
    feed(digest, scenario)
    return hex_of(digest)


def encode(gains: dict[int, float]) -> bytes:
    """Each rank's gain as kept (every float to the bit)."""
    return msgspec.msgpack.encode(gains)


def decode(data: bytes) -> dict[int, float] | None:
    """Gains as :func:`encode` kept them (None: not such gains)."""
    try:
        return msgspec.msgpack.decode(data, type=dict[int, float])
    except msgspec.MsgspecError:
        return None
