"""A saved analysis that is damaged, of another kind or of another version: one line naming the file and the fault."""

from __future__ import annotations

import copy
import json
from functools import cache
from typing import TYPE_CHECKING, Any

import msgspec
import pytest

from tests.factories import ev, make_run
from tracekit.analyzers import analyze
from tracekit.cli.main import main
from tracekit.errors import InputError
from tracekit.results.analysis import SCHEMA_VERSION, Analysis
from tracekit.results.io import decode_analysis, dump_analysis, load_analysis

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

Doc = dict[str, Any]


@cache
def saved() -> str:
    rows = [
        ev("step", "ProfilerStep#1", 0, 100_000),
        ev("annotation", "forward", 1, 50_000),
        ev("runtime", "cudaLaunchKernel", 2, 3, correlation=1),
        ev("kernel", "gemm", 10, 60_000, correlation=1),
    ]
    return dump_analysis(analyze(make_run(rows)))


def edited(change: Callable[[Doc], object]) -> bytes:
    doc = copy.deepcopy(json.loads(saved()))
    change(doc)
    return json.dumps(doc).encode()


def _set(path: str, value: object) -> Callable[[Doc], None]:
    def change(doc: Doc) -> None:
        *parents, last = path.split(".")
        for key in parents:
            doc = doc[key] if not key.isdigit() else doc[int(key)]  # type: ignore[index]
        doc[last] = value

    return change


#: (file content, what the one-line error must say)
DAMAGED: dict[str, tuple[bytes, str]] = {
    "verdict missing": (edited(lambda d: d.pop("verdict")), "section `verdict` is missing"),
    "run as a list": (edited(_set("run", [])), "section `run` is a list; it should be an object"),
    "steps as a string": (edited(_set("steps", "3")), "section `steps` is a string; it should be an object"),
    "null section": (edited(_set("kernels", None)), "section `kernels` is null; it should be an object"),
    "number for a string": (edited(_set("tracekit_version", 1)), "field `tracekit_version` is an integer"),
    "string for a number": (edited(_set("run.span_ns", "12")), "field `run.span_ns` is a string; it should be an int"),
    "nested field missing": (edited(lambda d: d["run"]["ranks"][0].pop("source")), "`run.ranks[0].source` is missing"),
    "list for a list item": (edited(_set("run.ranks", [[]])), "field `run.ranks[0]` is a list; it should be an object"),
    "unknown enum value": (edited(_set("verdict.measured_on", "moon")), "'moon' (it is one of: gpu, host)"),
    "bool for a number": (edited(_set("run.world_size", True)), "field `run.world_size` is true or false"),
    # a schema tracekit does not write (tracekit report draws the records it does: tests/cli/test_report_any.py)
    "wrong schema name": (edited(_set("schema", "tracekit.flamegraph")), "tracekit.flamegraph"),
    "no schema": (edited(lambda d: d.pop("schema")), 'no "schema": "tracekit.analysis"'),
    "version as a number": (edited(_set("schema_version", 2.0)), "`schema_version` should be a string"),
    "newer major version": (edited(_set("schema_version", "99.0")), "schema version 99.0 is not readable"),
    "unknown field": (edited(_set("run.colour", "red")), "unknown field `run.colour`"),
    "unknown section": (edited(_set("extra", {})), "unknown field `extra`"),
    "unknown field in a row": (edited(_set("run.ranks.0.colour", "red")), "unknown field `run.ranks[0].colour`"),
    "unknown field in a nested row": (
        edited(lambda d: d["steps"]["per_step"][-1].update(colour="red")),
        f"unknown field `steps.per_step[{len(json.loads(saved())['steps']['per_step']) - 1}].colour`",
    ),
    "not JSON": (b"<html>not json</html>", "not JSON: invalid character at byte 0"),
    "empty": (b"", "the file is empty"),
    "blank": (b" \n\t\n", "the file is empty"),
    "truncated": (saved().encode()[:777], "truncated JSON"),
    "top-level list": (b"[1, 2, 3]", "the file holds a list, not a JSON object"),
    "top-level string": (b'"tracekit"', "the file holds a string, not a JSON object"),
    "not UTF-8": (b'{"schema": "\xff"}', "not UTF-8 text"),
    "binary": (b"\x1f\x8b\x08\x00gzip", "not JSON"),
}


