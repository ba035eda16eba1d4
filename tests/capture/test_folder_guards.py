"""Locks of output folders, sweep cell folders that would collide, resume under another spelling,
and the Profiler's refusal of an out_dir holding files that are not a tracekit capture's."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tracekit.capture.sweep import _same_file, _spelled
from tracekit.capture.sweep_plan import grid_cells, parse_grid
from tracekit.errors import InputError
from tracekit.locks import folder_lock, lock_path

REPO = Path(__file__).resolve().parents[2]
_HOLD = (
    "import sys, time\nfrom tracekit.locks import folder_lock\n"
    "with folder_lock(sys.argv[1]):\n    print('held', flush=True)\n    sys.stdin.read()\n"
)


def test_a_second_writer_is_refused_at_once_naming_the_holder(tmp_path: Path) -> None:
    folder = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLD, str(folder)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        (tmp_path / "link").symlink_to(folder, target_is_directory=True)
        for spelling in (folder, tmp_path / "link", tmp_path / "out" / ".." / "out"):
            refused = pytest.raises(InputError, match=rf"in use by another tracekit run, pid {holder.pid} on ")
            with refused as err, folder_lock(spelling):
                pass
            assert "\n" not in err.value.message
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=60)
    sidecar = lock_path(folder).with_name(lock_path(folder).name + ".holder")
    with folder_lock(folder):  # released when the holder ended
        assert str(os.getpid()) in sidecar.read_text()
    assert not sidecar.exists()


def test_a_folder_where_the_lock_goes_is_named_not_out_dir(tmp_path: Path) -> None:
    out = tmp_path / "out"
    lock_path(out).mkdir(parents=True)
    with pytest.raises(InputError) as caught, folder_lock(out):
        pass
    assert caught.value.path == str(lock_path(out))
    said = f"{lock_path(out)}: cannot take the lock of out_dir {out} (a folder is where it goes)"
    assert caught.value.message == said


def test_grid_values_sharing_a_cell_folder_are_refused() -> None:
    with pytest.raises(InputError, match=r"'a/b' and 'a_b' would share the cell folder 'cells/x=a_b'"):
        grid_cells(parse_grid(["x=a/b,a_b"]))
    with pytest.raises(InputError, match="'Fast' and 'fast'"):
        grid_cells(parse_grid(["batch_size=8", "mode=Fast,fast"]))
    assert len(grid_cells(parse_grid(["x=a,b", "y=1,2"]))) == 4


def test_resume_sees_one_folder_and_one_config_under_any_spelling(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    config = tmp_path / "c.json"
    config.write_text("{}")
    (tmp_path / "alias.json").symlink_to(config)
    for other in ("./c.json", str(config), "alias.json"):
        assert _same_file("c.json", other)
    assert not _same_file("c.json", "d.json")
    spellings = [{"out_dir": s, "batch_size": "8"} for s in ("x", "./x", "x/", str(tmp_path / "x"))]
    assert len({str(_spelled(s, "overrides")) for s in spellings}) == 1


def test_the_profiler_refuses_an_out_dir_holding_the_users_files(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    from tracekit.capture import Profiler

    (tmp_path / "summary.json").write_text('{"mine": true}')
    profiler = Profiler(out_dir=tmp_path, warmup_steps=0, measured_steps=1, wait=0, warmup=0, active=1, nvtx=False)
    with pytest.raises(InputError, match=r"out_dir holds summary.json, not from a tracekit capture"), profiler:
        pass
    assert (tmp_path / "summary.json").read_text() == '{"mine": true}'
