"""The packages' lazy exports (one PEP 562 hook, tracekit.lazy, for the four packages that had a
copy each): every exported name resolves, an unknown one is an AttributeError naming the package,
and importing a package imports none of its heavy modules."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

PACKAGES = ("tracekit.analyzers", "tracekit.pipeline", "tracekit.capture", "tracekit.integrations")


@pytest.mark.parametrize("package", PACKAGES)
def test_every_export_resolves_and_an_unknown_name_is_named(package: str) -> None:
    module = importlib.import_module(package)
    exported = [n for n in module.__all__ if n not in ("LightningCallback", "TrainerCallback")]  # optional extras
    for name in exported:
        assert getattr(module, name) is not None, name
    with pytest.raises(AttributeError, match=f"module '{package}' has no attribute 'nope'"):
        _ = module.nope


def test_importing_the_packages_imports_no_polars_or_torch() -> None:
    code = "import sys, " + ", ".join(PACKAGES) + "; print('polars' in sys.modules, 'torch' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["False", "False"]


def test_the_renderers_import_the_analysis_layout_only_for_an_analysis() -> None:
    """``tracekit compare`` draws a comparison: importing the renderers leaves the analysis's
    layout, tables and advice unimported (12 ms of a 0.5 s comparison)."""
    code = (
        "import sys; import tracekit.reports.terminal, tracekit.reports.markdown;"
        "print('tracekit.reports.layout' in sys.modules, 'tracekit.reports.advice' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["False", "False"]
