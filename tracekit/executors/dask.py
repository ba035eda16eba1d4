"""The Dask executor: the workers of a ``distributed`` cluster (``pip install 'torch-tracekit[dask]'``).

``DaskExecutor()`` starts a local cluster of one single-threaded worker process per core;
``DaskExecutor("tcp://host:8786")`` connects to a running scheduler, whose workers must see
the files at the same paths (shared storage) and have tracekit installed. A task whose workers
died (Dask retries it on others, then gives up), or no result for ``idle_timeout`` seconds, or
a cluster left without workers, gives a :class:`~tracekit.executors.TaskFailed` for the items
still out, never a wait without end.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import time
import traceback
from typing import TYPE_CHECKING, Any, Final, TypeVar
from urllib.parse import urlsplit

from tracekit.errors import DISTRIBUTION, ExecutorError
from tracekit.executors import TaskFailed

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence

T = TypeVar("T")
R = TypeVar("R")

#: What a missing ``distributed`` is told.
INSTALL: Final = f"--executor dask needs distributed: pip install '{DISTRIBUTION}[dask]'"
#: The communication protocols of Dask's addresses.
SCHEMES: Final = ("tcp", "tls", "inproc", "ucx", "ws", "wss")
#: How often the client looks at the cluster while it waits for results (s).
POLL_S: Final = 2.0
#: How long a server at a ``tcp://`` address may take to send its first bytes (s): a Dask
#: server sends its handshake at once on accepting a connection.
HANDSHAKE_S: Final = 10.0


class DaskExecutor:
    """Items run as tasks on a Dask cluster: one at ``scheduler``, else a local one of ``workers``.

    ``connect_timeout``: how long to wait for the scheduler, and for a first worker, and how
    long a cluster may have no worker before the items left fail; ``idle_timeout``: how long
    without any result before the items left fail. ``single_use``: for one analysis, whose local
    cluster stops once its map is done (:meth:`rest`).
    """

    name = "dask"

    def __init__(
        self,
        scheduler: str | None = None,
        *,
        workers: int | None = None,
        connect_timeout: float = 60.0,
        idle_timeout: float = 3600.0,
        single_use: bool = False,
    ) -> None:
        if scheduler is not None:
            check_address(scheduler)
        distributed = _distributed()
        self.connect_timeout = connect_timeout
        self.idle_timeout = idle_timeout
        self.single_use = single_use
        #: the workers' threads when the executor rested (its cluster stopped), else None
        self._rested: int | None = None
        self._cluster: Any = None
        if scheduler is None:
            with _dask_config().set({_SPAWN_ENVIRON: _worker_environ()}):
                self._cluster = distributed.LocalCluster(
                    n_workers=workers or os.cpu_count() or 1,
                    threads_per_worker=1,
                    processes=True,
                    dashboard_address=":0",  # any free port: never a clash with a cluster already running
                    silence_logs=logging.ERROR,
                )
            self.address = str(self._cluster.scheduler_address)
            self._client: Any = distributed.Client(self._cluster, set_as_default=False)
        else:
            self.address = scheduler
            _reachable(scheduler, connect_timeout)
            try:
                self._client = distributed.Client(scheduler, timeout=connect_timeout, set_as_default=False)
            except Exception as exc:
                reason = _first_line(exc)
                _drop_failed_client(exc, distributed.Client)
                raise ExecutorError(f"cannot connect to the Dask scheduler at {scheduler} ({reason})") from None
        try:
            self._client.wait_for_workers(1, timeout=connect_timeout)
        except TimeoutError:
            self.close()
            raise ExecutorError(
                f"no Dask worker joined the scheduler at {self.address} within {connect_timeout:g} s"
            ) from None

    @property
    def workers(self) -> int:
        """The threads of the cluster's workers: how many tasks run at once (as they were, once
        the executor rested)."""
        if self._rested is not None:
            return self._rested
        threads: dict[str, int] = self._client.nthreads()
        return max(1, sum(threads.values()))

    @property
    def elsewhere(self) -> bool:
        """Whether the cluster is one this executor connected to (at ``scheduler``), not a local
        cluster it started on this machine's cores."""
        return self._cluster is None

    def map(self, fn: Callable[[T], R], items: Sequence[T]) -> Iterator[tuple[int, R | TaskFailed]]:
        """``fn`` over ``items`` on the cluster, each result with its item's index as it completes."""
        if self._rested is not None:  # its local cluster is stopped: nothing runs there any more
            for i in range(len(items)):
                yield i, TaskFailed("the Dask executor's local cluster was stopped after its map")
            return
        wait = _distributed().wait
        futures = self._client.map(fn, list(items), pure=False)
        index = {future.key: i for i, future in enumerate(futures)}
        pending = set(futures)
        del futures  # each result leaves its worker's memory once here (1,024 ranks: 100 MB a worker)
        last_result = no_workers_since = time.monotonic()
        try:
            while pending:
                try:
                    with self._client.as_current():  # wait() looks for the current client
                        done, pending = wait(list(pending), timeout=POLL_S, return_when="FIRST_COMPLETED")
                except TimeoutError:
                    now = time.monotonic()
                    if self._client.nthreads():
                        no_workers_since = now
                    reason = self._stalled(now - last_result, now - no_workers_since)
                    if reason is not None:
                        for future in pending:
                            yield index[future.key], TaskFailed(reason)
                        return
                    continue
                last_result = time.monotonic()
                for future in done:
                    result = _outcome(future)
                    future.release()
                    yield index[future.key], result
        finally:
            self._client.cancel(list(pending))

    def hold(self, items: Sequence[T]) -> list[Any]:
        """Each item sent to a worker once and kept there: a future per item, which the items of
        :meth:`map` may hold (the worker's task gets the item, the same object each time)."""
        return list(self._client.scatter(list(items), hash=False))

    def keep(self, fn: Callable[[T], R], items: Sequence[Any]) -> list[Any]:
        """A future per item, its result left on the worker that ran it (Dask runs a task where
        the futures its item holds are, and runs it again elsewhere if that worker is lost)."""
        return list(self._client.map(fn, list(items), pure=False))

    def places(self, handles: Sequence[Any]) -> list[str | None]:
        """The worker that holds each future's result (the first, where several do), waiting
        for them :data:`POLL_S` at most; None where none does: lost, failed or not done (a
        cluster whose workers are gone fails where the handles are used, not here)."""
        if not handles:
            return []
        with self._client.as_current(), contextlib.suppress(TimeoutError):  # wait() looks for the current client
            _distributed().wait(list(handles), timeout=POLL_S)
        who: dict[Any, Any] = self._client.who_has(list(handles))
        return [min(found) if (found := who.get(h.key)) else None for h in handles]

    def rest(self) -> None:
        """Stop the local cluster of a single-use executor: its map is done, and its workers
        keep what they touched (1,024 ranks x 3 MB: 220 MB each) while the ranks are combined.
        A cluster at ``scheduler`` keeps its workers: the reduce may run more there."""
        if self.single_use and self._cluster is not None and self._rested is None:
            workers = self.workers
            self.close()
            self._rested = workers

    def _stalled(self, idle_s: float, workerless_s: float) -> str | None:
        """Why the items still out will not complete, if they will not."""
        if workerless_s > self.connect_timeout:
            return f"the Dask cluster at {self.address} has had no worker for {self.connect_timeout:g} s"
        if idle_s > self.idle_timeout:
            return f"no result from the Dask cluster at {self.address} within {self.idle_timeout:g} s"
        return None

    def close(self) -> None:
        """Disconnect; stop the local cluster if this executor started one."""
        if self._rested is not None:
            return
        self._client.close()
        if self._cluster is not None:
            self._cluster.close()


