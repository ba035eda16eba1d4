"""What a fix is worth, as typed results: each waste's share and re-timed gain, why the two
differ, and what to do first (:mod:`tracekit.analyzers.gains`, :mod:`tracekit.analyzers.first`).

One story per finding: a waste's **share** of the ledger says what the time is; its **gain**,
the ranks re-timed along their dependencies with it removed, says what removing it is worth.
Neither bounds the other: removing one waste can remove part of another (freed from
dispatching, the host fetches the next batch while queued work runs), and the time a waste
holds can be taken back by another (the others still wait for the next-latest rank). Where
the two differ by more than the step's noise, :class:`GainWhy` says why, read off the
re-timing.

Schema 2.9 (from 2.8): ``Gain.up_to_pct`` is ``share_pct``, ``expected_pct`` is ``gain_pct``,
and ``why`` is new; a file of 2.5 to 2.8 is read into these names
(:mod:`tracekit.results.upgrade_analysis`).
"""

from __future__ import annotations

from typing import Final

import msgspec

from tracekit.results.vocab import BoundKind, NoteKind, StrEnum

__all__ = ["NOTE_BOUND", "Effort", "Fix", "Gain", "GainDiff", "GainLimit", "GainWhy", "Joint"]

#: The waste each note names: the note's gain is that waste's.
NOTE_BOUND: Final = {NoteKind.HOST_SYNCS: BoundKind.SYNC, NoteKind.LOW_OVERLAP: BoundKind.COMMS}


class GainLimit(StrEnum):
    """What a predicted gain cannot see (the re-timing model's assumptions, per estimate)."""

    BELOW_FINDING = "below_finding"  # a waste under the share that makes a finding: not re-timed, only its share
    NOT_MODELED = "not_modeled"  # no what-if for this cause (or none the trace can build): only the ledger's share
    PARTIAL_RANKS = (
        "partial_ranks"  # not every rank of the world is here: waiting for the absent ones cannot be re-timed
    )
    EVENT_WAITS_KEPT = "event_waits_kept"  # waits on other streams' events kept as long as measured
    ONE_CLOCK = "one_clock"  # ranks' arrivals at collectives compared on one clock
    UNMATCHED_COLLECTIVES = "unmatched_collectives"  # collectives not matched across ranks: their waits kept
    CPU_SHARED = "cpu_shared"  # CPU-only: freed host time is not given to the other ranks' threads
    #: CPU-only, the ranks outnumbering their machine's cores: the time a fix frees goes to the
    #: other ranks, which the re-timing cannot give them: the gain is a floor (since 2.9)
    CORES_SHARED = "cores_shared"
    VALUE_NOT_NEEDED = "value_not_needed"  # the synced value is not needed on the host in that step
    FULLY_OVERLAPPED = "fully_overlapped"  # all of the communication hidden: a partial overlap gains less
    EXCESS_SPREAD = "excess_spread"  # the straggler's excess taken evenly from its slow phase
    HOST_THREADS_AS_ONE = "host_threads_as_one"  # a rank's host threads re-timed as one chain


class GainDiff(StrEnum):
    """Why a waste's gain differs from its share by more than the step's noise (since 2.9)."""

    #: gain above share: removing it also removes part of ``other``'s waste (``pct``: the gain the two share)
    ALSO_REMOVES = "also_removes"
    #: gain above share, no other finding's waste explains it: it also hides time the ledger counts
    #: under smaller entries (``pct``: the gain beyond the share)
    HIDES_MORE = "hides_more"
    #: gain below share: the freed time waits on ``other``; only removing both releases it
    #: (``pct``: what removing both gains beyond the two apart)
    WAITS_ON = "waits_on"
    #: a straggler's gain below its share: without its lateness the others wait for the next-latest
    #: rank, ``ns`` later per step than the straggler's arrival was
    NEXT_ARRIVER = "next_arriver"
    #: exposed communication's gain below its share: most of the collectives' time is waiting for
    #: the other ranks to arrive (no rank late systematically, beyond a named straggler), which hiding
    #: the collectives' own time does not remove (``pct``: the share not given back)
    PEER_WAIT = "peer_wait"
    #: gain below share, nothing named: other work on the same path takes the freed time back
    #: (``pct``: the share not given back)
    TAKEN_BACK = "taken_back"


class Effort(StrEnum):
    """What a fix takes: what to do first is ordered by gain per effort (since 2.9)."""

    KNOB = "knob"  # a configuration knob: num_workers, pin_memory, a bucket size
    CODE = "code"  # a change to the training code: CUDA graphs, removing syncs, moving CPU work


class Struct(msgspec.Struct, frozen=True, kw_only=True):
    """Base of the Structs here."""


class GainWhy(Struct, frozen=True, kw_only=True, omit_defaults=True):
    """Why a gain differs from its share, with the figures read off the re-timing (see :class:`GainDiff`)."""

    kind: GainDiff
    #: the other waste involved (``also_removes``, ``waits_on``)
    other: BoundKind | None = None
    #: percent of today's step (see the kind)
    pct: float | None = None
    #: both wastes removed together, re-timed, percent of today's step (``also_removes``, ``waits_on``)
    joint_pct: float | None = None
    #: ``next_arriver``: how much earlier than the straggler the next rank arrives at the collectives
    #: it is last at (mean ns), and the rank that is then last most often; ``peer_wait``: the
    #: mean wait for others' arrivals per collective (ns), and the named straggler whose
    #: collectives are left out of it (None: none named)
    ns: float | None = None
    rank: int | None = None


class Gain(Struct, frozen=True, kw_only=True):
    """What removing one waste is worth (since 2.5; these names since 2.9): the step with it gone,
    as a share of today's step. For compute, every waste removed at once."""

    bound: BoundKind
    #: the mean measured step of the ranks that set the pace, today
    step_ns: float
    #: the waste's share of the ledger on those ranks: what the time is (for compute: every waste's)
    share_pct: float
    #: what removing it is worth: the ranks re-timed along their dependencies with it removed
    #: (None: no what-if models it, or none this trace can build)
    gain_pct: float | None = None
    limits: list[GainLimit] = msgspec.field(default_factory=list)
    #: since 2.9: why ``gain_pct`` differs from ``share_pct`` by more than the step's noise
    why: GainWhy | None = None


class Fix(Struct, frozen=True, kw_only=True):
    """One item of what to do first: a finding's fix, its effort and what it is worth."""

    bound: BoundKind
    effort: Effort
    share_pct: float
    gain_pct: float | None = None
    #: the gain is a floor (:attr:`GainLimit.CORES_SHARED`)
    floor: bool = False


class Joint(Struct, frozen=True, kw_only=True):
    """The first fixes removed together, re-timed: what they are worth at once (never their sum)."""

    bounds: list[BoundKind]
    gain_pct: float
    #: the gain is a floor (:attr:`GainLimit.CORES_SHARED`)
    floor: bool = False
