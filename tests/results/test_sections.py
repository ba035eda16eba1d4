"""A registered section's fields carry their title and unit to every report (issue 49, item 4:
headers and units were guessed from field-name suffixes, ``gb_per_s`` printed "gb per s")."""

from __future__ import annotations

from typing import Annotated

import msgspec

from tracekit.reports.document import Format, View
from tracekit.reports.layout import fields_section
from tracekit.results.analysis import SectionData
from tracekit.results.sections import FieldMeta, field_meta
from tracekit.results.vocab import Unit


class Link(msgspec.Struct, frozen=True, kw_only=True):
    rank: int
    gb_per_s: Annotated[float, msgspec.Meta(title="bandwidth (GB/s)")]
    peak_bytes: Annotated[int, msgspec.Meta(title="peak", extra={"unit": "bytes"})]
    wait_ns: float  # declares nothing: named from its name, in ms from its suffix


class Links(msgspec.Struct, frozen=True, kw_only=True):
    busiest: Annotated[int, msgspec.Meta(title="busiest rank")]
    per_rank: list[Link]


def test_the_declared_titles_and_units_are_read_with_their_list_s_name() -> None:
    assert field_meta(Links) == {
        "busiest": FieldMeta(title="busiest rank"),
        "per_rank.gb_per_s": FieldMeta(title="bandwidth (GB/s)"),
        "per_rank.peak_bytes": FieldMeta(title="peak", unit=Unit.BYTES),
    }
    assert field_meta(None) == {} and field_meta(int) == {}


def test_the_report_heads_and_writes_each_column_as_declared() -> None:
    result = Links(busiest=3, per_rank=[Link(rank=0, gb_per_s=12.5, peak_bytes=3 * 2**20, wait_ns=2.5e6)])
    row = result.per_rank[0]
    assert (row.gb_per_s, row.wait_ns) == (12.5, 2.5e6)
    data = SectionData(title="Links", data=msgspec.to_builtins(result), fields=field_meta(Links))
    decoded = msgspec.json.decode(msgspec.json.encode(data), type=SectionData)  # as a saved analysis holds it
    section = fields_section("links", decoded, View(format=Format.MARKDOWN))
    facts, rows = section.tables
    assert facts.rows == (("busiest rank", "3"),)
    assert rows.columns == ("rank", "bandwidth (GB/s)", "peak (MiB)", "wait (ms)")
    assert rows.rows == (("0", "12.50", "3.0", "2.50"),)
