"""The re-timed gains kept between runs: a warm run reads them back, the same analysis."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

import msgspec
import numpy as np
import pytest

from tests.analyzers.test_retime import plan, removal
from tests.conftest import SAMPLES
from tracekit.analyzers import gains
from tracekit.analyzers.gains_memo import decode, encode, plans_digest, scenario_key
from tracekit.analyzers.retime import Scenario
from tracekit.pipeline import AnalyzeOptions, analyze_paths
from tracekit.pipeline import whatif_cache as wc

if TYPE_CHECKING:
    from pathlib import Path

    from tracekit.results.analysis import Analysis


def _analysis(folder: Path, cache: Path | None) -> Analysis:
    options = AnalyzeOptions(cache_dir=str(cache), use_cache=True) if cache else AnalyzeOptions(use_cache=False)
    return msgspec.structs.replace(analyze_paths([folder], options).analysis, analysis_seconds=None)


@pytest.fixture
def re_timed(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many scenarios each re-timing of the analyses re-timed."""
    calls: list[int] = []
    real = gains.simulate_each

    def counted(plans: Any, scenarios: dict[Any, Scenario], **kwargs: Any) -> Any:
        calls.append(len(scenarios))
        return real(plans, scenarios, **kwargs)

    monkeypatch.setattr(gains, "simulate_each", counted)
    return calls


def test_a_warm_run_reads_the_gains_back(tmp_path: Path, re_timed: list[int]) -> None:
    folder = SAMPLES / "captures" / "straggler"
    alone = _analysis(folder, None)
    assert re_timed and sum(re_timed) > 0
    re_timed.clear()
    cold = _analysis(folder, tmp_path / "cache")
    kept = sorted((tmp_path / "cache" / "whatifs").glob("*.msgpack"))
    assert len(kept) == sum(re_timed) > 0  # one entry a scenario
    re_timed.clear()
    warm = _analysis(folder, tmp_path / "cache")
    assert re_timed == []
    assert warm == cold == alone


def test_a_damaged_or_foreign_entry_is_re_timed_and_replaced(tmp_path: Path, re_timed: list[int]) -> None:
    folder = SAMPLES / "captures" / "straggler"
    cold = _analysis(folder, tmp_path / "cache")
    first, *rest = sorted((tmp_path / "cache" / "whatifs").glob("*.msgpack"))
    good = first.read_bytes()
    first.write_bytes(good[:-1] + bytes([good[-1] ^ 1]))  # a bit flipped: the checksum fails
    if rest:
        rest[0].write_bytes(b"not an entry")
    re_timed.clear()
    assert _analysis(folder, tmp_path / "cache") == cold
    assert sum(re_timed) == 1 + bool(rest)
    assert first.read_bytes() == good


def test_other_re_timing_code_keeps_its_own_entries(
    tmp_path: Path, re_timed: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = SAMPLES / "captures" / "straggler"
    cold = _analysis(folder, tmp_path / "cache")
    monkeypatch.setattr(wc, "code_key", lambda: "other code")
    re_timed.clear()
    assert _analysis(folder, tmp_path / "cache") == cold
    assert sum(re_timed) > 0


def test_the_code_key_reads_the_core_in_c_where_it_was_built(monkeypatch: pytest.MonkeyPatch) -> None:
    """A rebuilt core (a fix in ``_retime_core.c``) is other code; without it, the key is the
    Python modules'."""
    import importlib

    from tracekit.analyzers import retime

    assert "tracekit.analyzers._retime_core" in wc.RETIMING
    if retime._core is None:
        pytest.skip("the re-timing in C was not built")
    built = wc.code_key.__wrapped__()
    real = importlib.import_module

    def without_core(name: str) -> object:
        if name == "tracekit.analyzers._retime_core":
            raise ImportError(name)
        return real(name)

    monkeypatch.setattr(importlib, "import_module", without_core)
    assert wc.code_key.__wrapped__() != built


def test_the_key_is_every_value_the_re_timing_reads() -> None:
    one = plan(0, tasks=[(0, 0, 10), (10, 10, 35)], instances=[-1, 0], blocks=[(1, 5)])
    other = plan(1, tasks=[(0, 0, 10), (30, 30, 35)], instances=[-1, 0])
    base = plans_digest([one, other])
    assert plans_digest([other, one]) == base  # in rank order
    assert plans_digest([dataclasses.replace(one, start=one.start.copy()), other]) == base
    changed = [
        dataclasses.replace(one, start=one.start + np.array([0.0, 1e-9])),
        dataclasses.replace(one, device_end=not one.device_end),
        dataclasses.replace(one, window_end=one.window_end + 1),
        dataclasses.replace(one, block_kept=np.array([False])),
        dataclasses.replace(one, instance=np.array([-1, 1])),
        dataclasses.replace(one, rank=2),
    ]
    assert len({plans_digest([c, other]) for c in changed} | {base}) == len(changed) + 1
    scenarios = [
        Scenario(),
        Scenario(no_wait_blocks=True),
        Scenario(hide_collectives=True),
        Scenario(removals={0: removal((1, 2))}),
        Scenario(removals={0: removal((1, 2), rate=0.5)}),
        Scenario(removals={1: removal((1, 2))}),
        Scenario(durations={0: np.array([np.nan, 5.0])}),
        # the same values, cut between the ranks otherwise (each rank's arrays are fed together)
        Scenario(removals={0: removal((1, 2), (3, 4)), 1: removal((5, 6))}),
        Scenario(removals={0: removal((1, 2)), 1: removal((3, 4), (5, 6))}),
    ]
    assert len({scenario_key(base, s) for s in scenarios}) == len(scenarios)
    assert scenario_key(base, Scenario()) != scenario_key(plans_digest([one]), Scenario())


def test_gains_kept_to_the_bit() -> None:
    gained = {0: 0.1 + 0.2, 7: -0.0, 3: 1e300}
    assert decode(encode(gained)) == gained
    assert decode(b"\x00garbage") is None


def test_a_key_is_never_a_path(tmp_path: Path) -> None:
    cache = wc.WhatIfCache(tmp_path)
    cache.put("../../escape", b"x")
    assert cache.get("../../escape") is None
    assert not list(tmp_path.rglob("*escape*"))
    cache.put("ab12", b"kept")
    assert cache.get("ab12") == b"kept"


def test_a_warm_run_merges_no_set_of_wastes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The explanations' pairs of wastes, and compute's every other waste at once, are kept
    under their wastes' keys: a warm run reads them back without merging their scenarios (a
    thousand ranks' merges took seconds)."""
    folder = SAMPLES / "captures" / "cuda-h200-small"  # three pairs explained
    cold = _analysis(folder, tmp_path / "cache")
    merged: list[str] = []
    for name in ("scenario_of", "everything", "computed"):
        real = getattr(gains, name)

        def counted(*args: Any, _real: Any = real, _name: str = name) -> Any:
            merged.append(_name)
            return _real(*args)

        monkeypatch.setattr(gains, name, counted)
    warm = _analysis(folder, tmp_path / "cache")
    assert merged == []
    assert warm == cold
    alone = _analysis(folder, None)  # without the cache, they are merged to be re-timed
    assert "computed" in merged and "everything" in merged and alone == cold
