"""A rank ends without the interpreter's teardown, but as a normal exit would in all that matters."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = """
import atexit, sys, threading, time
from pathlib import Path
from tracekit.capture.runner import end_rank

out = Path(sys.argv[1])
def late():
    time.sleep(0.3)
    out.with_suffix(".thread").write_text("joined")
threading.Thread(target=late).start()
atexit.register(lambda: out.with_suffix(".atexit").write_text("ran"))
print("buffered", end="")
end_rank()
print("never")
"""


def test_end_rank_joins_threads_runs_atexit_flushes_and_exits_0(tmp_path: Path) -> None:
    mark = tmp_path / "mark"
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(mark)], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "buffered"
    assert mark.with_suffix(".thread").read_text() == "joined"
    assert mark.with_suffix(".atexit").read_text() == "ran"