#: The configuration of what a Dask nanny puts in its worker's environment before it starts it.
_SPAWN_ENVIRON: Final = "distributed.nanny.pre-spawn-environ"
#: What the workers of tracekit's own cluster are started without. Dask sets glibc's
#: ``MALLOC_TRIM_THRESHOLD_`` to 64 KiB, which gives the heap's free top back to the system
#: after almost every free: the frames of a rank's chunks, freed and allocated again, were
#: faulted in anew each time (100 ranks of 3 MB read in a worker: 486k page faults and 1.56 s
#: of system time, against 409 and 0.22 s without it, 3.55 against 2.41 s of wall).
_NOT_IN_WORKERS: Final = ("MALLOC_TRIM_THRESHOLD_",)


def _worker_environ() -> dict[str, object]:
    """The environment Dask's configuration gives a nanny's worker, less :data:`_NOT_IN_WORKERS`."""
    environ = _dask_config().get(_SPAWN_ENVIRON, default={}) or {}
    return {k: v for k, v in dict(environ).items() if k not in _NOT_IN_WORKERS}


def _dask_config() -> Any:
    """``dask.config`` (imported with ``distributed``)."""
    import dask.config  # noqa: PLC0415  (the dask extra: imported when a cluster is made)

    return dask.config


def check_address(address: str) -> None:
    """Refuse ``address`` unless it reads as a Dask scheduler's: ``SCHEME://HOST:PORT`` (or
    ``HOST:PORT``, which Dask reads as tcp) with a scheme of :data:`SCHEMES`, a host and a port
    (``inproc://`` addresses name a process, not a port); checked before any connection."""
    scheme, sep, rest = address.partition("://")
    if not sep:
        scheme, rest = "tcp", address
    why = None
    if scheme not in SCHEMES:
        why = f"the scheme {scheme!r} is none of {', '.join(SCHEMES)}"
    elif any(c.isspace() for c in address) or not rest:
        why = "it holds white space" if rest else "it names no host"
    elif scheme != "inproc":
        why = _host_port_problem(scheme, rest)
    if why is not None:
        raise ExecutorError(f"--scheduler {address!r}: not a Dask scheduler address ({why}; e.g. tcp://host:8786)")


