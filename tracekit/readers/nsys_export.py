"""``.nsys-rep`` reports -> SQLite exports in tracekit's cache, through the ``nsys`` CLI.

The export lands in ``nsys/`` of tracekit's cache folder (``$TRACEKIT_CACHE_DIR``, default
``~/.cache/tracekit``; see :mod:`tracekit.readers.cache`) and is reused while it is newer
than its report. Its name carries a digest of the report's full
path, so that reports of one name in different folders (``rank0/report.nsys-rep``,
``rank1/report.nsys-rep``) never share an export.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Final

from tracekit.errors import TraceReadError
from tracekit.readers.cache import default_cache_dir
from tracekit.readers.nsys import read_nsys

if TYPE_CHECKING:
    from tracekit.readers.trace import RankTrace

REP_SUFFIX: Final = ".nsys-rep"


def read(report: Path, *, cache_root: Path | None = None) -> list[RankTrace]:
    """The registry's reader (:mod:`tracekit.readers.formats`): export ``report`` (see
    :func:`export_sqlite`), then read the export under the report's name."""
    return read_nsys(export_sqlite(report, cache_root=cache_root), shown=report)


def cached_export(report: Path, cache_root: Path | None = None) -> Path:
    """The path of ``report``'s export in the cache (it may not exist yet)."""
    digest = hashlib.sha1(str(report.resolve()).encode(), usedforsecurity=False).hexdigest()[:10]
    folder = (cache_root or default_cache_dir()) / "nsys"
    return folder / f"{report.name.removesuffix(REP_SUFFIX)}.{digest}.sqlite"


def export_sqlite(report: str | Path, *, cache_root: Path | None = None) -> Path:
    """Export ``report`` with ``nsys export --type sqlite`` (unless cached) and return the file.

    ``cache_root`` is tracekit's cache folder (default: :func:`default_cache_dir`).

    Raises :class:`TraceReadError` when ``nsys`` is not on PATH (saying how to export by
    hand) or when the export fails.
    """
    report = Path(report)
    try:
        report_mtime = report.stat().st_mtime
    except OSError as exc:
        raise TraceReadError(f"cannot read file ({exc.strerror})", path=report) from None
    out = cached_export(report, cache_root)
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
