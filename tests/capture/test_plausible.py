"""Configs that cannot be what the user meant: one warning line each, the capture going on."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from tracekit.capture import launcher
from tracekit.capture.config import load_config
from tracekit.capture.plausible import ConfigWarning, implausible


def test_a_sensible_config_says_nothing() -> None:
    config = load_config(None, {"nproc": "4", "num_workers": "1", "workload_args.straggler_rank": "3"})
    assert implausible(config, cores=4) == []


def test_a_straggler_outside_the_world() -> None:
    # the case: samples/configs/straggler.json (rank 5) run with --nproc 4
    (said,) = implausible(load_config(None, {"nproc": "4", "workload_args.straggler_rank": "5"}), cores=64)
    assert said == "workload_args.straggler_rank 5 is outside the 4 rank(s) (0-3): no rank is made late"
    assert implausible(load_config(None, {"nproc": "2", "workload_args.straggler_rank": "-1"}), cores=64)


def test_a_batch_over_each_rank_s_share_of_the_dataset() -> None:
    # the mlp's 4096 samples over 8 ranks: 512 each
    (said,) = implausible(load_config(None, {"nproc": "8", "batch_size": "1024"}), cores=64)
    assert "batch_size 1024 is more than each rank's share of the dataset (4096 samples / 8 rank(s) = 512)" in said
    assert implausible(load_config(None, {"nproc": "8", "batch_size": "512"}), cores=64) == []
    small = {"nproc": "1", "batch_size": "64", "workload_args.samples": "10"}
    assert "(10 samples / 1 rank(s) = 10)" in implausible(load_config(None, small), cores=64)[0]
    # a workload of the user's own: its dataset is not known before it is built
    assert implausible(load_config(None, {"workload": "mod:fn", "batch_size": "100000"}), cores=64) == []


def test_more_dataloader_workers_than_cores() -> None:
    (said,) = implausible(load_config(None, {"nproc": "8", "num_workers": "4"}), cores=2)
    assert said.startswith("num_workers 4 x 8 rank(s) = 32 DataLoader worker processes on 2 CPU core(s)")
    assert implausible(load_config(None, {"nproc": "2", "num_workers": "1"}), cores=2) == []


def test_capture_warns_before_the_ranks_start(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(launcher, "require_capture", lambda _: None)
    monkeypatch.setattr(launcher, "_capture_into", lambda config, target, progress=None: "captured")
    config = load_config(None, {"nproc": "4", "workload_args.straggler_rank": "5", "out_dir": str(tmp_path / "o")})
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        assert launcher.capture(config) == "captured"  # type: ignore[comparison-overlap]
    assert [str(w.message) for w in seen if w.category is ConfigWarning] == implausible(config)
