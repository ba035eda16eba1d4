"""Benchmark of the comparison's noise model on real CPU captures (gloo ranks on this machine).

``python -m benchmarks.compare_noise`` runs, with the built-in ``mlp`` workload on 2 ranks
(20 traced steps each):

* ``--pairs`` (default 20) A/A comparisons: ``tracekit capture --ab '' '' --repeats 3`` (the
  same config on both sides, ``--repeats`` captures each, interleaved), then ``tracekit
  compare``. Target: step time *within noise* in at least 19 of 20. Each pair's step delta,
  interval and verdict, and which phases (if any) were called changed, are recorded: the
  false-positive rate of the method on this machine;
* one A/B pair, B with ``workload_args.forward_delay_ms=5`` (every forward sleeps 5 ms): the
  forward phase must be *slower* by about 5 ms (``time.sleep`` overshoots by a fraction of a
  millisecond, so the interval holds the sleep's real length, a little over 5);
* one A/B pair with ``workload_args.sync_check=true`` against ``false``: one host read per step
  issued from the forward on A, none on B.

Writes ``benchmarks/results/compare_noise.json`` and prints a summary.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Final

from benchmarks.run import _env, _machine
from tracekit.results.vocab import PHASE_PREFIX

CONFIG: Final = {
    "workload": "mlp",
    "workload_args": {"hidden": 256, "depth": 3},
    "nproc": 2,
    "batch_size": 16,
    "warmup_steps": 2,
    "measured_steps": 20,
    "profiler": {"wait": 1, "warmup": 1, "active": 20},
    "seed": 0,
}


def _ab(work: Path, name: str, a: str, b: str, env: dict[str, str], *, repeats: int = 1) -> dict[str, Any]:
    """Capture A and B interleaved (``repeats`` runs each), compare B against A; the comparison as JSON."""
    out = work / name
    config = work / "cfg.json"
    config.write_text(json.dumps(CONFIG))
    capture = [sys.executable, "-m", "tracekit", "capture", "--config_path", str(config), f"--out_dir={out}"]
    subprocess.run([*capture, "--ab", a, b, "--repeats", str(repeats)], check=True, env=env, capture_output=True)
    saved = out / "compare.json"
    cmd = [sys.executable, "-m", "tracekit", "compare", str(out / "a"), str(out / "b"), "--json", str(saved)]
    subprocess.run(cmd, check=True, env=env, capture_output=True)
    doc: dict[str, Any] = json.loads(saved.read_text())
    return doc


def _step(doc: dict[str, Any]) -> dict[str, Any]:
    s = doc["step"]
    return {
        "a_ms": round(s["a"] / 1e6, 3),
        "b_ms": round(s["b"] / 1e6, 3),
        "delta_ms": round(s["delta"] / 1e6, 3),
        "delta_pct": s["delta_pct"],
        "ci_ms": [round(s["ci"]["low"] / 1e6, 3), round(s["ci"]["high"] / 1e6, 3)],
        "detectable_ms": round(s["detectable"] / 1e6, 3),
        "change": s["change"],
        "phases_changed": [_phase(p) for p in doc["phases"] if p["change"] not in ("within noise", "not measured")],
    }


def _phase(measure: dict[str, Any]) -> str:
    """A phase measure's phase, tracekit's own by its short name (``forward``)."""
    return str(measure["key"]).removeprefix("phase:").removeprefix(PHASE_PREFIX)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3, help="captures per side of each comparison")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "compare_noise.json")
    args = parser.parse_args(argv)
    env = _env()
    began = time.perf_counter()
    pairs = []
    with tempfile.TemporaryDirectory(prefix="tracekit-noise-") as tmp:
        work = Path(tmp)
        for i in range(args.pairs):
            row = _step(_ab(work, f"aa{i}", "", "", env, repeats=args.repeats))
            pairs.append(row)
            print(
                f"A/A {i + 1}/{args.pairs}: {row['delta_pct']:+.2f}% {row['change']} {row['phases_changed']}",
                flush=True,
            )
        delay = _ab(work, "delay", "", "workload_args.forward_delay_ms=5", env, repeats=args.repeats)
        forward = next(p for p in delay["phases"] if _phase(p) == "forward")
        sync = _ab(work, "sync", "workload_args.sync_check=true", "workload_args.sync_check=false", env)
    within = sum(p["change"] == "within noise" for p in pairs)
    doc = {
        "machine": _machine(),
        "config": CONFIG,
        "repeats": args.repeats,
        "wall_s": round(time.perf_counter() - began, 1),
        "aa": {
            "pairs": pairs,
            "within_noise": within,
            "of": len(pairs),
            "target": "step time within noise in at least 19 of 20",
            "met": within >= 0.95 * len(pairs),
            "pairs_with_a_phase_called_changed": sum(bool(p["phases_changed"]) for p in pairs),
        },
        "forward_delay_5ms": {
            "step": _step(delay),
            "forward_delta_ms": round(forward["delta"] / 1e6, 3),
            "forward_ci_ms": [round(forward["ci"]["low"] / 1e6, 3), round(forward["ci"]["high"] / 1e6, 3)],
            "forward_change": forward["change"],
        },
        "sync_check": {
            "a_per_step": sync["syncs"]["a_per_step"],
            "b_per_step": sync["syncs"]["b_per_step"],
            "sources": [
                {k: s[k] for k in ("name", "phase", "sync_kind", "a_count", "b_count", "change")}
                for s in sync["syncs"]["sources"]
            ],
        },
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=2) + "\n")
    aa = doc["aa"]
    print(f"A/A: step time within noise in {aa['within_noise']} of {aa['of']} ({'met' if aa['met'] else 'NOT met'})")
    print(f"5 ms forward: forward {doc['forward_delay_5ms']['forward_delta_ms']:+.3f} ms {forward['change']}")
    print(f"sync check: A {doc['sync_check']['a_per_step']} per step, B {doc['sync_check']['b_per_step']}")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
