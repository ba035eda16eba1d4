"""Small builders the cases are made of: mutate a source's document, its bytes, or make a special file."""

from __future__ import annotations

import gzip
import json
import os
import sqlite3
from contextlib import closing
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from tests.robustness.sources import Source


def doc(change: Callable[[Any], Any], *, name: str | None = None) -> Callable[[Path, Source], Path]:
    """Write the source's JSON document after ``change(doc)`` (which edits it, or returns a new one)."""

    def build(folder: Path, src: Source) -> Path:
        document = src.doc()
        changed = change(document)
        return src.write(folder, document if changed is None else changed, name=name)

    return build


#: A value no trace holds, set through the document and then replaced in the JSON text.
SENTINEL = 987654321.125


def doc_text(change: Callable[[Any], None], new: bytes, *, name: str | None = None) -> Callable[[Path, Source], Path]:
    """Write the document after ``change`` (which puts :data:`SENTINEL` somewhere), with the
    sentinel's JSON text replaced by ``new``: for what ``json.dumps`` cannot write (``NaN``, ``1e400``)."""

    def build(folder: Path, src: Source) -> Path:
        document = src.doc()
        change(document)
        data = json.dumps(document).encode().replace(json.dumps(SENTINEL).encode(), new)
        return src.write(folder, data, name=name)

    return build


def text(
    change: Callable[[bytes], bytes], *, name: str | None = None, gz: bool | None = None
) -> Callable[[Path, Source], Path]:
    """Write the source's decompressed bytes after ``change`` (gzipped again when the source is, or ``gz``)."""

    def build(folder: Path, src: Source) -> Path:
        return src.write(folder, change(src.data()), name=name, gz=gz)

    return build


def stored(change: Callable[[bytes], bytes], *, name: str | None = None) -> Callable[[Path, Source], Path]:
    """Write the source's bytes as stored (gzip included) after ``change``, not compressed again."""

    def build(folder: Path, src: Source) -> Path:
        return src.write(folder, change(src.raw()), name=name, gz=False)

    return build


def content(data: bytes | Any, *, name: str | None = None, gz: bool | None = None) -> Callable[[Path, Source], Path]:
    """Write fixed content (bytes, or a document as JSON) under the source's file name."""

    def build(folder: Path, src: Source) -> Path:
        return src.write(folder, data, name=name, gz=gz)

    return build


def pristine(folder: Path, src: Source, *, name: str | None = None) -> Path:
    """The source itself, unchanged (cut when the source is cut)."""
    path = folder / (name or src.name)
    path.write_bytes(src.raw())
    return path


# --------------------------------------------------------------------------- finding events


def events(document: Any) -> list[Any]:
    found: list[Any] = document["traceEvents"] if isinstance(document, dict) else document
    return found


def longest(document: Any, cat: str = "kernel") -> dict[str, Any]:
    """The longest event of category ``cat``."""
    found = [e for e in events(document) if isinstance(e, dict) and e.get("cat") == cat and e.get("ph") == "X"]
    return max(found, key=lambda e: e.get("dur", 0))


def step(document: Any) -> dict[str, Any]:
    """The first ProfilerStep range."""
    return next(e for e in events(document) if str(e.get("name", "")).startswith("ProfilerStep#"))


def set_field(pick: Callable[[Any], dict[str, Any]], key: str, value: Any) -> Callable[[Any], None]:
    """Set ``key`` of the event ``pick`` finds to ``value`` (a sentinel ``DELETE`` removes it)."""

    def change(document: Any) -> None:
        event = pick(document)
        if value is DELETE:
            event.pop(key, None)
        else:
            event[key] = value

    return change


def set_arg(pick: Callable[[Any], dict[str, Any]], key: str, value: Any) -> Callable[[Any], None]:
    def change(document: Any) -> None:
        pick(document).setdefault("args", {})[key] = value

    return change


def rename_all(old: str, new: str) -> Callable[[Any], None]:
    """Rename every event named ``old``."""

    def change(document: Any) -> None:
        for event in events(document):
            if isinstance(event, dict) and event.get("name") == old:
                event["name"] = new

    return change


