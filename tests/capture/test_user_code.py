"""A failure in the user's code (dataset, model, loss) is bad input: one line naming their file and line, exit 2."""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING

import pytest

from tests.capture import audit_workloads
from tests.capture.test_capture_e2e import tracekit
from tests.cli.test_errors import run_main
from tracekit.capture.user_code import defined_at, user_code, user_frame
from tracekit.errors import InputError

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

pytest.importorskip("torch")

HERE = audit_workloads.__file__


def _line(function: Callable[..., object], text: str) -> int:
    lines, first = inspect.getsourcelines(function)
    return first + next(i for i, line in enumerate(lines) if text in line)


def _raise_here() -> None:
    raise KeyError("x")


def test_the_innermost_frame_of_the_users_code_is_named() -> None:
    with pytest.raises(InputError) as raised, user_code("its thing"):
        _raise_here()
    assert raised.value.path == f"{__file__}:{_line(_raise_here, 'raise KeyError')}"
    assert raised.value.reason == "its thing raised KeyError: 'x'"


def test_without_a_user_frame_the_blamed_object_is_named() -> None:
    def library_only() -> None:
        len(42)  # type: ignore[arg-type]  # the error is raised in builtins: no frame of the user's

    with pytest.raises(TypeError) as raised_here:
        library_only()
    assert user_frame(raised_here.value) == f"{__file__}:{_line(library_only, 'len(42)')}"
    assert defined_at(42) is None  # int is not the user's
    assert defined_at(audit_workloads.not_a_dataset) == f"{HERE}:{_line(audit_workloads.not_a_dataset, 'def ')}"
    with pytest.raises(InputError) as raised, user_code("x", blame=(42, audit_workloads.not_a_dataset)):
        raise RuntimeError("from C")
    # the frame of this test is the user's: the blame is the fallback only
    assert raised.value.path is not None and raised.value.path.startswith(__file__)


def test_tracekits_own_errors_pass_through() -> None:
    with pytest.raises(InputError, match=r"^mine$"), user_code("x"):
        raise InputError("mine")


WORKLOADS = {
    "corrupt_dataset": (
        _line(audit_workloads._CorruptSample.__getitem__, "raise ValueError"),
        "its data (the first batch) raised ValueError: corrupt sample 0",
    ),
    "not_a_dataset": (
        _line(audit_workloads.not_a_dataset, "def "),
        "its data (the first batch) raised TypeError: object of type 'int' has no len()",
    ),
    "loss_without_gradients": (
        _line(audit_workloads._constant_loss, "def "),
        "its loss_fn (the loss, then backward) raised RuntimeError: element 0 of tensors does not require grad",
    ),
}


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_audit_params_names_the_users_file_and_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    line, says = WORKLOADS[name]
    workload = f"tests.capture.audit_workloads:{name}"
    code, err = run_main(monkeypatch, capsys, "audit-params", f"--workload={workload}", "--batch_size=4")
    assert code == 2, err
    assert err.startswith(f"tracekit: error: {HERE}:{line}: workload {workload!r}: {says}"), err
    assert len(err.splitlines()) == 1


@pytest.mark.e2e
@pytest.mark.concurrent  # its outcome does not depend on timing (tests/conftest.py)
def test_dataloader_names_the_users_file_and_line(tmp_path: Path) -> None:
    pytest.importorskip("accelerate")
    workload = "tests.capture.audit_workloads:corrupt_dataset"
    out = tracekit("dataloader", f"--workload={workload}", "--nproc=2", "--batches=2", "--out_dir", tmp_path / "x")
    assert out.returncode == 2, out.stderr
    line = _line(audit_workloads._CorruptSample.__getitem__, "raise ValueError")
    assert f": {HERE}:{line}: workload {workload!r}: its data (batch 0) raised ValueError: corrupt sample" in out.stderr
    assert len([ln for ln in out.stderr.splitlines() if ln.startswith("tracekit: ")]) == 1, out.stderr
