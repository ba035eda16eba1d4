"""A workload from where the user stands (issue 46): ``module:fn`` finds a module in the current
folder as ``python -m`` would, without ``PYTHONPATH=.``; ``path/to/file.py:fn`` loads that file.
No torch: the factories here are never called."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from tracekit.capture.config import load_config
from tracekit.capture.launcher import rank_env
from tracekit.capture.workloads import names_file, resolve, workload_folder
from tracekit.errors import InputError

FACTORY = "def make(ctx, **kw):\n    return ('{name}', kw)\n"


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A user's folder with a module in it, as the current folder, and a ``sys.path`` as the
    ``tracekit`` console script has it: neither ``''`` nor the current folder on it."""
    (tmp_path / "tkwl_here.py").write_text(FACTORY.format(name="here"))
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "tkwl_there.py").write_text(FACTORY.format(name="there"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path), ".")])
    for name in ("tkwl_here", "tkwl_there"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    return tmp_path


def test_a_module_in_the_current_folder_imports(folder: Path) -> None:
    assert resolve("tkwl_here:make")(None) == ("here", {})
    assert workload_folder("tkwl_here:make") == str(folder) and not names_file("tkwl_here:make")
    assert sys.path[-1] == str(folder)  # after the installed modules: it shadows none of them


@pytest.mark.parametrize("spec", ["sub/tkwl_there.py:make", "./sub/tkwl_there.py:make"])
def test_a_file_path_loads_that_file(folder: Path, spec: str) -> None:
    assert resolve(spec)(None) == ("there", {})
    assert names_file(spec) and workload_folder(spec) == str(folder / "sub")
    assert sys.path[0] == str(folder / "sub")


def test_an_absolute_file_path_loads_from_anywhere(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir("/")
    assert resolve(f"{folder / 'sub' / 'tkwl_there.py'}:make")(None) == ("there", {})


@pytest.mark.parametrize(
    ("spec", "said"),
    [
        ("sub/nope.py:make", "no such file sub/nope.py"),
        ("sub:make", "sub has no callable make"),  # a folder without .py is a (namespace) package
        ("sub/tkwl_there.py:nofn", "tkwl_there has no callable nofn"),
        ("nomodule_tk_xyz:make", "cannot import nomodule_tk_xyz"),
        ("tkwl_here", "nor 'path/to/file.py:function'"),
    ],
)
def test_what_does_not_import_is_one_line_naming_it(folder: Path, spec: str, said: str) -> None:
    with pytest.raises(InputError) as info:
        resolve(spec)
    assert said in str(info.value) and "\n" not in str(info.value)


def test_a_file_s_folder_reaches_the_ranks(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONPATH", "/elsewhere")
    env = rank_env(load_config(None, {"workload": "sub/tkwl_there.py:make"}), "run1")
    assert env["PYTHONPATH"].split(os.pathsep) == [str(folder / "sub"), "/elsewhere"]
    # a module of the current folder needs nothing: the ranks run `python -m`, which looks there
    assert rank_env(load_config(None, {"workload": "tkwl_here:make"}), "run2")["PYTHONPATH"] == "/elsewhere"
