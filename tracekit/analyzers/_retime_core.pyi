"""One rank's re-timing under one scenario, in C (``_retime_core.c``)."""

from typing import Any

import numpy as np

class Shape:
    def __init__(self, arrays: tuple[np.ndarray, ...]) -> None: ...

class Core:
    def __init__(
        self,
        shape: Shape,
        scenario: tuple[np.ndarray, ...],
        state: tuple[np.ndarray, ...],
        *,
        hide: bool,
        no_wait: bool,
        track: bool,
        window_end: float,
        device_end: bool,
        tolerance: float,
    ) -> None: ...
    def blocks_until(self, t: float, sim: Any, /) -> None: ...
    def stream_until(self, j: int, last: int, sim: Any, /) -> None: ...
    def host_shift_one(self, t: float, sim: Any, /) -> tuple[float, int]: ...
    def collective_arrival(self, k: int, sim: Any, /) -> tuple[float, int, float, int]: ...
    def finish_collective(
        self, k: int, start: float, start_src: int, last: tuple[float, int], last_old: float, /
    ) -> None: ...
    def ensure_free(self, k: int, sim: Any, /) -> None: ...
    def gained(self, sim: Any, /) -> float: ...

def alone(
    core: Core,
    ids: np.ndarray,
    m_off: np.ndarray,
    m_core: np.ndarray,
    m_task: np.ndarray,
    last_old: np.ndarray,
    given: np.ndarray,
    ev_core: np.ndarray,
    ev_block: np.ndarray,
    i_order: np.ndarray,
    i_t: np.ndarray,
    /,
) -> tuple[float, list[int], list[float], list[int], bool]: ...
def simulate(
    cores: tuple[Core, ...],
    ids: np.ndarray,
    m_off: np.ndarray,
    m_core: np.ndarray,
    m_task: np.ndarray,
    last_old: np.ndarray,
    ev_core: np.ndarray,
    ev_block: np.ndarray,
    i_order: np.ndarray,
    i_t: np.ndarray,
    /,
) -> list[float]: ...
