"""Calibration of the predicted gains: predicted against measured, on CPU workloads with an injected bottleneck.

``python -m benchmarks.gains_calibration`` runs, with the built-in ``mlp`` workload on 2 gloo
ranks, one A/B capture per case (``tracekit capture --ab A B --repeats N``, interleaved): A
carries the bottleneck, B is the same config without it. The predicted gain is read from A's
analyses (``tracekit analyze --json`` of each A run: the finding the bottleneck makes, its
*gain* re-timed and its *share* of the ledger beside it, as shares of A's step); where a case
injects two bottlenecks, the prediction is A's *joint* gain (the verdict's first two fixes
re-timed together, never their gains added). The measured gain is from ``tracekit compare`` of B
against A (the step time's change, with its 95% interval of the difference of means). A case
is as predicted, by ``tracekit doctor``'s rule (:func:`tracekit.capture.doctor_plan.agreement`),
only when the measured interval excludes zero and meets the predicted gain (holds it, or the
measured gain is within 25% of it); a gain beyond noise that is not the predicted one is
*partly*, an interval holding zero *inconclusive*.

Cases (each a real bottleneck of the workload, see ``tracekit/capture/workloads.py``):

* ``slow-loader``: every ``__getitem__`` sleeps (``loader_delay_ms``), no workers: data-bound;
* ``straggler``: rank 1's forward sleeps (``straggler_rank``, ``straggler_delay_ms``);
* ``loader+straggler``: both at once, against neither: the joint gain of the two fixes;
* ``host-reads``: a ``.item()`` in every forward (``host_sync``). On a CPU-only run a host read
  waits for nothing: the prediction is no sync finding (a gain of 0), and the measurement must
  find none;
* ``comm-heavy``: the comm-heavy model (21.5M parameters, little compute) with and without its
  gradients' all-reduce (DDP's no-op communication hook, ``ddp_comm_hook=noop``, which PyTorch
  ships for this headroom analysis): comms-bound.

* ``unused-parameters``: ``find_unused_parameters`` on, though every parameter gets a gradient,
  against off. Its graph walk is no waste the analysis names (it runs inside DDP's forward,
  recorded as no operator of its own), so nothing predicts it: the case is measured and reported
  as not predicted, outside the target's count (``tracekit doctor`` does the same after the
  audit).

Writes ``benchmarks/results/gains_calibration.json`` and prints the table.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from tracekit.capture.doctor_plan import agreement
from tracekit.results.doctor import Agreement, TrialMeasure
from tracekit.results.vocab import BoundKind, Change
from tracekit.results.worth import Gain

CONFIG: Final = {
    "workload": "mlp",
    "workload_args": {"hidden": 256, "depth": 3},
    "nproc": 2,
    "batch_size": 16,
    "num_workers": 0,
    "warmup_steps": 2,
    "measured_steps": 8,
    "profiler": {"wait": 1, "warmup": 1, "active": 8},
    "seed": 0,
}


@dataclass(frozen=True)
class Case:
    name: str
    bound: str  # the finding the bottleneck makes (BoundKind value); two joined by "+": the joint gain
    a: str  # overrides with the bottleneck
    b: str  # overrides without it


#: The comm-heavy model of samples/configs/comms_bound.json (21.5M parameters, little compute, SGD).
COMM_HEAVY: Final = "workload_args.comm_heavy=true workload_args.optimizer=sgd batch_size=2"

CASES: Final = (
    Case("slow-loader", "data-bound", "workload_args.loader_delay_ms=3", ""),
    Case("straggler", "straggler-bound", "workload_args.straggler_rank=1 workload_args.straggler_delay_ms=30", ""),
    Case(
        "loader+straggler",
        "data-bound+straggler-bound",
        "workload_args.loader_delay_ms=3 workload_args.straggler_rank=1 workload_args.straggler_delay_ms=30",
        "",
    ),
    Case("host-reads", "sync-bound", "workload_args.host_sync=true", ""),
    # DDP's no-op communication hook (PyTorch's own, for this headroom analysis): the gradients'
    # all-reduce gone, everything else as it was
    Case("comm-heavy", "comms-bound", COMM_HEAVY, f"{COMM_HEAVY} ddp_comm_hook=noop"),
    # no finding predicts DDP's graph walk (see above): measured, and reported as not predicted
    Case("unused-parameters", "", "find_unused_parameters=true", "find_unused_parameters=false"),
)


def _run(cmd: list[str], env: dict[str, str]) -> None:
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({done.returncode}): {done.stderr.strip()[-800:]}")


def _predicted(folder: Path, bound: str | None, env: dict[str, str]) -> dict[str, Any]:
    """The gain and share of ``bound`` in each run of side A (0 where the run has no such
    finding); for two bounds joined by "+", the verdict's joint gain of its first two fixes when
    they are these two (else 0) and the two shares added."""
    runs = sorted(p for p in folder.iterdir() if p.is_dir()) or [folder]
    wanted = set((bound or "").split("+")) - {""}
    gains, shares, steps = [], [], []
    for run in runs:
        saved = run / "analysis.json"
        _run([sys.executable, "-m", "tracekit", "analyze", str(run), "--json", str(saved)], env)
        verdict = json.loads(saved.read_text())["verdict"]
        found = [g for g in verdict.get("gains", []) if g["bound"] in wanted]
        if len(wanted) > 1:
            joint = verdict.get("joint") or {}
            gains.append(joint["gain_pct"] if set(joint.get("bounds", [])) == wanted else 0.0)
        else:
            gains.append(0.0 if not found or found[0]["gain_pct"] is None else found[0]["gain_pct"])
        shares.append(sum(g["share_pct"] for g in found))
        steps.append(found[0]["step_ns"] if found else None)
    return {
        "gain_pct": round(statistics.fmean(gains), 2),
        "share_pct": round(statistics.fmean(shares), 2),
        "per_run_gain_pct": [round(v, 2) for v in gains],
        "joint": len(wanted) > 1,
        "step_ms": [None if s is None else round(s / 1e6, 2) for s in steps],
    }


def _measured(out: Path, env: dict[str, str]) -> dict[str, Any]:
    """B against A: the step's change as a gain (positive: B faster), with its interval."""
    saved = out / "compare.json"
    _run([sys.executable, "-m", "tracekit", "compare", str(out / "a"), str(out / "b"), "--json", str(saved)], env)
    return step_gain(json.loads(saved.read_text())["step"])


