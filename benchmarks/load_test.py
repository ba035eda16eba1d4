"""The e2e capture tests beside a CPU hog: do timing-dependent tests hold on a loaded machine?

Starts ``--hogs`` processes that spin on a core each (default 2: every core of the 2-core
machines CI shares), then runs the e2e tests of ``tests/capture``'s ``*e2e*`` files, the A/B
test, ``gpu_check.sh --cpu``, ``gpu_calibration.sh --cpu`` and ``tests/integrations`` (everything
that starts gloo ranks and asserts on what they measured) ``--rounds`` times in a row
(default 3), each round one pytest process. The hogs are stopped whatever happens. A round passes
when pytest exits 0; the run passes when every round does. Writes, per round, its exit status,
wall time and the tests that failed, to ``benchmarks/results/load_test.json``::

    python3 -m benchmarks.load_test                     # 2 hogs, 3 rounds (~1 hour on 2 cores)
    python3 -m benchmarks.load_test --rounds 1 -k loader_probe

Exit status 1 when a round failed.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULT = ROOT / "benchmarks" / "results" / "load_test.json"
TESTS = [
    *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tests" / "capture").glob("test_*e2e*.py")),
    "tests/capture/test_ab.py",  # the A/B comparison's measured delta
    "tests/benchmarks/test_gpu_check.py",  # gpu_check.sh --cpu: its verdicts on CPU captures
    # gpu_calibration.sh --cpu: its data case is the doctor's trial, which the baseline's verdict
    # picks (data-bound: num_workers); a compute slowed enough by load makes another knob first
    "tests/benchmarks/test_gpu_calibration.py",
    "tests/integrations",
]
SPIN = "while True:\n    pass\n"


def one_round(keyword: str | None) -> dict[str, object]:
    """One pytest process over :data:`TESTS` (their e2e tests); its status, time and failures."""
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "e2e", *TESTS]
    if keyword:
        command += ["-k", keyword]
    began = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
    failed = sorted(set(re.findall(r"^(?:FAILED|ERROR) (\S+)", done.stdout, flags=re.MULTILINE)))
    tail = done.stdout.strip().splitlines()[-1:] or [""]
    return {"returncode": done.returncode, "seconds": round(time.perf_counter() - began, 1), "failed": failed,
            "summary": tail[0]}  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hogs", type=int, default=2, help="processes spinning on a core each")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("-k", dest="keyword", help="pytest -k: a subset of the tests")
    parser.add_argument("--out", type=Path, default=RESULT)
    args = parser.parse_args()
    hogs = [subprocess.Popen([sys.executable, "-c", SPIN]) for _ in range(args.hogs)]
    rounds: list[dict[str, object]] = []
    try:
        for n in range(args.rounds):
            rounds.append(one_round(args.keyword))
            failed = ", ".join(rounds[-1]["failed"]) or "none"  # type: ignore[arg-type]
            print(
                f"round {n + 1}/{args.rounds}: {rounds[-1]['summary']} ({rounds[-1]['seconds']} s); failed: {failed}",
                flush=True,
            )
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    passed = all(r["returncode"] == 0 for r in rounds)
    result = {"hogs": args.hogs, "tests": TESTS, "keyword": args.keyword, "rounds": rounds, "passed": passed}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"{sum(r['returncode'] == 0 for r in rounds)} of {len(rounds)} rounds passed beside {args.hogs} hogs")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
