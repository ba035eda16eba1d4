"""Reference workloads and the workload protocol.

A workload factory is called as ``factory(ctx, **workload_args)`` with a
:class:`WorkloadContext` and returns a :class:`Workload`. ``"package.module:function"``
names a user's factory; ``mlp`` and ``transformer`` are built in, each with knobs that
inject a real bottleneck:

* ``loader_delay_ms``: every ``__getitem__`` sleeps (data-bound);
* ``loader_in_step``: each of those sleeps ends on a tick of one clock every worker reads (a
  multiple of ``loader_delay_ms`` on the monotonic clock), so identical workers stay in step as
  they do on an idle machine; plain sleeps each wake late by a random amount on a loaded one, and
  two workers drift apart by the sum (the fetch pattern of workers in step is then not the run's);
* ``straggler_rank`` + ``straggler_delay_ms``: that rank's forward sleeps (a straggler);
* ``comm_heavy``: many parameters and little compute (comms-bound): the ``mlp`` gets
  ~21.5M parameters (6 layers of 2048), the ``transformer`` a 32k vocabulary;
* ``host_sync``: a ``.item()`` inside every forward (sync-bound);
* ``sync_check``: a per-step sanity check inside forward, as a pull request adds one: two
  small max reductions over the output (``amax`` and ``abs().amax()``) and
  ``bool(torch.isinf(maxes).any())``, one device-to-host read of one byte per forward that
  blocks the host until the GPU has caught up (on CPU it shows as ``aten::is_nonzero`` /
  ``aten::item`` / ``aten::_local_scalar_dense`` in the forward phase);
* ``forward_delay_ms``: every rank's forward sleeps that long (a uniformly slower forward,
  for checking that a comparison finds it);
* ``forward_work_ms``: every rank's forward spins on the CPU until its thread has used that much
  CPU time: added work, as a change that adds compute makes it. On a machine whose cores are all
  busy (ranks on CPU beside other processes) a sleep is not a slower step: while one rank sleeps
  the others use its core, and a 5.5 ms sleep in every forward made a 34 ms step 1.1 ms slower
  there; added work is slower whatever else runs;
* ``unused_head``: an auxiliary head (``aux_head``, a Linear with weight and bias) that
  forward never calls: its parameters get no gradient, which ``tracekit audit-params`` finds
  and DDP refuses unless ``find_unused_parameters`` is true;
* ``optimizer``: ``adamw`` (default) or ``sgd``. AdamW's step reads and writes four
  parameter-sized tensors and makes temporaries: on a gradient-heavy model with a tiny batch
  it costs more than forward and backward together. Plain SGD (one ``add_`` per parameter)
  leaves the gradient all-reduce as the step's main cost.
"""

from __future__ import annotations

import importlib
import os
import sys
import time
import traceback
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tracekit.errors import InputError, TracekitError

if TYPE_CHECKING:
    from collections.abc import Callable


@dataclass(frozen=True)
class WorkloadContext:
    """What a factory may need to know about the rank it builds for."""

    rank: int
    world_size: int
    batch_size: int
    seed: int
    learning_rate: float


@dataclass
class Workload:
    """A model, its optimizer, data and loss. Give ``dataset`` (tracekit builds the
    DataLoader from the config's DataLoader knobs) or a ready ``dataloader``."""

    model: Any
    optimizer: Any
    loss_fn: Callable[[Any, Any], Any]
    dataset: Any = None
    dataloader: Any = None
    scheduler: Any = None


class _SyntheticDataset:
    """Deterministic random (input, target) pairs; optionally slow."""

    def __init__(
        self, size: int, make: Callable[[int], tuple[Any, Any]], delay_ms: float = 0.0, *, in_step: bool = False
    ) -> None:
        self.size, self.make, self.delay_s, self.in_step = size, make, delay_ms / 1000.0, in_step

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: int) -> tuple[Any, Any]:
        if self.delay_s:
            time.sleep(tick_sleep(time.monotonic(), self.delay_s) if self.in_step else self.delay_s)
        return self.make(index)


def tick_sleep(now: float, tick: float) -> float:
    """How long to sleep from ``now`` to end on the tick (a multiple of ``tick``) nearest one
    ``tick`` later: exactly ``tick`` when ``now`` is a tick woken late by less than half of one,
    so back-to-back sleeps keep to the ticks instead of adding up their lateness."""
    return round(now / tick + 1) * tick - now


