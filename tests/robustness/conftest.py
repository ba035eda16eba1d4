"""Fixtures of the robustness corpus: clean reports, computed once per session."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from tests.robustness.builders import pristine
from tests.robustness.runner import analyze
from tests.robustness.sources import FAMILIES, SOURCES

if TYPE_CHECKING:
    from pathlib import Path

    from tests.robustness.sources import Family, Source


class Clean:
    """Clean reports (good ranks alone; good ranks with the unmutated source; the source alone), once each."""

    def __init__(self, root: Path) -> None:
        self.root = root
        #: a cache shared by the mixed runs, so that the good ranks are decoded once per session
        self.cache = root / "cache"
        self._reports: dict[str, Any] = {}

    def good_folder(self, family: Family, folder: Path) -> Path:
        """``folder`` holding the family's good ranks (symlinks: one cache entry each for the session)."""
        folder.mkdir(parents=True, exist_ok=True)
        for path in family.good:
            (folder / path.name).symlink_to(path)
        return folder

    def _report(self, key: str, paths: list[Path], *, cache: bool) -> Any:
        if key not in self._reports:
            out = analyze(paths, self.root / key / "out", cache_dir=self.cache if cache else None)
            assert out.code == 0 and out.doc is not None, f"the clean run {key} failed: {out.stderr}"
            self._reports[key] = out.doc
        return self._reports[key]

    def good(self, family: Family) -> Any:
        """The family's good ranks alone."""
        folder = self.root / f"good-{family.key}"
        if not folder.exists():
            self.good_folder(family, folder)
        return self._report(f"good-{family.key}", [folder], cache=True)

    def full(self, family: Family) -> Any:
        """The good ranks and the unmutated source."""
        folder = self.root / f"full-{family.key}"
        if not folder.exists():
            self.good_folder(family, folder)
            pristine(folder, SOURCES[family.source])
        return self._report(f"full-{family.key}", [folder], cache=True)

    def alone(self, source: Source) -> Any:
        """The unmutated source alone."""
        folder = self.root / f"alone-{source.key}"
        if not folder.exists():
            folder.mkdir(parents=True)
            pristine(folder, source)
        return self._report(f"alone-{source.key}", [folder / source.name], cache=False)


@pytest.fixture(scope="session")
def clean(tmp_path_factory: pytest.TempPathFactory) -> Clean:
    return Clean(tmp_path_factory.mktemp("robustness-clean"))


__all__ = ["FAMILIES", "Clean"]
