"""Which rank a failed or hung capture names, from the files its ranks left (no ranks started)."""

from __future__ import annotations

import json
import os
import signal
from typing import TYPE_CHECKING

from tracekit.capture import files
from tracekit.capture.ranks import CaptureError, Position, RankProgress, RankState, failure, hang, read_states
from tracekit.errors import InputError

if TYPE_CHECKING:
    from pathlib import Path

PEER_LOST = (
    "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:553] Connection closed by peer "
    "[127.0.0.1]:29592. This is typically caused by a remote worker crashing.\nTraceback ...\n"
)


def at(stage: str, step: int = -1, phase: str = "") -> Position:
    return Position(stage, step, phase)


def test_a_silent_exit_is_the_cause_even_when_peers_reported_errors_first() -> None:
    # rank 1 called os._exit(3); rank 0 noticed the closed connection and wrote its error before
    # rank 1's supervisor recorded the exit; ranks 2-3 were stopped by the launcher
    states = [
        RankState(0, error=PEER_LOST, error_ns=100, exit_code=1, exit_ns=300),
        RankState(1, exit_code=3, exit_ns=150),
        RankState(2, exit_signal=signal.SIGTERM, exit_ns=200),
        RankState(3, exit_signal=signal.SIGTERM, exit_ns=210),
    ]
    err = failure(states, _folder(), 1)
    assert isinstance(err, CaptureError)
    assert err.message.startswith("rank 1 failed first (then rank(s) 0,2,3 failed too): exited with code 3")
    assert "os._exit" in err.message and "\n" not in err.message


def test_a_rank_stopped_by_the_launcher_is_not_blamed_over_the_rank_that_raised() -> None:
    # the launcher killed rank 0 before rank 3's supervisor wrote its exit record, but rank 3 raised
    states = [
        RankState(0, exit_signal=signal.SIGTERM, exit_ns=90),
        RankState(3, error="InputError-ish: workload raised ValueError: no shard\nTraceback\n", error_ns=95),
    ]
    assert failure(states, _folder(), 1).message.startswith("rank 3 failed first (then rank(s) 0 failed too)")


def test_a_crash_in_native_code_is_named_by_its_signal() -> None:
    states = [RankState(0, error=PEER_LOST, error_ns=10), RankState(1, exit_signal=signal.SIGSEGV, exit_ns=20)]
    assert failure(states, _folder(), 1).message.startswith(
        "rank 1 failed first (then rank(s) 0 failed too): was killed by SIGSEGV"
    )


BAD_INPUT = (
    "workload 'm:f' raised ValueError: x\nTraceback\ntracekit.errors.InputError: workload 'm:f' raised ValueError: x\n"
)


def test_the_same_bad_input_on_every_rank_is_an_input_error() -> None:
    states = [RankState(r, error=BAD_INPUT, error_ns=r, position=at("workload")) for r in range(3)]
    err = failure(states, _folder(), 1)
    assert type(err) is InputError and err.message == "workload 'm:f' raised ValueError: x"


def test_bad_input_on_one_rank_only_names_that_rank() -> None:
    # rank 3's factory raised; the launcher stopped the others, some before they built theirs
    states = [RankState(r, exit_signal=signal.SIGTERM, exit_ns=20 + r, position=at("init")) for r in range(3)]
    states.append(RankState(3, error=BAD_INPUT, error_ns=10, exit_code=2, exit_ns=15, position=at("workload")))
    err = failure(states, _folder(), 1)
    assert type(err) is InputError  # bad input all the same (exit 2), but only rank 3 is known to have it
    assert err.message.startswith("rank 3 failed first (then rank(s) 0,1,2 failed too): workload 'm:f' raised")


def test_the_tail_shows_the_users_frames_not_tracekit_reraising() -> None:
    text = (
        "workload 'm:f' raised ValueError: no shard\n"
        "Traceback (most recent call last):\n"
        '  File "/u/m.py", line 9, in f\n'
        '    raise ValueError("no shard")\n'
        "    ^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n"
        "ValueError: no shard\n\n"
        "The above exception was the direct cause of the following exception:\n\n"
        "Traceback (most recent call last):\n"
        '  File "/t/runner.py", line 52, in _build_workload\n'
        "tracekit.errors.InputError: workload 'm:f' raised ValueError: no shard\n"
    )
    states = [RankState(3, error=text, error_ns=1, position=at("workload")), RankState(0, position=at("prepare"))]
    message = failure(states, _folder(), 1).message
    assert 'last lines: File "/u/m.py", line 9, in f | raise ValueError("no shard") | ValueError: no shard (' in message


