"""The fields of the capture config as ``--help`` lists them: read from the config's structs
(:class:`~tracekit.capture.config.CaptureConfig` and its sections) and the ``#:`` comment above
each field, so that the help cannot drift from the config."""

from __future__ import annotations

import inspect
import json
import re
import typing
from typing import Any, Final, Literal

import msgspec

from tracekit.capture.config import SECTIONS, CaptureConfig

__all__ = ["field_docs", "help_rows"]

_FIELD: Final = re.compile(r"(\w+)\s*:")
_SENTENCE_END: Final = re.compile(r"(?<=[a-z0-9)`])\.(\s|$)")
_METAVARS: Final = {int: "INT", float: "NUMBER", bool: "BOOL", str: "TEXT"}
#: A meaning longer than this is cut to its first clause.
_LONG: Final = 200


def field_docs(struct: type[msgspec.Struct]) -> dict[str, str]:
    """Each field of ``struct`` -> its ``#:`` comment (joined into one line), where it has one."""
    try:
        source = inspect.getsource(struct)
    except (OSError, TypeError):  # no source (a frozen install): the help lists names and defaults only
        return {}
    docs: dict[str, str] = {}
    comment: list[str] = []
    for line in source.splitlines()[1:]:
        text = line.strip()
        if text.startswith("#:"):
            comment.append(text[2:].strip())
            continue
        found = _FIELD.match(text)
        if found and found[1] in struct.__struct_fields__ and comment:
            docs[found[1]] = " ".join(comment)
        comment = []
    return docs


def _meaning(text: str) -> str:
    """The first sentence of a field's comment, cut at its first clause when long, in plain text."""
    text = text.replace("``", "")
    found = _SENTENCE_END.search(text)
    sentence = text if found is None else text[: found.start() + 1]
    if len(sentence) > _LONG:
        clause = next(sentence.split(mark, 1)[0] for mark in ("; ", ": ", ".") if mark in sentence)
        sentence = clause if clause.endswith(".") else f"{clause}."
    return sentence


def _metavar(kind: Any) -> str:
    """``INT``, ``NUMBER|null``, ``auto|nccl|gloo``, ``JSON`` ... for a field's type."""
    if typing.get_origin(kind) is Literal:
        return "|".join(map(str, typing.get_args(kind)))
    args = typing.get_args(kind)
    if type(None) in args:
        return f"{_metavar(next(a for a in args if a is not type(None)))}|null"
    return _METAVARS.get(kind, "JSON")


def _default(field: msgspec.structs.FieldInfo) -> Any:
    if field.default is not msgspec.NODEFAULT:
        return field.default
    return field.default_factory()


def help_rows() -> list[tuple[str, str]]:
    """``(--field=METAVAR, meaning [default: value])`` for every field, a section's as ``--section.field``."""
    rows: list[tuple[str, str]] = []

    def add(struct: type[msgspec.Struct], prefix: str) -> None:
        docs = field_docs(struct)
        for field in msgspec.structs.fields(struct):
            if field.name in SECTIONS and not prefix:
                add(SECTIONS[field.name], f"{field.name}.")
                continue
            meaning = _meaning(docs.get(field.name, ""))
            default = json.dumps(_default(field))
            rows.append((f"--{prefix}{field.name}={_metavar(field.type)}", f"{meaning} [default: {default}]".strip()))

    add(CaptureConfig, "")
    return rows
