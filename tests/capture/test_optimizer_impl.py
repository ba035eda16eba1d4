"""``optimizer_impl``: the workload's optimizer rebuilt with ``foreach`` or ``fused`` on a real
torch model (CPU), its param groups and hyper-parameters kept; what cannot be rebuilt is one line."""

from __future__ import annotations

import warnings
from typing import Any

import pytest

from tracekit.capture.optimizer_impl import implementation, rebuild
from tracekit.errors import InputError

torch = pytest.importorskip("torch")


def model() -> Any:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))


def two_groups(net: Any) -> list[dict[str, Any]]:
    """The first layer at its own lr and weight decay, the rest at the optimizer's defaults."""
    return [
        {"params": list(net[0].parameters()), "lr": 0.1, "weight_decay": 0.5},
        {"params": list(net[2].parameters())},
    ]


def train_step(net: Any, optimizer: Any) -> None:
    optimizer.zero_grad(set_to_none=True)
    net(torch.randn(4, 8)).sum().backward()
    optimizer.step()


def hyper(group: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in group.items() if k not in ("params", "foreach", "fused")}


@pytest.mark.parametrize("impl", ["foreach", "fused"])
@pytest.mark.parametrize("cls_name", ["Adam", "AdamW", "SGD", "Adagrad"])
def test_rebuilt_with_the_flag_keeps_class_groups_and_hyper_parameters(cls_name: str, impl: str) -> None:
    cls = getattr(torch.optim, cls_name)
    net = model()
    original = cls(two_groups(net), lr=0.01, weight_decay=0.01)
    before = [(hyper(g), [id(p) for p in g["params"]]) for g in original.param_groups]
    defaults = dict(original.defaults)
    rebuilt = rebuild(original, impl)
    other = "fused" if impl == "foreach" else "foreach"
    assert type(rebuilt) is cls and rebuilt is not original
    assert [(hyper(g), [id(p) for p in g["params"]]) for g in rebuilt.param_groups] == before
    assert rebuilt.param_groups[0]["lr"] == 0.1 and rebuilt.param_groups[1]["lr"] == 0.01  # each group's own
    assert rebuilt.param_groups[0]["weight_decay"] == 0.5 and rebuilt.param_groups[1]["weight_decay"] == 0.01
    assert all(g[impl] is True and g[other] is None for g in rebuilt.param_groups)
    assert rebuilt.defaults == {**defaults, impl: True, other: None}
    assert implementation(rebuilt) == {"class": cls_name, impl: True, other: None}
    weights = [p.detach().clone() for p in net.parameters()]
    train_step(net, rebuilt)  # the implementation runs on CPU
    assert all(not torch.equal(w, p) for w, p in zip(weights, net.parameters(), strict=True))


def test_default_leaves_the_optimizer_as_built() -> None:
    original = torch.optim.AdamW(model().parameters(), foreach=False)
    assert rebuild(original, "default") is original
    assert implementation(original) == {"class": "AdamW", "foreach": False, "fused": None}


def test_fused_unsets_a_foreach_the_workload_asked_for() -> None:
    rebuilt = rebuild(torch.optim.Adam(model().parameters(), foreach=True), "fused")  # both True: torch refuses
    assert (rebuilt.defaults["fused"], rebuilt.defaults["foreach"]) == (True, None)


def test_the_workloads_scheduler_drives_the_rebuilt_optimizer() -> None:
    net = model()
    original = torch.optim.SGD(two_groups(net), lr=0.01)
    scheduler = torch.optim.lr_scheduler.StepLR(original, step_size=1, gamma=0.5)
    rebuilt = rebuild(original, "fused")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "lr_scheduler.step() before optimizer.step()"
        for _ in range(2):
            train_step(net, rebuilt)
            scheduler.step()
    assert [g["lr"] for g in rebuilt.param_groups] == [0.025, 0.0025]


class Swallows(torch.optim.SGD):  # type: ignore[misc]
    """Takes any keyword and drops those SGD does not know."""

    def __init__(self, params: Any, lr: float = 0.01, **_ignored: Any) -> None:
        super().__init__(params, lr=lr)


class Forwards(torch.optim.Adam):  # type: ignore[misc]
    """A user's Adam that passes its keywords on."""

    def __init__(self, params: Any, **kwargs: Any) -> None:
        super().__init__(params, **kwargs)


class NotTorch:
    """An optimizer that is not a torch.optim.Optimizer."""

    def step(self) -> None:
        pass


def test_a_subclass_passing_keywords_on_is_rebuilt() -> None:
    rebuilt = rebuild(Forwards(two_groups(model()), lr=0.01), "fused")
    assert type(rebuilt) is Forwards and rebuilt.defaults["fused"] is True
    assert [g["lr"] for g in rebuilt.param_groups] == [0.1, 0.01]


@pytest.mark.parametrize(
    ("make", "impl", "message"),
    [
        (torch.optim.LBFGS, "fused", "optimizer_impl=fused: LBFGS has no fused implementation"),
        (torch.optim.LBFGS, "foreach", "optimizer_impl=foreach: LBFGS has no foreach implementation"),
        (torch.optim.Adamax, "fused", "optimizer_impl=fused: Adamax has no fused implementation"),
        (
            Swallows,
            "foreach",
            f"optimizer_impl=foreach: {__name__}.Swallows takes foreach but does not record it",
        ),
        (
            lambda p: NotTorch(),
            "fused",
            f"optimizer_impl=fused: the workload's optimizer {__name__}.NotTorch is not a torch.optim.Optimizer",
        ),
        (
            lambda p: torch.optim.SGD(p, lr=0.1, differentiable=True),
            "fused",
            "optimizer_impl=fused: SGD cannot be rebuilt with fused=True (RuntimeError: `fused` does not support",
        ),
    ],
)
def test_what_cannot_be_rebuilt_is_one_line_naming_class_and_option(make: Any, impl: str, message: str) -> None:
    with pytest.raises(InputError) as info:
        rebuild(make(model().parameters()), impl)
    assert info.value.message.startswith(message) and "\n" not in info.value.message
