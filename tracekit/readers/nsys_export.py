"""``.nsys-rep`` reports -> SQLite exports in tracekit's cache, through the ``nsys`` CLI.

The export lands in ``$TRACEKIT_CACHE_DIR`` (default ``~/.cache/tracekit/nsys``) and is
reused while it is newer than its report. Its name carries a digest of the report's full
path, so that reports of one name in different folders (``rank0/report.nsys-rep``,
``rank1/report.nsys-rep``) never share an export.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path
from typing import Final

from tracekit.errors import TraceReadError

REP_SUFFIX: Final = ".nsys-rep"


def cache_dir() -> Path:
    """Where exports are cached: ``$TRACEKIT_CACHE_DIR`` or ``~/.cache/tracekit/nsys``."""
    configured = os.environ.get("TRACEKIT_CACHE_DIR")
    return Path(configured) if configured else Path.home() / ".cache" / "tracekit" / "nsys"


def cached_export(report: Path) -> Path:
    """The path of ``report``'s export in the cache (it may not exist yet)."""
    digest = hashlib.sha1(str(report.resolve()).encode(), usedforsecurity=False).hexdigest()[:10]
    return cache_dir() / f"{report.name.removesuffix(REP_SUFFIX)}.{digest}.sqlite"


def export_sqlite(report: str | Path) -> Path:
    """Export ``report`` with ``nsys export --type sqlite`` (unless cached) and return the file.

    Raises :class:`TraceReadError` when ``nsys`` is not on PATH (saying how to export by
    hand) or when the export fails.
    """
    report = Path(report)
    try:
        report_mtime = report.stat().st_mtime
    except OSError as exc:
        raise TraceReadError(f"cannot read file ({exc.strerror})", path=report) from None
    out = cached_export(report)
    if out.exists() and out.stat().st_mtime >= report_mtime:
        return out
    nsys = shutil.which("nsys")
    if nsys is None:
        raise TraceReadError(
            f"nsys is not installed; export it with `nsys export --type sqlite {report}` and analyze the .sqlite",
            path=report,
        )
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise TraceReadError(f"cannot create the cache folder {out.parent} ({exc.strerror})", path=report) from None
    command = [nsys, "export", "--type", "sqlite", "--force-overwrite", "true", "--output", str(out), str(report)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0 or not out.exists():
        out.unlink(missing_ok=True)
        detail = (done.stderr.strip() or done.stdout.strip() or "no output").splitlines()[-1]
        raise TraceReadError(f"`nsys export --type sqlite` failed (exit {done.returncode}: {detail})", path=report)
    return out
