"""``tracekit audit-params``: which parameters get no gradient, as typed Structs.

One forward and backward of the workload on one real batch, on one process, then every
parameter is put in one class:

- ``unused``: it requires a gradient and got none (``grad is None``): forward never reached
  it. Under DDP such a parameter needs ``find_unused_parameters=True`` (else DDP stops at the
  next step waiting for its gradient), which walks the autograd graph after every forward.
- ``frozen``: ``requires_grad`` is False; DDP leaves it out, it costs nothing.
- ``zero_grad`` (only when asked): it got a gradient, all zeros (a dead branch: a ReLU that
  never fires, a masked path). DDP all-reduces it like any other.

Parameters are grouped by the module that owns them (its qualified name, ``""`` for the
model itself), each group with the parameters' names and element counts. Layout of schema 1.x:
``config`` (the capture configuration, plain JSON), ``device``, ``batch_size``, totals,
``unused``, ``frozen``, ``zero_grad`` (None when not asked), ``notes``.

Schema 1.1 (from 1.0): ``notes`` are :class:`~tracekit.results.vocab.AuditNote` kinds, where 1.0
held sentences (read into them when a 1.0 record is loaded).
"""

from __future__ import annotations

from typing import Any, Final

import msgspec

from tracekit.results import upgrade
from tracekit.results.records import load_record
from tracekit.results.vocab import AuditNote  # noqa: TC001  (msgspec reads it at run time)

__all__ = [
    "PARAM_AUDIT_SCHEMA",
    "PARAM_AUDIT_SCHEMA_VERSION",
    "ModuleParams",
    "ParamAudit",
    "load_param_audit",
]

PARAM_AUDIT_SCHEMA: Final = "tracekit.param_audit"
PARAM_AUDIT_SCHEMA_VERSION: Final = "1.1"


class ModuleParams(msgspec.Struct, kw_only=True, frozen=True):
    """The parameters of one module in one class (unused, frozen or zero-gradient)."""

    module: str
    #: names relative to the module (``weight``, ``bias``)
    parameters: list[str]
    numel: int

    @property
    def count(self) -> int:
        """How many parameters."""
        return len(self.parameters)


class ParamAudit(msgspec.Struct, kw_only=True, frozen=True):
    """``tracekit audit-params --json``."""

    schema: str = PARAM_AUDIT_SCHEMA
    schema_version: str = PARAM_AUDIT_SCHEMA_VERSION
    config: dict[str, Any] | None = None
    device: str
    batch_size: int | None = None
    parameters: int
    numel: int
    unused: list[ModuleParams]
    frozen: list[ModuleParams]
    #: None: not asked for (``--include-zero-grad``)
    zero_grad: list[ModuleParams] | None = None
    notes: list[AuditNote] = []

    @property
    def unused_count(self) -> int:
        """Parameters that require a gradient and got none."""
        return sum(m.count for m in self.unused)

    @property
    def unused_numel(self) -> int:
        """Their elements."""
        return sum(m.numel for m in self.unused)


def load_param_audit(data: bytes | str, *, source: str) -> ParamAudit:
    """Parse a saved record (:func:`tracekit.results.records.load_record`); write one with ``dump_record``."""
    return load_record(data, ParamAudit, what="tracekit parameter audit", source=source, upgrade=upgrade.audit_1_0)
