"""How a rank picks its GPU, its backend and its memory cap (``runner.make_accelerator``).

CUDA is stood in for (``torch.cuda`` patched): these are the decisions taken before any
device work, which the GPU check (``benchmarks/gpu_check.sh``) then runs for real.
"""

from __future__ import annotations

import os

import pytest

from tracekit.capture import runner
from tracekit.capture.config import build_config
from tracekit.errors import InputError
from tracekit.results.capture import ALLOC_CONF_VARS

torch = pytest.importorskip("torch")
pytest.importorskip("accelerate")


class Stop(Exception):
    """Raised where the process group would be joined: what came before is what is checked."""


@pytest.fixture
def one_gpu(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, object]]:
    """A node with one GPU; records set_device and the memory fraction, stops at the group."""
    calls: list[tuple[str, object]] = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "set_device", lambda d: calls.append(("set_device", d)))
    monkeypatch.setattr(
        torch.cuda, "set_per_process_memory_fraction", lambda f, device=None: calls.append(("fraction", f))
    )

    def init_process_group(backend: str, **_: object) -> None:
        calls.append(("init", backend))
        raise Stop

    monkeypatch.setattr(torch.distributed, "init_process_group", init_process_group)
    monkeypatch.setattr(torch.distributed, "is_initialized", lambda: False)
    # set, then deleted: monkeypatch records a variable only when it is there, and what the runner
    # sets in os.environ must be gone after the test (tests/conftest.py checks it)
    for key in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.setenv(key, "")
        monkeypatch.delenv(key)
    monkeypatch.setenv("ACCELERATE_BYPASS_DEVICE_MAP", "")
    monkeypatch.delenv("ACCELERATE_BYPASS_DEVICE_MAP")
    return calls


def ranks(monkeypatch: pytest.MonkeyPatch, *, rank: int, world: int) -> None:
    for key, value in (("RANK", rank), ("LOCAL_RANK", rank), ("WORLD_SIZE", world), ("LOCAL_WORLD_SIZE", world)):
        monkeypatch.setenv(key, str(value))


def test_two_ranks_share_one_gpu_through_gloo(monkeypatch: pytest.MonkeyPatch, one_gpu: list) -> None:
    ranks(monkeypatch, rank=1, world=2)
    with pytest.raises(Stop):
        runner.make_accelerator(build_config({"nproc": 2, "backend": "gloo", "cuda_memory_fraction": 0.25}))
    assert one_gpu == [("set_device", 0), ("fraction", 0.25), ("init", "gloo")]  # GPU 1 % 1, capped
    # accelerate would wrap DDP with device_ids=[1]: a GPU this node does not have
    assert os.environ["ACCELERATE_BYPASS_DEVICE_MAP"] == "true"


def test_nccl_on_ranks_sharing_a_gpu_is_one_line_before_any_device_work(
    monkeypatch: pytest.MonkeyPatch, one_gpu: list
) -> None:
    ranks(monkeypatch, rank=0, world=2)
    with pytest.raises(InputError) as info:
        runner.make_accelerator(build_config({"nproc": 2}))  # auto: nccl on GPU
    assert info.value.message == (
        "nccl needs a GPU per rank: 2 ranks on 1 GPU(s) on this node; --backend gloo lets ranks share a GPU"
    )
    assert one_gpu == []


def test_one_rank_with_a_named_backend_joins_a_group_of_one(monkeypatch: pytest.MonkeyPatch, one_gpu: list) -> None:
    with pytest.raises(Stop):
        runner.make_accelerator(build_config({"backend": "nccl"}))
    assert one_gpu == [("set_device", 0), ("init", "nccl")]
    assert (os.environ["RANK"], os.environ["LOCAL_RANK"], os.environ["WORLD_SIZE"]) == ("0", "0", "1")
    assert os.environ["MASTER_ADDR"] == "127.0.0.1" and int(os.environ["MASTER_PORT"]) > 0
    assert "ACCELERATE_BYPASS_DEVICE_MAP" not in os.environ


def test_one_rank_on_auto_joins_no_group(monkeypatch: pytest.MonkeyPatch, one_gpu: list) -> None:
    import accelerate

    def accelerator(**_: object) -> None:
        one_gpu.append(("accelerator", None))
        raise Stop

    monkeypatch.setattr(runner, "_one_rank_group", lambda port: pytest.fail("no group for backend auto"))
    monkeypatch.setattr(accelerate, "Accelerator", accelerator)
    with pytest.raises(Stop):
        runner.make_accelerator(build_config({}))
    assert one_gpu == [("set_device", 0), ("accelerator", None)]


@pytest.mark.parametrize("fraction", [0, -0.5, 1.5])
def test_a_memory_fraction_outside_0_1_is_refused(fraction: float) -> None:
    with pytest.raises(InputError, match="cuda_memory_fraction is out of range"):
        build_config({"cuda_memory_fraction": fraction})


def test_the_cores_a_capture_ran_on(monkeypatch: pytest.MonkeyPatch) -> None:
    # the process's affinity where the OS has one (a container or taskset may give fewer than the machine's)
    assert 1 <= (runner.cpu_count() or 0) <= (os.cpu_count() or 1)
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: {0, 3}, raising=False)
    assert runner.cpu_count() == 2
    monkeypatch.delattr(os, "sched_getaffinity", raising=False)
    assert runner.cpu_count() == os.cpu_count()


def test_the_allocator_settings_a_rank_runs_with(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ALLOC_CONF_VARS:
        monkeypatch.delenv(name, raising=False)
    assert runner.alloc_conf() == {}
    monkeypatch.setenv("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True")
    monkeypatch.setenv("PYTORCH_ALLOC_CONF", "")  # set empty: as unset
    assert runner.alloc_conf() == {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}