@dataclass(frozen=True)
class Faults:
    """The knobs every built-in workload takes (``workload_args`` beside its own shape), each
    injecting a real bottleneck: see the module's list. An unknown one is a TypeError naming it."""

    loader_delay_ms: float = 0.0
    loader_in_step: bool = False
    straggler_rank: int | None = None
    straggler_delay_ms: float = 0.0
    comm_heavy: bool = False
    host_sync: bool = False
    sync_check: bool = False
    forward_delay_ms: float = 0.0
    forward_work_ms: float = 0.0
    optimizer: str = "adamw"
    unused_head: bool = False

    @classmethod
    def of(cls, factory: str, given: dict[str, Any]) -> Faults:
        """The faults of ``given``; a key that is neither the factory's nor a fault's is refused."""
        unknown = sorted(set(given) - {f.name for f in fields(cls)})
        if unknown:
            raise TypeError(f"{factory}() got an unexpected keyword argument {unknown[0]!r}")
        return cls(**given)


def _wrap(model: Any, ctx: WorkloadContext, faults: Faults, *, unused_head: tuple[int, int] | None = None) -> Any:
    import torch

    host_sync, sync_check = faults.host_sync, faults.sync_check
    delay_s = faults.forward_delay_ms / 1000.0
    work_s = faults.forward_work_ms / 1000.0
    if faults.straggler_rank is not None and ctx.rank == faults.straggler_rank:
        delay_s += faults.straggler_delay_ms / 1000.0

    class Injected(torch.nn.Module):
        def __init__(self, inner: Any) -> None:
            super().__init__()
            self.inner = inner
            self.nonfinite_steps = 0  # what sync_check found (never, on these workloads)
            if unused_head is not None:  # never called in forward: its parameters get no gradient
                self.aux_head = torch.nn.Linear(*unused_head)

        def forward(self, x: Any) -> Any:
            if delay_s > 0:
                time.sleep(delay_s)
            if work_s > 0:
                _spin(work_s)
            out = self.inner(x)
            if host_sync:
                out.detach().float().abs().mean().item()  # a device-to-host sync every step
            if sync_check:  # an overflow guard: one 1-byte device-to-host read per forward
                detached = out.detach()
                maxes = torch.stack([detached.amax(), detached.abs().amax()])
                if bool(torch.isinf(maxes).any()):
                    self.nonfinite_steps += 1
            return out

    return Injected(model)


def _spin(seconds: float) -> None:
    """Keep this thread on the CPU until it has used ``seconds`` of CPU time (not wall time:
    a thread that waits for a core does no work meanwhile)."""
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def mlp(
    ctx: WorkloadContext,
    *,
    in_features: int = 256,
    hidden: int = 512,
    depth: int = 3,
    classes: int = 10,
    samples: int = 4096,
    **faults: Any,
) -> Workload:
    """A small MLP classifier on synthetic data (``faults``: :class:`Faults`)."""
    import torch

    f = Faults.of("mlp", faults)
    torch.manual_seed(ctx.seed)
    if f.comm_heavy:  # ~25M parameters of cheap layers: gradients dwarf the compute
        hidden, depth = 2048, 6
    layers: list[Any] = []
    width = in_features
    for _ in range(depth):
        layers += [torch.nn.Linear(width, hidden), torch.nn.ReLU()]
        width = hidden
    layers.append(torch.nn.Linear(width, classes))
    model = _wrap(torch.nn.Sequential(*layers), ctx, f, unused_head=(width, classes) if f.unused_head else None)

    def make(i: int) -> tuple[Any, Any]:
        g = torch.Generator().manual_seed(ctx.seed * 100_003 + i)
        return torch.randn(in_features, generator=g), torch.randint(0, classes, (), generator=g)

    return Workload(
        model=model,
        optimizer=_optimizer(f.optimizer, model, ctx.learning_rate),
        loss_fn=torch.nn.functional.cross_entropy,
        dataset=_SyntheticDataset(samples, make, f.loader_delay_ms, in_step=f.loader_in_step),
    )


def transformer(
    ctx: WorkloadContext,
    *,
    vocab: int = 1024,
    d_model: int = 128,
    heads: int = 4,
    layers: int = 2,
    seq_len: int = 64,
    samples: int = 2048,
    **faults: Any,
) -> Workload:
    """A small causal transformer language model on synthetic tokens (``faults``: :class:`Faults`)."""
    import torch

    f = Faults.of("transformer", faults)
    torch.manual_seed(ctx.seed)
    if f.comm_heavy:
        vocab = 32768  # a large embedding and head: many parameters, little compute

    class TinyLM(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = torch.nn.Embedding(vocab, d_model)
            block = torch.nn.TransformerEncoderLayer(d_model, heads, 4 * d_model, batch_first=True, dropout=0.0)
            self.blocks = torch.nn.TransformerEncoder(block, layers)
            self.head = torch.nn.Linear(d_model, vocab)
            self.register_buffer(
                "mask", torch.nn.Transformer.generate_square_subsequent_mask(seq_len), persistent=False
            )

        def forward(self, tokens: Any) -> Any:
            hidden = self.blocks(self.embed(tokens), mask=self.mask, is_causal=True)
            return self.head(hidden)

    model = _wrap(TinyLM(), ctx, f, unused_head=(d_model, vocab) if f.unused_head else None)

    def make(i: int) -> tuple[Any, Any]:
        g = torch.Generator().manual_seed(ctx.seed * 100_003 + i)
        tokens = torch.randint(0, vocab, (seq_len + 1,), generator=g)
        return tokens[:-1], tokens[1:]

    def loss_fn(logits: Any, targets: Any) -> Any:
        return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))

    return Workload(
        model=model,
        optimizer=_optimizer(f.optimizer, model, ctx.learning_rate),
        loss_fn=loss_fn,
        dataset=_SyntheticDataset(samples, make, f.loader_delay_ms, in_step=f.loader_in_step),
    )


