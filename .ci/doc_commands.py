#!/usr/bin/env python3
"""Every command of README.md and docs/, run as written, in a fresh clone with a new venv.

``python3 .ci/doc_commands.py`` (``.ci/run`` runs it beside the lint and the tests):

1. clones this repository's committed HEAD into a new temporary folder (``--keep DIR`` clones
   there instead and leaves it, for a look at what the commands wrote);
2. makes a new venv beside the clone (``python3 -m venv``, nothing of this machine's packages)
   and puts its ``bin`` first on ``PATH``: ``python3``, ``pip`` and ``tracekit`` are the venv's,
   and nothing is installed in it but what the pages' own commands install (README's first
   block installs tracekit as a user does, ``pip install .``; capture.md's adds the capture
   extra; scale.md's the Dask one);
3. runs, in the clone's root and in page order (README.md, then docs/ by name), every ``bash``
   and ``python`` block that has no ``<!-- not run: REASON -->`` line before it: a shell block
   with ``bash -eo pipefail`` (a failing command anywhere in it fails it), a Python block with
   the venv's ``python3``. A block that cannot run here (a GPU, Nsight Systems, a cluster, a
   fragment whose model and data are the reader's, CI itself) says why in that line. Blocks run
   one after another in one clone, so a page may use what an earlier one wrote (``traces/``,
   written by capture.md's, is read by scale.md's and python-api.md's).

Prints a line per block (its page and number, ``ok`` and its seconds, or ``not run`` and why)
and exits 1 when a block failed, with the end of its output.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parents[1]
#: A shell block, and the line before it that says why it is not run (if it is not).
_BLOCK = re.compile(
    r"(?:^<!-- not run: (?P<why>[^>]+?) -->\n)?^```(?P<lang>bash|sh|python)\n(?P<body>.*?)^```", re.M | re.S
)
#: The longest a block may take (the longest, a sweep of captures, takes a few minutes).
BLOCK_TIMEOUT_S = 1200


class Block(NamedTuple):
    name: str  # page#number
    body: str
    why_not: str | None  # None: it runs
    python: bool = False  # a Python block (else a shell one)

    def command(self) -> list[str]:
        """How the block runs, in the venv."""
        if self.python:
            return ["python3", "-c", self.body]
        return ["bash", "-eo", "pipefail", "-c", self.body]


def pages(root: Path = ROOT) -> list[Path]:
    """The pages, in the order their blocks run: README.md, then docs/ by name."""
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def blocks(root: Path = ROOT) -> list[Block]:
    """Every shell block of the pages, in order."""
    found = []
    for page in pages(root):
        for n, m in enumerate(_BLOCK.finditer(page.read_text()), 1):
            python = m.group("lang") == "python"
            found.append(Block(f"{page.relative_to(root)}#{n}", m.group("body"), m.group("why"), python))
    return found


def fresh_env(venv: Path) -> dict[str, str]:
    """This process's environment with the venv first on PATH and nothing pointing elsewhere."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["VIRTUAL_ENV"] = str(venv)
    env["PYTHONNOUSERSITE"] = "1"
    return env


def run(work: Path) -> int:
    clone, venv = work / "clone", work / "venv"
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True)
    if (ROOT.parent / "shared").is_dir() and not (work / "shared").exists():
        (work / "shared").symlink_to(ROOT.parent / "shared")  # ../shared beside the clone, as in CI
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    env = fresh_env(venv)
    failed = 0
    every = blocks(clone)
    for block in every:
        if block.why_not is not None:
            print(f"{block.name}: not run ({block.why_not})", flush=True)
            continue
        began = time.perf_counter()
        try:
            done = subprocess.run(
                block.command(),
                cwd=clone,
                env=env,
                capture_output=True,
                text=True,
                timeout=BLOCK_TIMEOUT_S,
                check=False,
            )
            code, out = done.returncode, (done.stdout + done.stderr)
        except subprocess.TimeoutExpired as e:
            code, out = -1, f"timed out after {BLOCK_TIMEOUT_S} s: {e}"
        took = time.perf_counter() - began
        if code == 0:
            print(f"{block.name}: ok ({took:.1f} s)", flush=True)
        else:
            failed += 1
            print(f"{block.name}: FAILED (exit {code}, {took:.1f} s)\n{out[-3000:]}", flush=True)
    ran = sum(b.why_not is None for b in every)
    print(f"{ran - failed} of {ran} blocks ran as written; {len(every) - ran} say why they are not run")
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--keep", type=Path, help="clone and venv into this new folder, and leave them")
    parser.add_argument("--list", action="store_true", help="list the blocks and whether they run; run nothing")
    args = parser.parse_args(argv)
    if args.list:
        for block in blocks():
            print(f"{block.name}: {'runs' if block.why_not is None else 'not run: ' + block.why_not}")
        return 0
    if args.keep is not None:
        if args.keep.exists():
            parser.error(f"--keep {args.keep}: exists; name a new folder")
        args.keep.mkdir(parents=True)
        return run(args.keep.resolve())
    work = Path(tempfile.mkdtemp(prefix="tracekit-docs-"))
    try:
        return run(work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
