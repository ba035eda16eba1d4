"""Benchmark: one rank of 0.5, 1 and 2 GB of JSON: tracekit against HTA and the parse floor.

``python -m benchmarks.scale_file`` generates each size of each trace shape
(``benchmarks.generate``: one gzipped rank, a real trace of ``--shapes`` repeated in time, about
300 bytes of JSON per event; every shape by default, so that none regresses unseen) into a
temporary folder (removed after its runs; the free disk is checked first), then runs, each in
its own subprocess and measured as ``benchmarks.run`` measures (wall time, peak RSS of the
process tree sampled with psutil):

* ``floor``: gunzip plus a typed msgspec decode of the file in one process (``floor.py``);
* ``tracekit``: ``tracekit analyze`` (read + every analysis + the JSON, Markdown and HTML
  reports) with an empty cache folder, on every core (its ``--jobs`` default);
* ``tracekit_read``: tracekit's parse alone, on every core, no cache (``read_only.py``): the
  counterpart of the floor, for reference (the target holds the whole analysis to the floor);
* ``hta``: HTA's load + temporal + overlap + idle time + kernel breakdown (``hta_stages.py``),
  skipped where its peak memory, extrapolated from 2.63 GB at 0.5 GB, would pass ``--hta-max-gb``;
* with ``--plain``, ``floor_plain`` and ``tracekit_plain``: the same on the file gunzipped;
* with ``--msgspec``, ``tracekit_msgspec``: ``tracekit analyze`` without its native decoder
  (``TRACEKIT_NATIVE=0``: msgspec decodes the chunks, in processes), for reference.

``--only`` keeps some of these contenders. Writes ``benchmarks/results/scale_file.json`` (with
the machine's load average before and after; the measures by shape, then size) and prints a
table.
"""

from __future__ import annotations

import argparse
import gzip
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any, Final

from benchmarks.generate import ROOT, SHAPES, Spec, generate
from benchmarks.run import HERE, Measure, _env, _machine, measure, tracekit_command, write_results

SIZES_GB: Final = (0.5, 1.0, 2.0)
#: HTA's peak RSS per GB of JSON (2.63 GB for one 0.5 GB rank, measured here).
HTA_GB_PER_GB: Final = 5.3
#: (name, how, bound, "max"/"min"), for each shape
TARGETS: Final = (
    ("rss_2gb_mb", "tracekit peak RSS (MB) on 2 GB", 500.0, "max"),
    ("time_2gb_over_floor", "tracekit wall / floor wall on 2 GB", 0.7, "max"),
    ("rss_over_hta", "largest tracekit / HTA peak RSS over the sizes both ran", 0.5, "max"),
)
#: Every contender that ``--only`` may keep.
CONTENDERS: Final = ("floor", "tracekit", "tracekit_read", "tracekit_msgspec", "hta", "floor_plain", "tracekit_plain")


def _measure_size(
    gb: float,
    work: Path,
    *,
    hta: bool,
    plain: bool,
    log: Any,
    repeat: int = 1,
    msgspec: bool = False,
    shape: str = "a100",
    only: tuple[str, ...] = CONTENDERS,
) -> dict[str, Measure]:
    folder = generate(Spec(ranks=1, mb_per_rank=gb * 1000, source=str(SHAPES[shape])), work, log=True)
    runs: dict[str, list[str]] = {
        "floor": [sys.executable, str(HERE / "floor.py"), str(folder)],
        "tracekit": tracekit_command(folder, work / "out", jobs=None, cache=work / "cache"),
        "tracekit_read": [sys.executable, str(HERE / "read_only.py"), str(folder)],
    }
    if msgspec:
        runs["tracekit_msgspec"] = runs["tracekit"]
    if hta:
        runs["hta"] = [sys.executable, str(HERE / "hta_stages.py"), str(folder)]
    if plain:
        flat = work / "plain"
        flat.mkdir(exist_ok=True)
        with gzip.open(folder / "rank0.json.gz", "rb") as src, (flat / "rank0.json").open("wb") as dst:
            shutil.copyfileobj(src, dst, 16 << 20)
        runs["floor_plain"] = [sys.executable, str(HERE / "floor.py"), str(flat)]
        runs["tracekit_plain"] = tracekit_command(flat, work / "out", jobs=None, cache=work / "cache")
    runs = {name: command for name, command in runs.items() if name in only}
    (work / "out").mkdir(exist_ok=True)
    out: dict[str, Measure] = {}
    for turn in range(repeat):  # in turns, so that a slow spell of the machine hits every contender
        for name, command in runs.items():
            if name == "hta" and turn:  # minutes a run: once
                continue
            shutil.rmtree(work / "cache", ignore_errors=True)
            log(f"  {shape} {gb:g} GB {name} ...")
            env = _env() | ({"TRACEKIT_NATIVE": "0"} if name == "tracekit_msgspec" else {})
            m = measure(command, env=env)
            state = "ok" if m.returncode == 0 else f"FAILED (exit {m.returncode}):\n{m.stdout_tail}"
            log(f"  {shape} {gb:g} GB {name}: {m.wall_s:.1f} s, peak RSS {m.peak_rss_mb:.0f} MB, {state}")
            best = out.get(name)
            walls = (*best.walls_s, m.wall_s) if best else (m.wall_s,)
            if best is None or (m.returncode == 0 and m.wall_s < best.wall_s):
                best = m
            out[name] = replace(best, walls_s=walls)  # the fastest run, with every run's wall time
    return out