def step_gain(step: dict[str, Any], digits: int = 2) -> dict[str, Any]:
    """A compare report's step: both sides (ms), B's change as a gain of A's step (positive: B
    faster) and its 95% interval (the change's own where none was estimated)."""
    a = step["a"]
    ci = step.get("ci") or {"low": step["delta"], "high": step["delta"]}
    return {
        "a_ms": round(a / 1e6, digits),
        "b_ms": round(step["b"] / 1e6, digits),
        "gain_pct": round(-100 * step["delta"] / a, 2),
        "ci_pct": [round(-100 * ci["high"] / a, 2), round(-100 * ci["low"] / a, 2)],
        "change": step["change"],
    }


def _verdict(predicted: dict[str, Any], measured: dict[str, Any], *, predicts: bool) -> dict[str, Any]:
    """The doctor's own test of a prediction (:func:`tracekit.capture.doctor_plan.agreement`);
    ``predicts``: whether a finding predicts the case at all (else no agreement, no count)."""
    if not predicts:
        return {"error_pp": None, "agreement": Agreement.NO_PREDICTION.value, "met": None}
    gain = Gain(bound=BoundKind.DATA, step_ns=1.0, share_pct=predicted["share_pct"], gain_pct=predicted["gain_pct"])
    low, high = measured["ci_pct"]
    found = TrialMeasure(
        key="step", a=1.0, b=1.0, gain_pct=measured["gain_pct"], low_pct=low, high_pct=high, change=Change.SAME
    )
    agreed = agreement(gain, found)
    error = measured["gain_pct"] - predicted["gain_pct"]
    return {
        "error_pp": round(error, 2),
        "agreement": agreed.value,
        "met": agreed is Agreement.AS_PREDICTED,
    }


def _rejudge(path: Path) -> None:
    """The saved run's cases judged again by today's rule (the captures and analyses as they were)."""
    doc = json.loads(path.read_text())
    for case in doc["cases"]:
        case.update(_verdict(case["predicted"], case["measured"], predicts=bool(case["bound"])))
    doc["target"] = TARGET
    doc["met"] = sum(bool(r["met"]) for r in doc["cases"])
    doc["of"] = sum(r["met"] is not None for r in doc["cases"])
    path.write_text(json.dumps(doc, indent=2) + "\n")
    for r in doc["cases"]:
        print(f"{r['case']}: {r['agreement']}")
    print(f"met {doc['met']} of {doc['of']}; rewrote {path}")


#: The target of a case, by the doctor's rule.
TARGET: Final = (
    "as predicted: the measured 95% interval excludes zero and holds the gain, or is within 25% of it "
    "(a prediction of no gain: the interval holds zero)"
)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="captures per side of each case")
    parser.add_argument("--case", action="append", help="run only these cases (by name)")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "gains_calibration.json")
    parser.add_argument(
        "--rejudge",
        action="store_true",
        help="capture nothing: judge the predictions and measurements saved in --out again by today's rule",
    )
    args = parser.parse_args(argv)
    if args.rejudge:
        _rejudge(args.out)
        return
    # here, not at the top: benchmarks.gpu_calibration imports this module on the GPU machine,
    # which lacks what benchmarks.run needs (orjson)
    from benchmarks.run import _env, _machine  # noqa: PLC0415

    env = _env()
    began = time.perf_counter()
    rows = []
    with tempfile.TemporaryDirectory(prefix="tracekit-gains-") as tmp:
        work = Path(tmp)
        config = work / "cfg.json"
        config.write_text(json.dumps(CONFIG))
        for case in CASES:
            if args.case and case.name not in args.case:
                continue
            out = work / case.name
            capture = [sys.executable, "-m", "tracekit", "capture", "--config_path", str(config), f"--out_dir={out}"]
            _run([*capture, "--ab", case.a, case.b, "--repeats", str(args.repeats)], env)
            predicted = _predicted(out / "a", case.bound or None, env)
            measured = _measured(out, env)
            row = {"case": case.name, "bound": case.bound, "a": case.a, "b": case.b or "(as is)"}
            row |= {
                "predicted": predicted,
                "measured": measured,
                **_verdict(predicted, measured, predicts=bool(case.bound)),
            }
            rows.append(row)
            print(
                f"{case.name}: predicted gain {predicted['gain_pct']:.1f}% (share {predicted['share_pct']:.1f}%), "
                f"measured {measured['gain_pct']:.1f}% [{measured['ci_pct'][0]:.1f}, {measured['ci_pct'][1]:.1f}] "
                f"-> {'not predicted' if row['met'] is None else row['agreement']}",
                flush=True,
            )
    doc = {
        "machine": _machine(),
        "config": CONFIG,
        "repeats": args.repeats,
        "wall_s": round(time.perf_counter() - began, 1),
        "target": TARGET,
        "cases": rows,
        "met": sum(bool(r["met"]) for r in rows),
        "of": sum(r["met"] is not None for r in rows),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=2) + "\n")
    print(f"met {doc['met']} of {doc['of']}; wrote {args.out}")


if __name__ == "__main__":
    main()
