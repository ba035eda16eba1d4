# ruff: noqa: E501, RUF100
"""The runs that the current code fails: test id -> what goes wrong (see FAILURES.md).

Each is a strict expected failure: once a fix makes one pass, pytest reports XPASS as a
failure and its line must go. ``CORPUS`` is written by ``python -m tests.robustness.report``;
``FUZZ`` (the property tests of test_fuzz_readers.py) by hand.
"""

from __future__ import annotations

CORPUS: dict[str, str] = {}
FUZZ: dict[str, str] = {}
KNOWN: dict[str, str] = {**CORPUS, **FUZZ}