def run_all(
    sizes: tuple[float, ...],
    *,
    data_dir: Path,
    hta_max_gb: float,
    plain: bool,
    log: Any,
    repeat: int = 1,
    msgspec: bool = False,
    shapes: tuple[str, ...] = ("a100",),
    only: tuple[str, ...] = CONTENDERS,
) -> dict[str, Any]:
    """Every shape's and size's measures, and the targets; the JSON document of the results."""
    results: dict[str, dict[str, dict[str, Any]]] = {}
    skipped: dict[str, str] = {}
    load_before = os.getloadavg()
    data_dir.mkdir(parents=True, exist_ok=True)
    for shape in shapes:
        results[shape] = {}
        for gb in sizes:
            need = gb * 1e9 * (3 if plain else 1.2)
            free = shutil.disk_usage(data_dir).free
            if free < need:
                skipped[f"{shape} {gb:g}"] = f"{free / 1e9:.0f} GB free on {data_dir}, {need / 1e9:.0f} GB needed"
                continue
            hta = HTA_GB_PER_GB * gb <= hta_max_gb
            if not hta and "hta" in only:
                skipped[f"hta {shape} {gb:g}"] = (
                    f"HTA would need about {HTA_GB_PER_GB * gb:.0f} GB (--hta-max-gb {hta_max_gb:g})"
                )
            with tempfile.TemporaryDirectory(prefix="tracekit-scale-", dir=data_dir) as tmp:
                measures = _measure_size(
                    gb, Path(tmp), hta=hta, plain=plain, log=log, repeat=repeat, msgspec=msgspec, shape=shape, only=only
                )
            results[shape][f"{gb:g}"] = {name: asdict(m) for name, m in measures.items()}
    return {
        "code": measured_commit(),
        "machine": _machine() | {"loadavg_before": load_before, "loadavg_after": os.getloadavg()},
        "repeat": repeat,
        "results": results,
        "skipped": skipped,
        "targets": {shape: _targets(by_size) for shape, by_size in results.items()},
    }


def measured_commit() -> str | None:
    """The commit of the tracekit measured (a ``+`` where tracked files have changes), if git says."""
    try:
        head, dirty = (
            subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=False)
            for args in (["rev-parse", "--short", "HEAD"], ["status", "--porcelain", "--untracked-files=no"])
        )
    except OSError:
        return None
    return head.stdout.strip() + ("+" if dirty.stdout.strip() else "") if head.returncode == 0 else None


def _ok(run: dict[str, Any] | None) -> bool:
    return run is not None and run["returncode"] == 0


