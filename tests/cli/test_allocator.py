"""The command line sets polars' allocator before polars loads, and leaves a user's setting alone."""

from __future__ import annotations

import os
import subprocess
import sys

from tracekit.cli import ALLOCATOR, ALLOCATOR_VARIABLE, POLARS_DEFAULTS

# the command's entry point is ``tracekit.cli.main``: its package runs before anything it imports
_PROBE = (
    "import os, sys, tracekit.cli.main;"
    "import polars as pl; pl.DataFrame({'a': list(range(1000))}).sum();"
    f"print(os.environ.get({ALLOCATOR_VARIABLE!r}))"
)


def _probe(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", _PROBE], env=env, capture_output=True, text=True, check=True)


def test_the_allocator_is_set_before_polars_loads_and_accepted() -> None:
    env = {k: v for k, v in os.environ.items() if k != ALLOCATOR_VARIABLE}
    done = _probe(env)
    # polars puts its own defaults first (a later option wins in jemalloc), and jemalloc took
    # every option: it prints a complaint on stderr otherwise
    assert done.stdout.strip().endswith("," + ALLOCATOR)
    assert "jemalloc" not in done.stderr


def test_a_setting_of_the_user_wins() -> None:
    env = dict(os.environ) | {ALLOCATOR_VARIABLE: "dirty_decay_ms:5000"}
    value = _probe(env).stdout.strip()
    assert value.endswith(",dirty_decay_ms:5000")
    assert ALLOCATOR not in value


def test_polars_defaults_left_by_a_parent_are_no_setting() -> None:
    # a Python program that imported polars (the benchmarks' harness, a notebook) leaves polars'
    # defaults in the variable, and the tracekit it starts inherits them: its own still apply
    defaults, huge = POLARS_DEFAULTS
    for inherited in (defaults, f"{defaults},{huge}"):
        value = _probe(dict(os.environ) | {ALLOCATOR_VARIABLE: inherited}).stdout.strip()
        assert value.endswith(f"{inherited},{ALLOCATOR}")


def test_polars_writes_the_defaults_the_command_recognises() -> None:
    # what importing polars writes where nothing was set: were it to change with a polars
    # release, a parent's defaults would again pass for a user's setting
    env = {k: v for k, v in os.environ.items() if k not in (ALLOCATOR_VARIABLE, "POLARS_THP")}
    probe = f"import os, polars; print(os.environ[{ALLOCATOR_VARIABLE!r}])"
    done = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True)
    assert done.stdout.strip() == POLARS_DEFAULTS[0]
    done = subprocess.run(
        [sys.executable, "-c", probe], env=env | {"POLARS_THP": "1"}, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == ",".join(POLARS_DEFAULTS)
