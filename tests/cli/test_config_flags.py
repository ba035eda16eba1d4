"""The config on the command line: ``--help`` lists every field (from the config's structs), and a
bad ``--field=value`` is named by its flag, with the range or type it must have."""

from __future__ import annotations

import json
import re

import msgspec
import pytest

from tests.cli.process import run_tracekit
from tests.conftest import SAMPLES
from tracekit.capture.config import SECTIONS, CaptureConfig
from tracekit.capture.config_help import field_docs

CONFIG_COMMANDS = ["capture", "sweep", "dataloader", "audit-params", "doctor"]


def fields() -> list[tuple[str, msgspec.structs.FieldInfo, str]]:
    """Every field as a flag names it (``profiler.active``), with its doc comment."""
    out = []
    for field in msgspec.structs.fields(CaptureConfig):
        if field.name in SECTIONS:
            docs = field_docs(SECTIONS[field.name])
            out += [(f"{field.name}.{f.name}", f, docs[f.name]) for f in msgspec.structs.fields(SECTIONS[field.name])]
        else:
            out.append((field.name, field, field_docs(CaptureConfig)[field.name]))  # every field has a doc comment
    return out


def default_of(field: msgspec.structs.FieldInfo) -> object:
    return field.default if field.default is not msgspec.NODEFAULT else field.default_factory()


@pytest.mark.parametrize("command", CONFIG_COMMANDS)
def test_help_lists_every_config_field_with_its_default_and_meaning(command: str) -> None:
    result = run_tracekit(command, "--help")
    assert result.returncode == 0, result.stderr
    section = " ".join(result.stdout.split()).split("Config fields", 1)[1]
    for name, field, doc in fields():
        entry = re.search(rf"--{re.escape(name)}=\S+ (.*?)\[default: ([^\]]*)\]", section)
        assert entry is not None, name
        assert json.loads(entry[2]) == default_of(field), name
        words = doc.replace("``", "").split()[:4]
        assert entry[1].startswith(" ".join(words)), (name, entry[1])
    assert len(re.findall(r" --[\w.]+=\S+ ", " " + section)) == len(fields())  # nothing else listed


def test_a_bad_override_names_its_flag_not_the_config_file() -> None:
    config = SAMPLES / "configs" / "healthy.json"
    result = run_tracekit("capture", "--config_path", config, "--batch_size=abc")
    assert (result.returncode, result.stderr) == (2, "tracekit: error: --batch_size=abc: expected an integer\n")
    result = run_tracekit("capture", "--config_path", config, "--nproc", "0")
    assert (result.returncode, result.stderr) == (2, "tracekit: error: --nproc=0: out of range: must be at least 1\n")
    result = run_tracekit("sweep", "--grid", "batch_size=8,16", "--backend=mpi")
    assert result.returncode == 2
    assert result.stderr == "tracekit: error: --backend=mpi: expected one of auto, nccl, gloo\n"