def _targets(results: dict[str, dict[str, Any]]) -> dict[str, Any]:
    two = results.get("2", {})
    tk, floor = two.get("tracekit"), two.get("floor")
    ratios = [
        r["tracekit"]["peak_rss_mb"] / r["hta"]["peak_rss_mb"]
        for r in results.values()
        if _ok(r.get("tracekit")) and _ok(r.get("hta"))
    ]
    values = {
        "rss_2gb_mb": tk["peak_rss_mb"] if _ok(tk) else None,
        "time_2gb_over_floor": tk["wall_s"] / floor["wall_s"] if _ok(tk) and _ok(floor) else None,
        "rss_over_hta": max(ratios) if ratios else None,
    }
    read = two.get("tracekit_read")
    if _ok(read) and _ok(floor):
        values["read_2gb_over_floor"] = read["wall_s"] / floor["wall_s"]
    plain_tk, plain_floor = two.get("tracekit_plain"), two.get("floor_plain")
    if _ok(plain_tk) and _ok(plain_floor):
        values["time_2gb_over_floor_plain"] = plain_tk["wall_s"] / plain_floor["wall_s"]
    out = {}
    for name, how, bound, kind in TARGETS:
        value = values[name]
        met = None if value is None else (value <= bound if kind == "max" else value >= bound)
        out[name] = {"value": value, "target": f"<= {bound:g}", "how": how, "met": met}
    if "read_2gb_over_floor" in values:
        out["read_2gb_over_floor"] = {
            "value": values["read_2gb_over_floor"],
            "target": "none",
            "how": "tracekit's parse alone (read_only.py) / floor wall on 2 GB, for reference",
            "met": None,
        }
    if "time_2gb_over_floor_plain" in values:
        value = values["time_2gb_over_floor_plain"]
        out["time_2gb_over_floor_plain"] = {
            "value": value,
            "target": "<= 0.7",
            "how": "tracekit wall / floor wall on 2 GB of plain JSON",
            "met": value <= 0.7,
        }
    return out


def table(doc: dict[str, Any]) -> str:
    """The results as a plain-text table."""
    lines = [f"{'shape':<6} {'size':>5} {'contender':<16} {'wall s':>8} {'cpu s':>8} {'peak RSS MB':>12}"]
    for shape, sizes in doc["results"].items():
        for size, runs in sizes.items():
            for name, m in runs.items():
                failed = "" if m["returncode"] == 0 else f"  FAILED (exit {m['returncode']})"
                lines.append(
                    f"{shape:<6} {size:>5} {name:<16} {m['wall_s']:>8.1f} {m['cpu_s']:>8.1f}"
                    f" {m['peak_rss_mb']:>12.0f}{failed}"
                )
    lines += [f"skipped {k}: {v}" for k, v in doc["skipped"].items()]
    for shape, targets in doc["targets"].items():
        for name, t in targets.items():
            value = "n/a" if t["value"] is None else f"{t['value']:.2f}"
            met = {None: "n/a", True: "yes", False: "NO"}[t["met"]]
            lines.append(f"{shape:<6} {name:<26} {value:>8} {t['target']:>8}  {met:<4} ({t['how']})")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    """Command line: see ``--help``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=float, nargs="+", default=list(SIZES_GB), help="GB of JSON [0.5 1 2]")
    parser.add_argument(
        "--shapes", nargs="+", choices=sorted(SHAPES), default=list(SHAPES), help="traces repeated [all of them]"
    )
    parser.add_argument("--only", nargs="+", choices=CONTENDERS, default=list(CONTENDERS), help="contenders [all]")
    parser.add_argument("--data-dir", type=Path, default=Path(tempfile.gettempdir()), help="for the generated files")
    parser.add_argument("--hta-max-gb", type=float, default=16.0, help="skip HTA above this predicted peak [16]")
    parser.add_argument("--plain", action="store_true", help="also measure the gunzipped file")
    parser.add_argument("--msgspec", action="store_true", help="also tracekit without its native decoder")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each but HTA, in turns; the fastest counts [1]")
    parser.add_argument("--out", type=Path, default=HERE / "results" / "scale_file.json")
    args = parser.parse_args(argv)

    def log(text: str) -> None:
        print(text, file=sys.stderr, flush=True)

    doc = run_all(
        tuple(args.sizes),
        data_dir=args.data_dir,
        hta_max_gb=args.hta_max_gb,
        plain=args.plain,
        log=log,
        repeat=args.repeat,
        msgspec=args.msgspec,
        shapes=tuple(args.shapes),
        only=tuple(args.only),
    )
    write_results(doc, args.out, table(doc))


if __name__ == "__main__":
    main()