OPTIMIZERS = ("adamw", "sgd")


def _optimizer(name: str, model: Any, learning_rate: float) -> Any:
    import torch

    if name == "adamw":
        return torch.optim.AdamW(model.parameters(), lr=learning_rate)
    if name == "sgd":
        return torch.optim.SGD(model.parameters(), lr=learning_rate)
    raise InputError(f"optimizer {name!r} is not one of {', '.join(OPTIMIZERS)}")


BUILTIN: dict[str, Callable[..., Workload]] = {"mlp": mlp, "transformer": transformer}


def _is_file(module: str) -> bool:
    """Whether a workload's module part names a file (``path/to/train.py``), not a module."""
    return module.endswith(".py") or "/" in module or os.sep in module


def names_file(spec: str) -> bool:
    """Whether the workload ``spec`` is ``path/to/file.py:function``."""
    module, sep, _ = spec.rpartition(":")
    return bool(sep) and bool(module) and spec not in BUILTIN and _is_file(module)


def workload_folder(spec: str) -> str | None:
    """The folder the module of ``spec`` is imported from, where it is not an installed module:
    a file's folder (``path/to/train.py:make``), the current folder for ``module:fn`` (where the
    command stands, as ``python -m`` would look); None for a built-in workload. The ranks get it
    on their ``PYTHONPATH`` (:func:`~tracekit.capture.launcher.rank_env`)."""
    module, sep, _ = spec.rpartition(":")
    if spec in BUILTIN or not sep or not module:
        return None
    if _is_file(module):
        return str(Path(module).expanduser().resolve().parent)
    return str(Path.cwd())


def resolve(spec: str) -> Callable[..., Workload]:
    """The factory named by ``spec``: a built-in name, ``package.module:function`` (an installed
    module, or one in the current folder) or ``path/to/file.py:function``."""
    if spec in BUILTIN:
        return BUILTIN[spec]
    module_name, sep, attr = spec.rpartition(":")
    if not sep or not module_name or not attr:
        known = ", ".join(sorted(BUILTIN))
        raise InputError(
            f"workload {spec!r} is neither built in ({known}) nor 'package.module:function' "
            "nor 'path/to/file.py:function'"
        )
    folder = workload_folder(spec)
    if _is_file(module_name):
        path = Path(module_name).expanduser()
        if not path.is_file():
            raise InputError(f"workload {spec!r}: no such file {path}")
        if path.suffix != ".py" or not path.stem.isidentifier():
            raise InputError(f"workload {spec!r}: {path.name} is not a Python module's file (name.py)")
        module_name = path.stem
        if folder is not None and folder not in sys.path:
            sys.path.insert(0, folder)  # the file named wins over a module of the same name
    elif folder is not None and folder not in sys.path and "" not in sys.path:
        sys.path.append(folder)  # after installed modules: a local folder does not shadow them
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise InputError(f"workload {spec!r}: cannot import {module_name} ({exc})") from None
    except TracekitError:  # the command's timeout (tracekit.capture.deadline), not the module's error
        raise
    except SyntaxError as exc:  # the module's own syntax: name the line
        where = f"{exc.filename}, line {exc.lineno}" if exc.filename else "?"
        raise InputError(f"workload {spec!r}: {module_name} has a syntax error ({exc.msg}; {where})") from None
    except (Exception, SystemExit) as exc:  # raised while the module ran its top level
        raise InputError(
            f"workload {spec!r}: importing {module_name} raised {type(exc).__name__}: {exc}{_import_site(exc)}"
        ) from None
    factory = getattr(module, attr, None)
    if not callable(factory):
        raise InputError(f"workload {spec!r}: {module_name} has no callable {attr}")
    return factory  # type: ignore[no-any-return]


def _import_site(exc: BaseException) -> str:
    """`` (file, line N)``: the line of the imported module whose top level raised (the first
    frame past this function and importlib's own)."""
    machinery = str(Path(importlib.__file__ or "").parent) + os.sep
    for frame in traceback.extract_tb(exc.__traceback__):
        name = frame.filename
        if name != __file__ and not name.startswith(("<", machinery)):
            return f" ({frame.filename}, line {frame.lineno})"
    return ""
