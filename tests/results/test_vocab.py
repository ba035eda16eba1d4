"""The vocabulary: members are their values (in JSON, in comparisons, in text)."""

from __future__ import annotations

import enum

import msgspec
import pytest

from tracekit.results import vocab

ENUMS = [
    obj
    for obj in vars(vocab).values()
    if isinstance(obj, type) and issubclass(obj, enum.Enum) and obj.__module__ == vocab.__name__
]


@pytest.mark.parametrize("kind", ENUMS, ids=lambda e: e.__name__)
def test_every_member_is_its_value(kind: type[enum.Enum]) -> None:
    for member in kind:
        assert isinstance(member, str)
        assert member == member.value
        assert str(member) == f"{member}" == member.value
        assert msgspec.json.encode(member) == msgspec.json.encode(member.value)
        assert msgspec.json.decode(msgspec.json.encode(member), type=kind) is member
