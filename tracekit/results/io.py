"""Save and load an :class:`~tracekit.results.analysis.Analysis` as JSON.

The file says what it is (``schema``) and which version (``schema_version``): a reader
refuses another schema, and a major version it does not know, with one line naming the file.
The rest is validated against the typed model (strict types: a number is not a string, a
list is not an object, an enum has one of its values) and a file that does not fit says, in
one line, which section or field is wrong and how. Fields a file of a newer minor version
adds are ignored; in a file of this version or an older one, a field the schema does not
have means the file was damaged or edited, and is refused like any other fault. A file of an
older minor version is read into this version's layout (:mod:`tracekit.results.upgrade_analysis`:
the sentences it held as kinds and figures) and takes this version.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Final

import msgspec

from tracekit.errors import InputError
from tracekit.results import capture
from tracekit.results.analysis import SCHEMA, SCHEMA_VERSION, Analysis
from tracekit.results.records import older_minor

#: JSON type names as msgspec writes them, in the words of a message.
_TYPE_WORDS: Final = {
    "object": "an object",
    "array": "a list",
    "str": "a string",
    "int": "an integer",
    "float": "a number",
    "bool": "true or false",
    "null": "null",
}
_EXPECTED: Final = re.compile(r"^Expected `(?P<expected>[^`]+)`, got `(?P<got>[^`]+)`(?: - at `\$(?P<at>[^`]*)`)?$")
_MISSING: Final = re.compile(r"^Object missing required field `(?P<field>[^`]+)`(?: - at `\$(?P<at>[^`]*)`)?$")
_ENUM: Final = re.compile(r"^Invalid enum value (?P<value>.+?)(?: - at `\$(?P<at>[^`]*)`)?$")
_AT: Final = re.compile(r" - at `\$(?P<at>[^`]*)`$")


def dump_analysis(analysis: Analysis) -> str:
    """The analysis as indented JSON text (fields in schema order, ends with a newline)."""
    return msgspec.json.format(msgspec.json.encode(analysis), indent=2).decode() + "\n"


def _version(text: str) -> tuple[str, int | None]:
    major, _, minor = text.partition(".")
    return major, int(minor.split(".")[0]) if minor.split(".")[0].isdigit() else None


def decode_analysis(data: str | bytes, *, source: str) -> Analysis:
    """An analysis from JSON text; anything else is an :class:`InputError` naming ``source`` and the fault."""
    exact = _as_written(data)
    if exact is not None:
        return exact
    raw = _json(data, source=source)
    newer = _check_header(raw, source=source)
    if older_minor(raw["schema_version"], SCHEMA_VERSION):  # an older layout: as this one
        from tracekit.results.upgrade_analysis import older_analysis  # noqa: PLC0415  (older files only)

        raw = {**older_analysis(raw), "schema_version": SCHEMA_VERSION}
    if isinstance(raw.get("capture"), dict):  # a capture summary of an older layout: as this one
        raw["capture"] = capture.upgraded(raw["capture"])
    try:
        analysis = msgspec.convert(raw, type=Analysis, strict=True)
    except msgspec.ValidationError as exc:
        raise InputError(f"damaged tracekit analysis: {_explain(str(exc))}", path=source) from None
    if not newer:
        known = msgspec.to_builtins(analysis)
        extra = None if _all_known(raw, known) else _unknown_field(raw, known, "")
        if extra is not None:
            raise InputError(
                f"damaged tracekit analysis: unknown field `{extra[:120]}` "
                f"(analysis schema {SCHEMA_VERSION} has no such field)",
                path=source,
            )
    return analysis


def _as_written(data: str | bytes) -> Analysis | None:
    """The analysis when ``data`` is byte for byte what this tracekit writes for it
    (:func:`dump_analysis`: ``tracekit analyze --json``), else None. Such a file has this schema
    and version, its capture summary this capture version, and no field the typed model lacks
    (writing the model back would drop it): the checks of :func:`decode_analysis` hold, and
    one typed decode and one encode replace them (a third of the time: a saved analysis of
    8 x 125 MB is read in 8 ms instead of 20). Anything else takes the checked path."""
    text = data.encode() if isinstance(data, str) else data
    try:
        analysis = msgspec.json.decode(text, type=Analysis, strict=True)
    except (msgspec.DecodeError, UnicodeError):
        return None
    summary = analysis.capture
    if (analysis.schema, analysis.schema_version) != (SCHEMA, SCHEMA_VERSION) or (
        summary is not None
        and (summary.schema, summary.schema_version) != (capture.CAPTURE_SCHEMA, capture.CAPTURE_SCHEMA_VERSION)
    ):
        return None
    return analysis if dump_analysis(analysis).encode() == text else None


def _json(data: str | bytes, *, source: str) -> dict[str, Any]:
    """The document as a JSON object, or an error saying why the file is not one."""
    if not data.strip():
        raise InputError("not a tracekit analysis (the file is empty)", path=source)
    try:
        raw = msgspec.json.decode(data)
    except msgspec.DecodeError as exc:
        text = str(exc)
        if "UTF-8" in text and isinstance(data, bytes):  # msgspec >= 0.23 (before: UnicodeDecodeError, below)
            try:
                data.decode("utf-8")
            except UnicodeDecodeError as bad:
                raise _not_utf8(bad, source) from None
        if "truncated" in text:
            reason = "truncated JSON: the file ends before the document does"
        else:
            reason = "not JSON: " + re.sub(
                r" \(byte (\d+)\)$", r" at byte \1", text.removeprefix("JSON is malformed: ")
            )
        raise InputError(f"not a tracekit analysis ({reason})", path=source) from None
    except UnicodeDecodeError as exc:
        raise _not_utf8(exc, source) from None
    if not isinstance(raw, dict):
        kind = _TYPE_WORDS.get(type(raw).__name__.replace("list", "array").replace("NoneType", "null"), "a value")
        raise InputError(f"not a tracekit analysis (the file holds {kind}, not a JSON object)", path=source)
    return raw


def _not_utf8(exc: UnicodeDecodeError, source: str) -> InputError:
    return InputError(f"not a tracekit analysis (not UTF-8 text: byte {exc.start})", path=source)


def _check_header(raw: dict[str, Any], *, source: str) -> bool:
    """Refuse another schema or an unknown major version; whether the file's minor version is newer."""
    schema = raw.get("schema")
    if schema != SCHEMA:
        said = f"its schema is {schema!r}" if isinstance(schema, str) else f'no "schema": "{SCHEMA}"'
        raise InputError(f"not a tracekit analysis ({said})", path=source)
    version = raw.get("schema_version")
    if not isinstance(version, str):
        raise InputError(
            f'damaged tracekit analysis: field `schema_version` should be a string such as "{SCHEMA_VERSION}", '
            f"not {_word_of(version)}",
            path=source,
        )
    major, minor = _version(version)
    ours, our_minor = _version(SCHEMA_VERSION)
    if major != ours:
        raise InputError(
            f"analysis schema version {version} is not readable by this tracekit "
            f"(it reads {ours}.x; re-run tracekit analyze on the traces)",
            path=source,
        )
    return minor is not None and our_minor is not None and minor > our_minor