@pytest.mark.parametrize("name", sorted(DAMAGED))
def test_a_damaged_analysis_is_one_line_naming_the_file_and_fault(name: str) -> None:
    data, reason = DAMAGED[name]
    with pytest.raises(InputError) as error:
        decode_analysis(data, source="saved.json")
    message = error.value.message
    assert message.startswith("saved.json: ") and reason in message, message
    assert "\n" not in message
    for internal in ("msgspec", "$.", "Expected `", "Traceback", "KeyError", "TypeError"):
        assert internal not in message


@pytest.mark.parametrize("name", sorted(DAMAGED))
def test_report_on_a_damaged_analysis_exits_2_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    data, reason = DAMAGED[name]
    path = tmp_path / "saved.json"
    path.write_bytes(data)
    monkeypatch.setattr("sys.argv", ["tracekit", "report", str(path), "--md", str(tmp_path / "out.md")])
    with pytest.raises(SystemExit) as exit_:
        main()
    err = capsys.readouterr().err
    assert exit_.value.code == 2
    assert err.count("\n") == 1 and str(path) in err and reason in err, err
    assert not (tmp_path / "out.md").exists()


def test_a_newer_minor_version_loads_and_ignores_what_it_adds() -> None:
    major = SCHEMA_VERSION.split(".")[0]
    data = edited(lambda d: (d.update(schema_version=f"{major}.99"), d["run"].update(colour="red")))
    analysis = decode_analysis(data, source="new.json")
    assert isinstance(analysis, Analysis)
    assert analysis.run == decode_analysis(saved(), source="x").run


def test_a_file_that_cannot_be_read_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"missing\.json: cannot read \(No such file or directory\)"):
        load_analysis(tmp_path / "missing.json")
    with pytest.raises(InputError, match="cannot read"):
        load_analysis(tmp_path)


def test_the_saved_analysis_still_round_trips() -> None:
    analysis = decode_analysis(saved(), source="x")
    assert dump_analysis(analysis) == saved()
    assert msgspec.json.decode(saved())["schema_version"] == SCHEMA_VERSION


def test_a_file_as_written_is_read_by_one_typed_decode() -> None:
    from tracekit.results.io import _as_written

    text = saved()
    checked = decode_analysis(json.dumps(json.loads(text)), source="x.json")  # laid out otherwise: checked
    assert _as_written(text) == _as_written(text.encode()) == checked
    assert _as_written(text.replace("\n", "\r\n")) is None


@pytest.mark.parametrize(
    ("change", "fault"),
    [
        (lambda d: d.update(extra=1), "unknown field `extra`"),
        (lambda d: d["run"].update(ranks_seen=[0]), "unknown field `run.ranks_seen`"),
    ],
)
def test_an_unknown_field_in_a_file_written_as_tracekit_writes_is_refused(
    change: Callable[[Doc], object], fault: str
) -> None:
    # laid out exactly as dump_analysis lays a file out, so only the field tells it apart:
    # the typed decode drops it, the document written back differs, the checked path refuses it
    from tracekit.results.io import _as_written

    doc = json.loads(saved())
    change(doc)
    text = msgspec.json.format(msgspec.json.encode(doc), indent=2).decode() + "\n"
    assert _as_written(text) is None
    with pytest.raises(InputError, match=fault):
        decode_analysis(text, source="x.json")


def test_a_newer_minor_version_written_as_tracekit_writes_keeps_its_fields_ignored() -> None:
    from tracekit.results.io import _as_written

    major, minor = SCHEMA_VERSION.split(".")
    doc = json.loads(saved()) | {"schema_version": f"{major}.{int(minor) + 1}", "added_later": {"x": 1}}
    text = msgspec.json.format(msgspec.json.encode(doc), indent=2).decode() + "\n"
    assert _as_written(text) is None
    assert decode_analysis(text, source="x.json").schema_version == f"{major}.{int(minor) + 1}"
