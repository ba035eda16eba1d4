"""Analyzers are pure (DESIGN.md): no file I/O, no printing.

``.importlinter`` keeps the modules that write files or print out of ``tracekit/analyzers``; this
test finds what an import does not show: ``open``, ``print``, and the methods that read or write
files (polars' ``write_parquet`` / ``read_csv`` / ``sink_ipc``, pathlib's ``write_text`` /
``mkdir``, ...), called or passed on to be called.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Final

import pytest

import tracekit.analyzers

ANALYZERS: Final = Path(tracekit.analyzers.__file__).parent
#: Functions an analyzer never calls.
FUNCTIONS: Final = frozenset({"open", "print", "input", "breakpoint"})
#: Methods an analyzer never calls: they read, write or remove files, or show a figure.
METHODS: Final = frozenset({"open", "mkdir", "unlink", "touch", "rmdir", "chmod", "symlink_to", "hardlink_to", "show"})
#: Method prefixes of polars' and pathlib's readers and writers (``DataFrame.rename`` renames columns).
PREFIXES: Final = ("read_", "scan_", "write_", "sink_")
#: polars' writers that, given no file, return the text: ``frame.write_json()`` is a string.
TO_TEXT: Final = frozenset({"write_json", "write_ndjson", "write_csv"})


def io_calls(source: str) -> list[str]:
    """The uses in ``source`` of what does file I/O or prints (called, or passed on to be called), as ``line: name``."""
    found = []
    tree = ast.parse(source)
    in_memory = {
        id(node.func)
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in TO_TEXT
        and not node.args
        and not node.keywords
    }
    for node in ast.walk(tree):
        if id(node) in in_memory:
            continue
        if isinstance(node, ast.Name) and node.id in FUNCTIONS:
            found.append(f"{node.lineno}: {node.id}")
        elif isinstance(node, ast.Attribute) and (node.attr in METHODS or node.attr.startswith(PREFIXES)):
            found.append(f"{node.lineno}: .{node.attr}")
    return found


@pytest.mark.parametrize("path", sorted(ANALYZERS.rglob("*.py")), ids=lambda p: p.name)
def test_an_analyzer_does_no_file_io(path: Path) -> None:
    assert io_calls(path.read_text(encoding="utf-8")) == []


@pytest.mark.parametrize(
    "source",
    [
        "frame.write_parquet(path)",
        "pl.read_parquet(path)",
        "pl.scan_csv(path).sink_ipc(out)",
        "Path(x).write_text(text)",
        "with open(path) as f: pass",
        "print(frame)",
        "folder.mkdir()",
        "write_atomically(path, frame.write_parquet)",
        "frame.write_json(path)",
        "frame.write_csv(file=out)",
        "write_atomically(path, frame.write_json)",
    ],
)
def test_the_check_finds_file_io(source: str) -> None:
    assert io_calls(source)


def test_the_check_leaves_frame_operations_alone() -> None:
    assert io_calls("frame.rename({'a': 'b'}).with_columns(x=1).write") == []
    assert io_calls("msgspec.json.decode(frame.select(x).write_json())") == []  # a string, no file