def top_kernel_name(document: Any) -> str:
    """The kernel name with the most GPU time."""
    totals: dict[str, float] = {}
    for e in events(document):
        if isinstance(e, dict) and e.get("cat") == "kernel":
            totals[e["name"]] = totals.get(e["name"], 0) + float(e.get("dur", 0))
    return max(totals, key=lambda n: totals[n])


def set_info(key: str, value: Any) -> Callable[[Any], None]:
    """Set ``distributedInfo[key]`` (a sentinel ``DELETE`` removes it)."""

    def change(document: Any) -> None:
        info = document.setdefault("distributedInfo", {})
        if value is DELETE:
            info.pop(key, None)
        else:
            info[key] = value

    return change


class _Delete:
    def __repr__(self) -> str:
        return "DELETE"


DELETE: Any = _Delete()


def cut(fraction: float) -> Callable[[bytes], bytes]:
    return lambda data: data[: int(len(data) * fraction)]


def gz(data: bytes) -> bytes:
    return gzip.compress(data, 1)


# --------------------------------------------------------------------------- special files


def fifo(folder: Path, src: Source, *, name: str | None = None) -> Path:
    """A named pipe with no writer: opening it for reading blocks forever."""
    path = folder / (name or src.name)
    os.mkfifo(path)
    return path


def symlink(target: str, *, name: str | None = None) -> Callable[[Path, Source], Path]:
    def build(folder: Path, src: Source) -> Path:
        path = folder / (name or src.name)
        path.symlink_to(target)
        return path

    return build


def symlink_loop(folder: Path, src: Source) -> Path:
    path = folder / src.name
    path.symlink_to(path.name)  # itself
    return path


def directory(folder: Path, src: Source) -> Path:
    path = folder / src.name
    path.mkdir()
    return path


def unreadable(folder: Path, src: Source) -> Path:
    path = pristine(folder, src)
    path.chmod(0)
    return path


# --------------------------------------------------------------------------- SQLite


def sqlite_edit(
    *statements: str | Callable[[sqlite3.Connection], None], name: str | None = None
) -> Callable[[Path, Source], Path]:
    """A copy of the source export with SQL ``statements`` (or functions of the connection) run on it."""

    def build(folder: Path, src: Source) -> Path:
        path = pristine(folder, src, name=name)
        with closing(sqlite3.connect(path)) as db, db:
            for sql in statements:
                if isinstance(sql, str):
                    db.execute(sql)
                else:
                    sql(db)
        return path

    return build


def sqlite_new(
    tables: dict[str, tuple[list[str], list[tuple[Any, ...]]]], *, name: str | None = None
) -> Callable[[Path, Source], Path]:
    """A new SQLite file with ``tables``: name -> (columns, rows)."""

    def build(folder: Path, src: Source) -> Path:
        path = folder / (name or src.name)
        with closing(sqlite3.connect(path)) as db, db:
            for table, (columns, rows) in tables.items():
                db.execute(f"CREATE TABLE {table} ({', '.join(columns)})")
                marks = ", ".join("?" for _ in columns)
                db.executemany(f"INSERT INTO {table} VALUES ({marks})", rows)
        return path

    return build


def loosen(table: str) -> Callable[[sqlite3.Connection], None]:
    """Copy ``table`` without its constraints (NOT NULL, types), so that any value can go in."""
    return drop_column(table, "")


def drop_column(table: str, column: str) -> Callable[[sqlite3.Connection], None]:
    """Remove ``column`` from ``table`` (copying the rest, without constraints)."""

    def edit(db: sqlite3.Connection) -> None:
        kept = [f'"{r[1]}"' for r in db.execute(f"PRAGMA table_info({table})") if r[1] != column]
        db.execute(f"CREATE TABLE tk_copy AS SELECT {', '.join(kept)} FROM {table}")
        db.execute(f"DROP TABLE {table}")
        db.execute(f"ALTER TABLE tk_copy RENAME TO {table}")

    return edit
