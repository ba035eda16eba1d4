"""Hostile names in every output format: kernel and annotation names, and trace file names.

Worker 3's top kernel and its DDP forward annotation are renamed to each payload; the
reports must show the payload as text: no terminal escape reaches the terminal, no Markdown
link, image, table break or raw HTML reaches an issue comment, no ``</script>`` or element
reaches the HTML page, the JSON keeps the name exactly, and the Markdown stays under
GitHub's 65,536-character comment limit.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from tests.robustness import builders as b
from tests.robustness.harness import Case, Problems
from tests.robustness.runner import Output

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from tests.robustness.sources import Source

PAYLOADS: dict[str, str] = {
    "ansi-color": "\x1b[31mred\x1b[0m_kernel",
    "ansi-clear-screen": "\x1b[2J\x1b[Hkernel",
    "osc8-hyperlink": "\x1b]8;;http://evil.example/\x1b\\click\x1b]8;;\x1b\\",
    "osc-title-bel": "\x1b]0;pwned\x07kernel",
    "c1-csi": "\x9b31mkernel",
    "carriage-return": "good_kernel\rEVIL",
    "markdown-link": "[x](http://evil.example)",
    "markdown-image": "![](http://evil.example/t.png)",
    "script-close": "</script><script>alert(1)</script>",
    "html-img": "<img src=x onerror=alert(1)>",
    "html-comment": "<!-- open comment",
    "rich-markup": "[bold red]boom[/bold red]",
    "rich-link": "[link=http://evil.example]click[/link]",
    "pipes": "a|b|c",
    "newline": "line1\nline2 | x",
    "backticks-heading": "```\n# heading",
    "bidi-override": "\u202ekernel_evil",
    "very-long": "k" * 100_000,
    "very-long-words": "word " * 20_000,
}
#: HTML that must never reach the HTML page (or the Markdown: GitHub renders some HTML) raw.
_RAW_HTML = ("<img src=x", "<script>alert", "</script><script>", "<!-- open")
#: A Markdown link or image to evil.example, its brackets not escaped.
_MD_LINK = re.compile(r"(?<!\\)\[[^\]\n]*(?<!\\)\]\([^)\n]*evil\.example")
#: Payloads also run mixed among good ranks (the others only alone: mixing adds nothing to a name).
_ALSO_MIXED = ("ansi-color", "markdown-link", "newline", "script-close")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_MD_LIMIT = 65_536
_TOP = "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)"
_ANNOTATION = "DistributedDataParallel.forward"


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def _pipes(line: str) -> int:
    return len(re.findall(r"(?<!\\)\|", line.replace("`|`", "")))


def _table_breaks(md: str) -> list[str]:
    """Rows of a Markdown table whose cell count differs from the header's, or that a name ended early."""
    bad: list[str] = []
    lines = md.splitlines()
    i = 0
    while i < len(lines):
        if lines[i].startswith("|") and i + 1 < len(lines) and re.match(r"^\|[\s:|-]+\|\s*$", lines[i + 1]):
            width = _pipes(lines[i])
            j = i + 2
            while j < len(lines) and lines[j].startswith("|"):
                if _pipes(lines[j]) != width:
                    bad.append(lines[j][:120])
                j += 1
            if j < len(lines) and lines[j].strip() and not lines[j].startswith(("#", ">", "_", "*", "<")):
                bad.append(f"after a table: {lines[j][:120]}")
            i = j
        else:
            i += 1
    return bad


def safe_outputs(payload: str) -> Callable[[Output, Problems], None]:
    """The checks of every output format for a run whose names hold ``payload``."""

    def check(out: Output, problems: Problems) -> None:
        for stream, text in (("terminal output", out.stdout), ("stderr", out.stderr)):
            found = sorted({repr(c) for c in _CONTROL.findall(text)})
            problems.check(not found, f"control characters {', '.join(found)} reach the {stream}")
        long_lines = [ln for ln in out.stdout.splitlines() if len(ln) > 1000]
        problems.check(not long_lines, f"terminal lines of {max(map(len, long_lines), default=0)} characters")
        if out.code != 0:
            return
        if out.doc is not None:
            problems.check(any(payload in s for s in _strings(out.doc)), "the JSON does not keep the name exactly")
        if out.md is not None:
            found = sorted({repr(c) for c in _CONTROL.findall(out.md)})
            problems.check(not found, f"control characters {', '.join(found)} reach the Markdown")
            raw = [m for m in _RAW_HTML if m in out.md and m in payload] + _MD_LINK.findall(out.md)
            problems.check(not raw, f"raw markup in the Markdown: {raw}")
            breaks = _table_breaks(out.md)
            problems.check(not breaks, f"a name breaks a Markdown table: {breaks[:2]}")
            problems.check(
                len(out.md) < _MD_LIMIT, f"the Markdown is {len(out.md)} characters (GitHub's limit: 65,536)"
            )
        if out.html is not None:
            raw = [m for m in _RAW_HTML if m in out.html and m in payload]
            problems.check(not raw, f"raw markup in the HTML: {raw}")

    return check


def _rename(payload: str) -> Callable[[Path, Source], Path]:
    def change(document: Any) -> None:
        b.rename_all(_TOP, payload)(document)
        b.rename_all(_ANNOTATION, payload)(document)

    return b.doc(change)


def _named(name: str, data: bytes | None = None) -> Callable[[Path, Source], Path]:
    def build(folder: Path, src: Source) -> Path:
        path = folder / name
        path.write_bytes(src.raw() if data is None else data)
        return path

    return build


def _file_cases() -> list[Case]:
    truncated = b'{"traceEvents": ['
    return [
        Case(
            "filename-newline-truncated",
            _named("rank3\n.json", truncated),
            ("skipped",),
            marker="rank3",
            check=safe_outputs("rank3\n.json"),
        ),
        Case(
            "filename-ansi-truncated",
            _named("rank3\x1b[31m.json", truncated),
            ("skipped",),
            marker="rank3",
            check=safe_outputs("rank3\x1b[31m.json"),
        ),
        Case(
            "filename-ansi",
            _named("rank3\x1b]0;pwned\x07.json"),
            ("ok",),
            marker="rank3",
            html=True,
            check=safe_outputs("rank3\x1b]0;pwned\x07.json"),
        ),
        Case(
            "filename-markdown",
            _named("rank3 | [x](https:evil.example).json"),
            ("ok",),
            marker="rank3",
            html=True,
            check=safe_outputs("rank3 | [x](https:evil.example).json"),
        ),
        Case(
            "filename-html",
            _named("rank3<img src=x onerror=alert(1)>.json"),
            ("ok",),
            marker="rank3",
            html=True,
            check=safe_outputs("rank3<img src=x onerror=alert(1)>.json"),
        ),
    ]


CASES: list[Case] = [
    *(
        Case(
            f"name-{label}",
            _rename(payload),
            ("ok",),
            html=True,
            check=safe_outputs(payload),
            only=None if label in _ALSO_MIXED else "alone",
        )
        for label, payload in PAYLOADS.items()
    ),
    *_file_cases(),
]

GROUPS: dict[str, list[Case]] = {"Hostile names in the outputs": CASES}
