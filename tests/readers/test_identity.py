"""File identity: what it samples, that it sees edits that keep size and mtime, and its cost."""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING

import pytest

from tracekit.readers.identity import BLOCK, SAMPLES, FileIdentity, mapped_regular, read_regular, sample_offsets

if TYPE_CHECKING:
    from pathlib import Path


def edit_in_place(path: Path, offset: int, byte: bytes) -> None:
    """Overwrite one byte, keeping the size, and set the mtime back."""
    info = path.stat()
    with path.open("r+b") as handle:
        handle.seek(offset)
        handle.write(byte)
    os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns))


def test_small_files_are_hashed_whole_large_ones_sampled_with_the_ends_and_the_middle() -> None:
    assert sample_offsets(BLOCK * SAMPLES) == [0]
    size = 2 * 1024**3 + 12345
    offsets = sample_offsets(size)
    assert len(offsets) == SAMPLES and offsets[0] == 0 and offsets[-1] == size - BLOCK
    assert any(start <= size // 2 < start + BLOCK for start in offsets)
    assert offsets == sorted(offsets)


@pytest.mark.parametrize("where", ["first", "middle", "last", "small file"])
def test_an_edit_keeping_size_and_mtime_changes_the_digest(tmp_path: Path, where: str) -> None:
    path = tmp_path / "trace.json"
    size = 300_000 if where == "small file" else 8 * 1024 * 1024 + 7
    path.write_bytes(b"a" * size)
    before = FileIdentity.of(path)
    offset = {"first": 10, "middle": size // 2, "last": size - 1, "small file": 123_456}[where]
    edit_in_place(path, offset, b"b")
    after = FileIdentity.of(path)
    assert (after.size, after.mtime_ns, after.inode) == (before.size, before.mtime_ns, before.inode)
    assert after.digest != before.digest


def test_ctime_is_part_of_the_identity(tmp_path: Path) -> None:
    path = tmp_path / "trace.json"
    path.write_bytes(b"x" * 1000)
    before = FileIdentity.of(path)
    time.sleep(0.05)  # ctime ticks every few ms
    path.chmod(0o600)  # changes the ctime only: nothing else a user can set back
    after = FileIdentity.of(path)
    assert (after.size, after.mtime_ns, after.digest) == (before.size, before.mtime_ns, before.digest)
    assert after.ctime_ns != before.ctime_ns and after != before


def test_a_2gb_file_is_identified_in_milliseconds(tmp_path: Path) -> None:
    path = tmp_path / "big.json"
    with path.open("wb") as handle:  # sparse: 2 GB of size without 2 GB of disk
        handle.truncate(2 * 1024**3)
    FileIdentity.of(path)
    started = time.process_time()  # CPU time, the work: a loaded machine does not lengthen it
    FileIdentity.of(path)
    assert time.process_time() - started < 0.05


def test_only_regular_files_are_opened(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    link = tmp_path / "link"
    link.symlink_to("/dev/zero")
    for path in (fifo, link, tmp_path, "/dev/zero"):
        with pytest.raises(OSError, match="not a regular file"):
            FileIdentity.of(path)
        with pytest.raises(OSError, match="not a regular file"):
            read_regular(path, limit=10)
        with pytest.raises(OSError, match="not a regular file"), mapped_regular(path, limit=10):
            pass
    regular = tmp_path / "regular"
    regular.write_bytes(b"0123456789")
    link.unlink()
    link.symlink_to(regular)
    assert read_regular(link, limit=10) == b"0123456789"
    with pytest.raises(OSError, match="not a regular file"):
        read_regular(link, limit=10, follow=False)
    with pytest.raises(OSError, match="over 9 bytes"):
        read_regular(regular, limit=9)
    with mapped_regular(link, limit=10) as view:
        assert view == b"0123456789"
    with pytest.raises(OSError, match="not a regular file"), mapped_regular(link, limit=10, follow=False):
        pass
    with pytest.raises(OSError, match="over 9 bytes"), mapped_regular(regular, limit=9):
        pass


def test_a_mapped_file_is_its_bytes_and_views_kept_past_the_block_stay_readable(tmp_path: Path) -> None:
    """What :func:`mapped_regular` gives is the file's bytes, an empty file's none; a view of it
    still held when the block ends (by a result, or by an error's traceback) is not an error
    and still reads the file's bytes."""
    empty = tmp_path / "empty"
    empty.write_bytes(b"")
    with mapped_regular(empty, limit=10) as view:
        assert view.nbytes == 0
    full = tmp_path / "full"
    full.write_bytes(bytes(range(256)) * 64)
    with mapped_regular(full, limit=1 << 20) as view:
        assert view == full.read_bytes()
        held = view[100:110]
    assert held == bytes(range(100, 110))
    with pytest.raises(KeyError):
        _fail_holding_a_view(full)


def _fail_holding_a_view(path: Path) -> None:
    with mapped_regular(path, limit=1 << 20) as view:
        inner = view[1:3]
        raise KeyError(bytes(inner))
