"""Damaged caches: the trace is fine, what a first run left in the cache is not.

A first run fills the cache (``--cache-dir``); the damage is done to every file of one kind it
wrote, whatever the cache's layout: the event cache's Parquet files (the events) and metadata,
the entries' locks, the map cache's entries (``maps/*.msgpack``: the per-rank results) and the
command line's notes of warm runs (``runs/*.json``). The second run must give the same report as
a clean run: a damaged entry is never an error nor a number, the file is read from its source
(the event cache's without a word; a damaged map entry with one warning line on stderr). The
cases of the event cache remove the map entries first, so that the second run reads the events.
"""

from __future__ import annotations

import json
import os
import shutil
from typing import TYPE_CHECKING, Any

from tests.robustness import builders as b
from tests.robustness.harness import Case

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path


#: What an entry's files end with: its Parquet columns, its lock (``<stem>.lock``, empty), a map
#: cache entry, else metadata (the notes of warm runs are told by their folder, ``runs``).
_KINDS = {True: ".parquet", "lock": ".lock", "map": ".msgpack"}


def _kind(path: Path) -> bool | str:
    if path.parent.name == "runs":
        return "runs"
    return next((k for k, end in _KINDS.items() if path.name.endswith(end)), False)


def _files(cache: Path, *, parquet: bool | str) -> list[Path]:
    return sorted(p for p in cache.rglob("*") if p.is_file() and _kind(p) == parquet)


def _each(parquet: bool | str, change: Callable[[Path], None]) -> Callable[[Path], None]:
    """``change`` each Parquet file (True), each metadata file (False), each entry's lock ("lock"),
    each map cache entry ("map") or each note of a warm run ("runs"). The event cache's cases
    remove the map entries first: a map entry would spare the second run reading the events."""

    def damage(cache: Path) -> None:
        files = _files(cache, parquet=parquet)
        assert files, f"the first run left no {_KINDS.get(parquet, parquet or 'metadata')} file in {cache}"
        if parquet in (True, False):
            for path in _files(cache, parquet="map"):
                path.unlink()
        for path in files:
            change(path)

    return damage


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _empty(path: Path) -> None:
    path.write_bytes(b"")


def _json_list(path: Path) -> None:
    path.write_text("[]")


def _garbage(path: Path) -> None:
    path.write_bytes(b"\x00garbage{[")


def _to_fifo(path: Path) -> None:
    path.unlink()
    os.mkfifo(path)


def _to_dir(path: Path) -> None:
    path.unlink()
    path.mkdir()


def _to_dev_zero(path: Path) -> None:
    path.unlink()
    path.symlink_to("/dev/zero")


def _flip(path: Path) -> None:
    """One bit of the middle of the file changed (in a map entry: inside a table of numbers)."""
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))


def _json_edit(edit: Callable[[Any], Any]) -> Callable[[Path], None]:
    def change(path: Path) -> None:
        try:
            data = json.loads(path.read_bytes())
        except ValueError:
            return
        path.write_text(json.dumps(edit(data)))

    return change


def _ints(value: Any, make: Callable[[int], Any]) -> Any:
    """Every integer of a JSON value (not a bool) replaced by ``make(int)``."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return make(value)
    if isinstance(value, dict):
        return {k: _ints(v, make) for k, v in value.items()}
    if isinstance(value, list):
        return [_ints(v, make) for v in value]
    return value


def _outside_key(make: Callable[[int], Any]) -> Callable[[Any], Any]:
    """Replace the integers of the metadata but those of its validity key, so that the entry still matches."""

    def edit(data: Any) -> Any:
        if isinstance(data, dict):
            return {k: v if k == "key" else _ints(v, make) for k, v in data.items()}
        return _ints(data, make)

    return edit


def _set_key(key: str, value: Any) -> Callable[[Path], None]:
    """Set every ``key`` of the metadata (at any depth) to ``value``; the metadata must have one."""

    def edit(data: Any) -> Any:
        if isinstance(data, dict):
            return {k: value if k == key else edit(v) for k, v in data.items()}
        if isinstance(data, list):
            return [edit(v) for v in data]
        return data

    def change(path: Path) -> None:
        before = json.loads(path.read_bytes())
        after = edit(before)
        assert after != before, f"no {key!r} in the cache metadata {path}: update this case to the cache's layout"
        path.write_text(json.dumps(after))

    return change


def _folders_to_files(cache: Path) -> None:
    for folder in [p for p in cache.iterdir() if p.is_dir()]:
        shutil.rmtree(folder)
        folder.write_bytes(b"not a folder")


def _folders_to_loops(cache: Path) -> None:
    for folder in sorted((p for p in cache.iterdir() if p.is_dir()), reverse=True):
        shutil.rmtree(folder)
        folder.symlink_to(folder.name)


def _case(name: str, damage: Callable[[Path], None], *, process: bool = False) -> Case:
    return Case(f"cache-{name}", b.pristine, ("ok",), damage=damage, process=process, same_as_clean=True)


CASES: list[Case] = [
    _case("parquet-truncated", _each(True, _truncate)),
    _case("parquet-empty", _each(True, _empty)),
    _case("parquet-garbage", _each(True, _garbage)),
    _case("parquet-is-folder", _each(True, _to_dir)),
    _case("parquet-is-dev-zero", _each(True, _to_dev_zero), process=True),
    _case("metadata-truncated", _each(False, _truncate)),
    _case("metadata-garbage", _each(False, _garbage)),
    _case("metadata-json-list", _each(False, _json_list)),
    _case("metadata-ints-2^64", _each(False, _json_edit(_outside_key(lambda i: 2**64 + i)))),
    _case("metadata-ints-as-text", _each(False, _json_edit(_outside_key(str)))),
    _case("metadata-rank-2^64", _each(False, _set_key("rank", 2**64))),
    _case("metadata-rank-minus-1", _each(False, _set_key("rank", -1))),
    _case("metadata-is-fifo", _each(False, _to_fifo), process=True),
    _case("metadata-is-folder", _each(False, _to_dir)),
    _case("lock-garbage", _each("lock", _garbage)),
    _case("lock-is-folder", _each("lock", _to_dir)),
    _case("lock-is-fifo", _each("lock", _to_fifo), process=True),
    _case("map-truncated", _each("map", _truncate)),
    _case("map-empty", _each("map", _empty)),
    _case("map-garbage", _each("map", _garbage)),
    _case("map-bit-flipped", _each("map", _flip)),
    _case("map-is-folder", _each("map", _to_dir)),
    _case("map-is-fifo", _each("map", _to_fifo), process=True),
    _case("map-is-dev-zero", _each("map", _to_dev_zero), process=True),
    _case("runs-garbage", _each("runs", _garbage)),
    _case("runs-json-list", _each("runs", _json_list)),
    _case("runs-is-folder", _each("runs", _to_dir)),
    _case("runs-is-fifo", _each("runs", _to_fifo), process=True),
    _case("runs-is-dev-zero", _each("runs", _to_dev_zero), process=True),
    _case("folders-are-files", _folders_to_files),
    _case("folders-are-symlink-loops", _folders_to_loops),
]

GROUPS: dict[str, list[Case]] = {"Damaged caches": CASES}
