"""The launch command, --nsys checks and crash reports (no ranks are started here)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from tracekit.capture.config import load_config
from tracekit.capture.launcher import CaptureError, build_command, check_nsys, default_launcher, rank_env
from tracekit.capture.processes import RUN_ENV
from tracekit.capture.ranks import failure, read_states
from tracekit.capture.supervisor import PARENT_ENV
from tracekit.errors import InputError


def test_accelerate_command_generated_and_user_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = load_config(None, {"nproc": "8", "mixed_precision": "bf16"})
    cmd = build_command(config, Path("c.json"), port=1234, launcher="accelerate")
    assert cmd[:3] == [sys.executable, "-m", "accelerate.commands.launch"]
    assert cmd[cmd.index("--num_processes") + 1] == "8" and "--multi_gpu" in cmd
    assert cmd[cmd.index("--mixed_precision") + 1] == "bf16"
    assert cmd[-4:] == ["-m", "tracekit.capture.runner", "c.json", "tracekit-capture"]
    monkeypatch.chdir(tmp_path)
    Path("fsdp.yaml").write_text("distributed_type: FSDP\n")  # the user's own file wins over the shipped one
    user = load_config(None, {"nproc": "4", "accelerate_config": "fsdp.yaml"})
    cmd = build_command(user, Path("c.json"), port=1, launcher="accelerate")
    assert cmd[cmd.index("--config_file") + 1] == "fsdp.yaml" and "--multi_gpu" not in cmd
    shipped = load_config(None, {"nproc": "4", "accelerate_config": "fsdp2"})  # a bare name: the shipped file
    cmd = build_command(shipped, Path("c.json"), port=1, launcher="accelerate")
    config_file = Path(cmd[cmd.index("--config_file") + 1])
    assert config_file.name == "fsdp2.yaml" and config_file.parent.name == "accelerate_configs"


def test_tracekit_launcher_command() -> None:
    config = load_config(None, {"nproc": "2"})
    cmd = build_command(config, Path("c.json"), port=29500, launcher="tracekit")
    launch = [sys.executable, "-m", "tracekit.capture.spawn", "--preload", "torch,accelerate,torch._dynamo"]
    assert cmd == [*launch, "2", "127.0.0.1", "29500", "-m", "tracekit.capture.runner", "c.json", "tracekit-capture"]
    # one rank: nothing to share, so nothing imported before it starts
    one = build_command(load_config(None, {"nproc": "1"}), Path("c.json"), port=1, launcher="tracekit")
    assert one[:4] == [sys.executable, "-m", "tracekit.capture.spawn", "1"]


def test_tracekit_launcher_by_default_accelerate_for_an_accelerate_config() -> None:
    pytest.importorskip("accelerate")
    assert default_launcher(load_config(None, {"nproc": "2"})) == "tracekit"
    assert build_command(load_config(None, {"nproc": "2"}), Path("c.json"), port=1)[1:3] == [
        "-m",
        "tracekit.capture.spawn",
    ]
    assert default_launcher(load_config(None, {"nproc": "1"})) == "tracekit"
    assert default_launcher(load_config(None, {"nproc": "2", "accelerate_config": "fsdp"})) == "accelerate"


def test_nsys_wraps_the_launch_and_needs_nsys_and_a_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    config = load_config(None, {"nproc": "2", "nsys": "true", "out_dir": "out"})
    cmd = build_command(config, Path("c.json"), port=1, out_dir=Path("run"), launcher="accelerate")
    assert cmd[:2] == ["nsys", "profile"]
    assert "cuda,nvtx,osrt" in cmd and "--capture-range=cudaProfilerApi" in cmd
    assert cmd[cmd.index("-o") + 1] == str(Path("run") / "capture") and cmd[-1] == "run"
    assert cmd.index("accelerate.commands.launch") > cmd.index("-o")
    monkeypatch.setattr("shutil.which", lambda name: None)
    with pytest.raises(InputError, match="no `nsys` on PATH"):
        check_nsys(config)
    pytest.importorskip("torch")
    monkeypatch.setattr("shutil.which", lambda name: "/usr/bin/nsys")
    monkeypatch.setattr("torch.cuda.is_available", lambda: False)
    with pytest.raises(InputError, match="needs a CUDA GPU"):
        check_nsys(config)


def test_the_config_env_reaches_every_rank_and_tracekit_keeps_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TK_INHERITED", "parent")
    monkeypatch.setenv("TK_REPLACED", "parent")
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    plain = rank_env(load_config(None), "run1")
    assert plain["TK_INHERITED"] == plain["TK_REPLACED"] == "parent" and plain["OMP_NUM_THREADS"] == "1"
    assert (plain[RUN_ENV], plain[PARENT_ENV], plain["TRACEKIT_CAPTURE"]) == ("run1", str(os.getpid()), "1")
    overrides = {"env.TK_REPLACED": "config", "env.OMP_NUM_THREADS": "2", "env.PYTORCH_CUDA_ALLOC_CONF": "a:b"}
    env = rank_env(load_config(None, overrides), "run2")
    assert (env["TK_INHERITED"], env["TK_REPLACED"], env["OMP_NUM_THREADS"]) == ("parent", "config", "2")
    assert env["PYTORCH_CUDA_ALLOC_CONF"] == "a:b" and env[RUN_ENV] == "run2"
    assert all(isinstance(value, str) for value in env.values())


def test_failure_reports_rank_and_last_lines(tmp_path: Path) -> None:
    (tmp_path / ".rank3.error.txt").write_text(
        "RuntimeError: boom\nTraceback (most recent call last):\n  x\nRuntimeError: boom\n"
    )
    err = failure(read_states(tmp_path, 4), tmp_path, 1)
    assert isinstance(err, CaptureError)
    assert err.message.startswith("rank 3 failed first") and "RuntimeError: boom" in err.message
    assert "\n" not in err.message


def test_failure_blames_the_first_rank_to_fail(tmp_path: Path) -> None:
    import os

    first = tmp_path / ".rank5.error.txt"
    first.write_text("RuntimeError: loss exploded\n")
    later = tmp_path / ".rank0.error.txt"
    later.write_text("RuntimeError: Connection closed by peer\n")
    os.utime(first, ns=(1_000_000_000, 1_000_000_000))
    err = failure(read_states(tmp_path, 8), tmp_path, 1)
    assert err.message.startswith("rank 5 failed first (then rank(s) 0 failed too): RuntimeError: loss exploded")


def test_failure_without_error_files_shows_the_log(tmp_path: Path) -> None:
    (tmp_path / "capture.log").write_text("a\nb\nSegmentation fault\n")
    err = failure(read_states(tmp_path, 2), tmp_path, 139)
    assert "code 139" in err.message and "Segmentation fault" in err.message