def _word_of(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true or false"
    name = {int: "int", float: "float", str: "str", list: "array", dict: "object"}.get(type(value), "")
    return _TYPE_WORDS.get(name, "a value")


def _where(at: str | None) -> str:
    """A JSON path as msgspec writes it (``.run.ranks[0]``), as the message names it (``run.ranks[0]``)."""
    return (at or "").lstrip(".")


def type_words(spec: str) -> str:
    """msgspec's type names (``int | null``) in the words of a message (``an integer or null``)."""
    words = [_TYPE_WORDS.get(t.strip(), t.strip()) for t in spec.split("|")]
    return " or ".join(words)


def _what(path: str) -> str:
    """``section `run``` for a top-level object of the analysis, else ``field `run.span_ns```."""
    section = "." not in path and "[" not in path and _is_section(path)
    return f"section `{path}`" if section else f"field `{path}`"


def _is_section(name: str) -> bool:
    info = msgspec.inspect.type_info(Analysis)
    fields = info.fields if isinstance(info, msgspec.inspect.StructType) else ()
    for f in fields:
        if f.encode_name == name:
            kinds = f.type.types if isinstance(f.type, msgspec.inspect.UnionType) else (f.type,)
            return any(isinstance(k, msgspec.inspect.StructType) for k in kinds)
    return False


def _explain(message: str) -> str:
    """msgspec's validation message in the words of the analysis: which section or field, and what is wrong."""
    if m := _EXPECTED.match(message):
        path = _where(m["at"])
        if not path:
            return f"the document should be {type_words(m['expected'])}, not {type_words(m['got'])}"
        got = "null" if m["got"] == "null" else type_words(m["got"])
        return f"{_what(path)} is {got}; it should be {type_words(m['expected'])}"
    if m := _MISSING.match(message):
        at = _where(m["at"])
        field = f"{at}.{m['field']}" if at else m["field"]
        return f"{_what(field)} is missing"
    if m := _ENUM.match(message):
        path = _where(m["at"])
        values = _enum_values(path)
        known = f" (it is one of: {', '.join(values)})" if values else ""
        value = m["value"] if len(m["value"]) <= 80 else m["value"][:79] + "…"
        return f"{_what(path)} has an unknown value {value}{known}"
    if m := _AT.search(message):
        return f"{_what(_where(m['at']))}: {message[: m.start()]}"
    return message


def _enum_values(path: str) -> list[str]:
    """The values of the enum at ``path`` (``verdict.secondary[0].bound``) of the analysis."""
    info: msgspec.inspect.Type = msgspec.inspect.type_info(Analysis)
    for name, index in re.findall(r"([A-Za-z_0-9]+)|\[(\d+)\]", path):
        while isinstance(info, msgspec.inspect.UnionType):  # X | None: the X
            info = next((t for t in info.types if not isinstance(t, msgspec.inspect.NoneType)), info.types[0])
        if index and isinstance(info, msgspec.inspect.ListType):
            info = info.item_type
        elif name and isinstance(info, msgspec.inspect.StructType):
            info = next((f.type for f in info.fields if f.encode_name == name), msgspec.inspect.AnyType())
        else:
            return []
    while isinstance(info, msgspec.inspect.UnionType):
        info = next((t for t in info.types if not isinstance(t, msgspec.inspect.NoneType)), info.types[0])
    return [str(m.value) for m in info.cls] if isinstance(info, msgspec.inspect.EnumType) else []


_NESTED: Final = (dict, list)


def _all_known(raw: Any, known: Any) -> bool:
    """Whether every key in ``raw`` is in the typed document ``known`` (its builtins): the quick
    pass of :func:`_unknown_field`, which names the key (the documents are JSON's: exact types)."""
    if type(raw) is dict:
        if type(known) is not dict:
            return True
        if not raw.keys() <= known.keys():
            return False
        return all(_all_known(v, known[k]) for k, v in raw.items() if type(v) in _NESTED)
    if type(raw) is list and type(known) is list:
        return all(_all_known(a, b) for a, b in zip(raw, known, strict=False) if type(a) in _NESTED)
    return True


def _unknown_field(raw: Any, known: Any, path: str) -> str | None:
    """The first key in ``raw`` that the typed document ``known`` (its builtins) does not have."""
    if isinstance(raw, dict) and isinstance(known, dict):
        for key, value in raw.items():
            if key not in known:
                return f"{path}.{key}" if path else str(key)
            if isinstance(value, (dict, list)):  # only a container can hold a key
                found = _unknown_field(value, known[key], f"{path}.{key}" if path else str(key))
                if found is not None:
                    return found
    elif isinstance(raw, list) and isinstance(known, list):
        for i, (a, b) in enumerate(zip(raw, known, strict=False)):
            if isinstance(a, (dict, list)):
                found = _unknown_field(a, b, f"{path}[{i}]")
                if found is not None:
                    return found
    return None


def load_analysis(path: str | Path) -> Analysis:
    """Read a saved analysis (``tracekit analyze --json``) back into the typed object."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read ({exc.strerror})", path=path) from None
    return decode_analysis(data, source=str(path))
