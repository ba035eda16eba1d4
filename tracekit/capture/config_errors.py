"""Config errors in the user's words: a value given on the command line is named by its flag
(``--batch_size=abc: expected an integer``), one from the config file by the file and the field
(``cfg.json: invalid config: nproc is out of range: must be at least 1, got 0``)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Final

from tracekit.errors import InputError
from tracekit.results.io import type_words

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

__all__ = ["BadField", "blame", "expected", "split_validation"]

_EXPECTED: Final = re.compile(r"Expected `([^`]*)`, got `([^`]*)`")
_AT: Final = re.compile(r" - at `\$\.?([^`]*)`$")


class BadField(Exception):
    """The value of ``field`` (dotted: ``profiler.active``, ``env.NAME``) is refused: ``reason``
    says why in the flag's words, ``file_reason`` in the config file's."""

    def __init__(self, field: str, reason: str, *, file_reason: str) -> None:
        self.field = field
        self.reason = reason
        self.file_reason = file_reason
        super().__init__(file_reason)


def _override_of(field: str, overrides: Mapping[str, str]) -> str | None:
    """The override that set ``field``: itself, a section holding it (``--env={...}``), or a
    key inside it (``--env.A.B=1`` made ``env.A`` an object)."""
    if field in overrides:
        return field
    for key in overrides:
        if field.startswith(f"{key}.") or key.startswith(f"{field}."):
            return key
    return None


def blame(bad: BadField, *, source: str, overrides: Mapping[str, str]) -> InputError:
    """The error of ``bad``: naming its flag when an override set the field, else the config's ``source``."""
    key = _override_of(bad.field, overrides)
    if key is not None:
        return InputError(f"--{key}={overrides[key]}: {bad.reason}")
    return InputError(bad.file_reason, path=source)


def expected(message: str, choices: Sequence[str] = ()) -> str:
    """msgspec's ``Expected `int | null`, got `str``` as ``expected an integer or null``; an
    invalid enum value as the values allowed (``choices``); any other message as it is."""
    found = _EXPECTED.match(message)
    if found:
        return f"expected {type_words(found[1])}"
    if message.startswith("Invalid enum value") and choices:
        return f"expected one of {', '.join(choices)}"
    return message


def split_validation(text: str) -> tuple[str, str]:
    """A msgspec ``ValidationError``'s text as (dotted field, message): ``Expected `int`, got
    `str` - at `$.profiler.wait``` -> (``profiler.wait``, ``Expected `int`, got `str```)."""
    found = _AT.search(text)
    if found is None:
        return "", text
    return re.sub(r"\[.*?\]", "", found[1]), text[: found.start()]