def test_ranks_that_left_nothing_and_a_launcher_that_failed_to_start() -> None:
    states = [RankState(0, done=True, position=at("finishing")), RankState(1, position=at("steps", 2, "forward"))]
    assert failure(states, _folder(), 0).message.startswith("rank(s) 1 did not finish and left no error")
    assert failure([RankState(0), RankState(1)], _folder(), 2).message.startswith("the launcher exited with code 2")


def test_a_hang_names_the_rank_furthest_behind() -> None:
    states = [
        RankState(0, position=at("steps", 2, "backward")),
        RankState(1, position=at("steps", 2, "forward")),
        RankState(2, position=at("steps", 2, "backward")),
        RankState(3, position=at("steps", 2, "sync")),
    ]
    assert hang(states) == (
        "rank 1 did not finish: it was still in forward of step 2, behind every other rank "
        "(ranks 0,2 were still in backward of step 2, rank 3 was still in sync of step 2, waiting)"
    )


def test_a_hang_at_start_up_and_ranks_that_never_started() -> None:
    states = [RankState(0, position=at("prepare")), RankState(1, position=at("workload")), RankState(2, done=True)]
    assert hang(states).startswith("rank 1 did not finish: it was still building the workload, behind every other")
    assert hang(states).endswith("; rank 2 finished")
    assert hang([RankState(0, position=at("init")), RankState(1)]).startswith(
        "rank 1 did not finish: it has not started"
    )
    tied = [RankState(r, position=at("steps", 3, "backward")) for r in range(2)]
    assert hang(tied) == "ranks 0,1 did not finish: they were still in backward of step 3"


def test_positions_order_stages_then_steps_then_phases() -> None:
    order = [at("start"), at("init"), at("workload"), at("prepare"), at("steps", 0, "dataload_wait")]
    order += [at("steps", 0, "forward"), at("steps", 0, "sync"), at("steps", 1, "h2d"), at("finishing")]
    assert sorted(order[4:] + order[:4], key=lambda p: p.key) == order


def test_files_a_rank_leaves_are_read_back(tmp_path: Path) -> None:
    progress = RankProgress(tmp_path, 1)
    progress.stage("workload")
    progress.phase(12, "optim_step")
    progress.phase(3, "h2d")  # shorter than the record before: still one JSON object
    (tmp_path / files.exit_name(1)).write_text(json.dumps({"exit_code": None, "signal": 9, "time_ns": 5}))
    progress0 = RankProgress(tmp_path, 0)
    progress0.done()
    (tmp_path / files.error_name(2)).write_text("RuntimeError: x\nTraceback\n")
    zero, one, two = read_states(tmp_path, 3)
    assert zero.done and not zero.ended
    assert one.position == at("steps", 3, "h2d") and one.exit_signal == 9 and one.ended and not one.is_cause
    assert two.error is not None and two.headline == "RuntimeError: x" and two.is_cause and two.error_ns
    assert os.path.getsize(tmp_path / files.progress_name(1)) == 128


def _folder() -> Path:
    from pathlib import Path

    return Path("/nowhere")


def test_ddp_refusing_an_unused_parameter_says_what_to_run(tmp_path: Path) -> None:
    # issue 46, item 8: torch's message runs over several lines; the rank wrote its first line only
    # (cut mid-sentence) and nothing said audit-params or --find_unused_parameters=true
    from tracekit.capture.runner import _report

    message = (
        "Expected to have finished reduction in the prior iteration before starting a new one. This error "
        "indicates that your module has parameters that were not used in producing loss. You can enable unused "
        "parameter detection by passing the keyword argument `find_unused_parameters=True` to\n"
        "`torch.nn.parallel.DistributedDataParallel`, and by \nmaking sure all `forward` function outputs "
        "participate in calculating loss."
    )
    path = tmp_path / files.error_name(1)
    try:
        raise RuntimeError(message)
    except RuntimeError as exc:
        _report(exc, path)
    error = path.read_text()
    headline = error.splitlines()[0]
    assert headline.startswith("RuntimeError: Expected to have finished reduction")
    assert headline.endswith("participate in calculating loss.")  # whole, on one line
    said = failure([RankState(0, done=True), RankState(1, error=error, error_ns=1, exit_code=1)], tmp_path, 1).message
    assert "tracekit audit-params (the same config) names the parameters" in said
    assert "--find_unused_parameters=true" in said and said.endswith(f"(all of it: {path})")
