"""One rank's re-timing under one scenario, in C (``_retime_core.c``)."""

from typing import Any

import numpy as np

class Core:
    def __init__(
        self,
        shape: tuple[np.ndarray, ...],
        scenario: tuple[np.ndarray, ...],
        state: tuple[np.ndarray, ...],
        *,
        hide: bool,
        no_wait: bool,
        track: bool,
        arrived: dict[int, float],
        arrived_src: dict[int, int],
    ) -> None: ...
    def blocks_until(self, t: float, sim: Any, /) -> None: ...
    def stream_until(self, j: int, last: int, sim: Any, /) -> None: ...
    def host_shift_one(self, t: float, sim: Any, /) -> tuple[float, int]: ...
    def collective_arrival(self, k: int, sim: Any, /) -> tuple[float, int, float, int]: ...
    def finish_collective(
        self, k: int, start: float, start_src: int, last: tuple[float, int], last_old: float, /
    ) -> None: ...
    def ensure_free(self, k: int, sim: Any, /) -> None: ...
