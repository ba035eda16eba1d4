"""What a registered section's result says about its own fields, for the reports that show it.

A section's result Struct declares each field's title and unit where it is written::

    median_kernel_ns: Annotated[float | None, msgspec.Meta(title="median kernel", extra={"unit": "ns"})]

:func:`field_meta` reads them (a field of a list of records as ``"list.field"``) into
``SectionData.fields``, so the generic renderer heads a column with its title and writes its
values in its unit (a duration in ms or µs, a share in %, bytes in MiB), instead of guessing both
from the field's name. A field without them is named from its name, its unit from its suffix
(``_ns``, ``_pct``), as before.
"""

from __future__ import annotations

from typing import Any

import msgspec
import msgspec.inspect as mi

from tracekit.results.vocab import Unit


class FieldMeta(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """A field's title and unit, as its Struct declares them."""

    title: str | None = None
    unit: Unit | None = None


def field_meta(kind: type | None) -> dict[str, FieldMeta]:
    """The declared title and unit of each field of the Struct ``kind`` and of the records of its
    list fields (``"per_rank.median_kernel_ns"``); fields that declare neither are left out."""
    if kind is None:
        return {}
    info = mi.type_info(kind)
    return dict(_walk(info, "")) if isinstance(info, mi.StructType) else {}


def _walk(info: mi.StructType, prefix: str) -> list[tuple[str, FieldMeta]]:
    out: list[tuple[str, FieldMeta]] = []
    for f in info.fields:
        declared, inner = _declared(f.type)
        if declared is not None:
            out.append((prefix + f.name, declared))
        if isinstance(inner, mi.ListType) and isinstance(inner.item_type, mi.StructType):
            out += _walk(inner.item_type, f"{prefix}{f.name}.")
    return out


def _declared(t: Any) -> tuple[FieldMeta | None, Any]:
    """The title and unit a field's type declares (``Annotated[..., Meta]``), and the type inside."""
    if not isinstance(t, mi.Metadata):
        return None, t
    title = (t.extra_json_schema or {}).get("title")
    unit = (t.extra or {}).get("unit")
    return FieldMeta(title=title, unit=None if unit is None else Unit(unit)), t.type
