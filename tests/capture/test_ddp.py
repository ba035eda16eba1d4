"""DDP's options from the config: the kwargs handler accelerate gets, what a real DDP (a gloo
group of one, in this process) runs with from it, and the note where DDP did not wrap the model."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from tracekit.capture import ddp
from tracekit.capture.config import load_config
from tracekit.errors import InputError
from tracekit.results.capture import CaptureNote
from tracekit.results.vocab import CaptureNoteKind

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

torch = pytest.importorskip("torch")
pytest.importorskip("accelerate")

KNOBS = {"ddp_bucket_cap_mb": "100", "ddp_gradient_as_bucket_view": "true"}


@pytest.mark.parametrize(
    ("overrides", "kwargs"),
    [
        ({}, {}),  # DDP's defaults: 25 MiB buckets, and its smaller first bucket
        ({"ddp_bucket_cap_mb": "100"}, {"bucket_cap_mb": 100}),
        ({"ddp_bucket_cap_mb": "2.5"}, {"bucket_cap_mb": 2.5}),
        ({"ddp_gradient_as_bucket_view": "true"}, {"gradient_as_bucket_view": True}),
        ({**KNOBS, "find_unused_parameters": "true"}, {"bucket_cap_mb": 100, "gradient_as_bucket_view": True}),
    ],
)
def test_the_kwargs_handler_passes_what_the_config_sets(overrides: dict[str, str], kwargs: dict[str, Any]) -> None:
    handler = ddp.kwargs_handler(load_config(None, overrides))
    expected = {**kwargs, **({"find_unused_parameters": True} if "find_unused_parameters" in overrides else {})}
    assert handler.to_kwargs() == expected  # what accelerate gives DistributedDataParallel


@pytest.fixture
def group_of_one(tmp_path: Path) -> Iterator[None]:
    """A gloo process group of one rank in this process, destroyed after the test."""
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    try:
        yield
    finally:
        dist.destroy_process_group()


@pytest.mark.usefixtures("group_of_one")
@pytest.mark.parametrize(
    ("overrides", "settings"),
    [
        ({}, {"bucket_cap_mb": 25.0, "gradient_as_bucket_view": False, "find_unused_parameters": False}),
        (KNOBS, {"bucket_cap_mb": 100.0, "gradient_as_bucket_view": True, "find_unused_parameters": False}),
        ({"ddp_bucket_cap_mb": "0.5"}, {"bucket_cap_mb": 0.5, "gradient_as_bucket_view": False}),
    ],
)
def test_ddp_runs_with_the_options_and_they_are_read_back(overrides: dict[str, str], settings: dict[str, Any]) -> None:
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Linear(8, 2))
    kwargs = ddp.kwargs_handler(load_config(None, overrides)).to_kwargs()
    wrapped = torch.nn.parallel.DistributedDataParallel(model, **kwargs)  # as accelerate's prepare wraps it
    read = ddp.settings(wrapped)
    assert read is not None and {k: read[k] for k in settings} == settings
    wrapped(torch.randn(4, 8)).sum().backward()  # a step's gradients all-reduce through the buckets
    assert ddp.settings(model) is None  # not wrapped: no DDP settings


@pytest.mark.parametrize(
    ("overrides", "items"),
    [
        ({}, None),
        (KNOBS, ("ddp_bucket_cap_mb", "ddp_gradient_as_bucket_view")),
        (
            {"find_unused_parameters": "true", "ddp_bucket_cap_mb": "50"},
            ("find_unused_parameters", "ddp_bucket_cap_mb"),
        ),
    ],
)
def test_options_set_where_ddp_did_not_wrap_the_model_are_noted(
    overrides: dict[str, str], items: tuple[str, ...] | None
) -> None:
    config = load_config(None, overrides)
    assert ddp.no_effect(config, wrapped=True, distributed="MULTI_GPU") is None
    note = ddp.no_effect(config, wrapped=False, distributed="FSDP")
    if items is None:
        assert note is None
    else:
        assert note == CaptureNote(kind=CaptureNoteKind.DDP_OPTIONS_NO_EFFECT, items=items, value="FSDP")


@pytest.mark.usefixtures("group_of_one")
@pytest.mark.parametrize(("hook", "name"), [("fp16", "fp16_compress_hook"), ("noop", "noop_hook")])
def test_a_comm_hook_is_registered_on_ddp(hook: str, name: str) -> None:
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Linear(8, 2))
    wrapped = torch.nn.parallel.DistributedDataParallel(model)
    assert ddp.register_hook(wrapped, hook) == name
    wrapped(torch.randn(4, 8)).sum().backward()  # the gradients go through the hook
    assert all(p.grad is not None for p in model.parameters())
    assert ddp.register_hook(model, hook) is None  # not wrapped: nothing to hook
    assert ddp.register_hook(wrapped, "default") is None


def test_a_comm_hook_without_ddp_is_noted() -> None:
    note = ddp.no_effect(load_config(None, {"ddp_comm_hook": "noop"}), wrapped=False, distributed="NO")
    assert note is not None and note.items == ("ddp_comm_hook",)


@pytest.mark.usefixtures("group_of_one")
def test_bf16_compression_on_gloo_is_one_line() -> None:
    wrapped = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(8, 2))
    with pytest.raises(InputError, match=r"ddp_comm_hook=bf16 needs NCCL .*not gloo: use fp16"):
        ddp.register_hook(wrapped, "bf16")
