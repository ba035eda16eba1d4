"""Chunks of text handed to decoding processes through files in memory."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tracekit.readers import handoff
from tracekit.readers.handoff import Slots, read_slot

if TYPE_CHECKING:
    from pathlib import Path

    import pytest


def test_a_slot_holds_its_text_and_is_reused_then_removed() -> None:
    with Slots(2, chunk_bytes=1000) as slots:
        first = slots.put(b"[1, 2, 3]")
        second = slots.put(b"[4]")
        assert first != second and first.parent == second.parent
        assert read_slot(str(first), 9, bytes) == b"[1, 2, 3]"
        slots.release(first)
        again = slots.put(b"[5]")  # shorter text in the same file: only its own bytes are read
        assert again == first and read_slot(str(again), 3, bytes) == b"[5]"
        slots.release(second)
        parts = slots.put(b"[", memoryview(b"xx6, 7yy")[2:6], b"]")  # a chunk in parts, as the reader hands it
        assert read_slot(str(parts), 6, bytes) == b"[6, 7]"
        folder = first.parent
    assert not folder.exists()


def test_without_room_in_shared_memory_the_temporary_folder_is_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(handoff, "SHARED_MEMORY", tmp_path / "absent")
    monkeypatch.setattr(handoff.tempfile, "tempdir", str(tmp_path))
    with Slots(1, chunk_bytes=10) as slots:
        assert slots.put(b"x").parent.parent == tmp_path