def _host_port_problem(scheme: str, rest: str) -> str | None:
    """What is wrong with the ``HOST:PORT`` part of an address, if anything."""
    try:
        parts = urlsplit(f"{scheme}://{rest}")
        port = parts.port
    except ValueError:
        return "its port is not a number from 1 to 65535"
    if parts.path not in ("", "/") or parts.query or parts.fragment or parts.username is not None:
        return "it holds more than a host and a port"
    if not parts.hostname:
        return "it names no host"
    if port is None or port == 0:
        return "it names no port"
    return None


def _reachable(address: str, timeout: float) -> None:
    """Open (and close) a TCP connection to ``address``'s host and port, at most ``timeout``
    seconds: a host that is not there fails here, in one line, before Dask's client starts.

    Over plain ``tcp``, a Dask server writes its handshake as soon as it accepts a connection,
    before it reads anything; Dask's client reads it with no time limit (neither
    ``Client(timeout=...)`` nor ``distributed.comm.timeouts.connect`` bounds that read), so a port
    held by another server (an HTTP server waits for a request) hung it. Here the first bytes
    must come within :data:`HANDSHAKE_S` (or ``timeout`` when shorter), else one line says so."""
    scheme, sep, rest = address.partition("://")
    if not sep:
        scheme, rest = "tcp", address
    if scheme not in ("tcp", "tls", "ws", "wss"):
        return
    parts = urlsplit(f"{scheme}://{rest}")
    try:
        with socket.create_connection((parts.hostname or "", parts.port or 0), timeout=timeout) as sock:
            if scheme == "tcp":
                _handshake(sock, address, min(timeout, HANDSHAKE_S))
    except OSError as exc:
        reason = "timed out" if isinstance(exc, TimeoutError) else (exc.strerror or str(exc))
        raise ExecutorError(
            f"cannot connect to the Dask scheduler at {address} ({reason}, within {timeout:g} s)"
        ) from None


def _handshake(sock: socket.socket, address: str, wait_s: float) -> None:
    """Wait at most ``wait_s`` for the first bytes a Dask server sends on a new connection."""
    sock.settimeout(wait_s)
    try:
        first = sock.recv(1)
    except TimeoutError:
        first = None
    if not first:
        what = "closed the connection" if first == b"" else f"sent nothing within {wait_s:g} s"
        raise ExecutorError(
            f"cannot connect to the Dask scheduler at {address} (the server there {what}: "
            "no Dask handshake; is another program on that port?)"
        )


def _drop_failed_client(exc: BaseException, client_type: type) -> None:
    """Mark the half-made client of a failed ``Client(...)`` closed: otherwise its ``__del__``
    waits twice the connect timeout for a connection that never was, then prints a traceback."""
    for frame, _ in traceback.walk_tb(exc.__traceback__):
        client: Any = frame.f_locals.get("self")
        if isinstance(client, client_type):
            with contextlib.suppress(Exception):
                getattr(client, "_loop_runner").stop()  # noqa: B009  (private to distributed: not typed)
            setattr(client, "status", "closed")  # noqa: B010


def _distributed() -> Any:
    """The ``distributed`` module (untyped, optional)."""
    try:
        import distributed  # noqa: PLC0415
    except ImportError:
        raise ExecutorError(INSTALL) from None
    return distributed


def _outcome(future: Any) -> Any:
    """A finished future's result, or why it has none."""
    if future.status == "finished":
        return future.result()
    if future.status == "error":
        exc = future.exception()
        if type(exc).__name__ == "KilledWorker":
            return TaskFailed("every Dask worker that ran it died (KilledWorker)")
        return TaskFailed(f"failed on a Dask worker ({type(exc).__name__}: {_first_line(exc)})")
    return TaskFailed(f"the Dask task was {future.status}")


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0][:200] if lines else "no message"
