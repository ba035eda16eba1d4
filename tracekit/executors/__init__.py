"""Where the per-rank map runs: one interface, and its implementations by name.

An :class:`Executor` runs one picklable function over a list of items (for ``tracekit
analyze``: shards of trace files, each read and analyzed per rank into a small summary) and
hands each result back as it comes, with the index of its item. What runs the function is the
executor's business: this process or a pool of local processes (``local``), the workers of a
Dask cluster (``dask``). Nothing else in tracekit knows which one ran it, so another backend
(Ray, say) is one module with a class of this shape and one line in :data:`EXECUTORS`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from tracekit.errors import InputError

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence

T = TypeVar("T")
R = TypeVar("R")


@dataclass(frozen=True)
class TaskFailed:
    """What an item gives when the machinery failed to run it (a worker died, nothing came
    back in time), in one line. Errors of the function itself are its own results."""

    reason: str


class Executor(Protocol):
    """Runs a function over items somewhere: in this process, local processes, a cluster."""

    #: how the executor is named on the command line (``--executor``)
    name: str

    @property
    def workers(self) -> int:
        """How many items run at once (to size the work into enough pieces)."""
        ...

    @property
    def elsewhere(self) -> bool:
        """Whether the workers run on other machines than this one (a running cluster's): work
        sent there takes none of this machine's cores."""
        ...

    def map(self, fn: Callable[[T], R], items: Sequence[T]) -> Iterator[tuple[int, R | TaskFailed]]:
        """``fn`` over ``items``: each result with its item's index, as it completes.

        ``fn`` and the items must pickle (a module-level function, plain data). Every item
        gives exactly one result, a :class:`TaskFailed` when it could not be run.
        """
        ...

    def hold(self, items: Sequence[T]) -> list[Any]:
        """Each item placed where ``map`` runs, once, for several maps to use: a handle per item
        that ``map``'s items may hold in its place (a Dask future; here, the item itself). An
        item held is the same object from one map to the next where the executor keeps it."""
        ...

    def keep(self, fn: Callable[[T], R], items: Sequence[Any]) -> list[Any]:
        """``fn`` over ``items`` where ``map`` runs, each result kept there: a handle per item, as
        :meth:`hold` gives (a Dask future, the result left on its worker; here, the result), that
        ``map``'s and ``keep``'s items may hold in its place. An item may hold handles: ``fn``
        gets what they stand for (on a cluster, run where that is). A failure shows where a
        handle is used: that item's result is a :class:`TaskFailed`."""
        ...

    def places(self, handles: Sequence[Any]) -> list[str | None]:
        """Where each handle of :meth:`hold` or :meth:`keep` is kept: one name for the handles
        kept in one worker's memory (an item holding them all runs there, nothing moved), None
        where that is not known (here: every handle; the processes keep nothing)."""
        ...

    def rest(self) -> None:
        """An analysis's map is done: release what would wait idle for another (a single-use
        local pool's processes and the memory they keep: a later map starts them again). A
        cluster keeps its workers: the reduce may run more there."""
        ...

    def close(self) -> None:
        """Release what the executor started (processes, a local cluster)."""
        ...


def _local(*, jobs: int | None, scheduler: str | None, single_use: bool) -> Executor:
    from tracekit.executors.local import LocalExecutor  # noqa: PLC0415

    if scheduler is not None:
        raise InputError("--scheduler needs --executor dask")
    return LocalExecutor(jobs=jobs, single_use=single_use)


def _dask(*, jobs: int | None, scheduler: str | None, single_use: bool) -> Executor:
    from tracekit.executors.dask import DaskExecutor  # noqa: PLC0415

    return DaskExecutor(scheduler=scheduler, workers=jobs, single_use=single_use)


#: The executors by name: a factory of (jobs, scheduler address, single use) each.
EXECUTORS: dict[str, Callable[..., Executor]] = {"local": _local, "dask": _dask}


def make_executor(
    name: str, *, jobs: int | None = None, scheduler: str | None = None, single_use: bool = False
) -> Executor:
    """The executor called ``name``: ``local`` (``jobs`` processes, default: the cores) or ``dask``
    (a cluster at ``scheduler``, else a local cluster of ``jobs`` workers). ``single_use``: for
    one analysis, which may release its local processes once its map is done (:meth:`Executor.rest`).

    Raises :class:`~tracekit.errors.InputError` for an unknown name, a missing optional
    dependency or a scheduler that cannot be reached.
    """
    factory = EXECUTORS.get(name)
    if factory is None:
        raise InputError(f"unknown executor {name!r} (one of: {', '.join(EXECUTORS)})")
    return factory(jobs=jobs, scheduler=scheduler, single_use=single_use)


__all__ = ["EXECUTORS", "Executor", "TaskFailed", "make_executor"]
