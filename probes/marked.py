"""Records made of marked runs (the cap-spread and run-level probes): the raw series they share.

Each such probe starts a worker's products several times after a pause and polls the counter
through each run while the worker marks when each chunk of products ended
(:func:`nvmeter.probes.schedule.marked_load`). Its record keeps the context idle span, per run
the counter's reads around each step and the job with its marks, and the board's states.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from nvmeter import errors
from nvmeter.boards.protocol import BoardState
from nvmeter.meter.series import CounterSeries, Step
from nvmeter.meter.span import AlignedSpan
from nvmeter.worker.protocol import CHUNK, DTYPES, MarkedRun, job_run


@dataclass(frozen=True)
class MarkedRecord:
    """The context idle, and for each start the counter's steps, the job and the board's states.

    Attributes:
        idle: The context idle span (the energy above idle is above it).
        counters: Per start, the counter reads either side of each step seen while polling.
        runs: Per start, the job, with when each chunk of products ended.
        states: The board's state read about once a second through every poll.

    """

    idle: AlignedSpan
    counters: tuple[CounterSeries, ...]
    runs: tuple[MarkedRun, ...]
    states: tuple[BoardState, ...]

    # the load as an error message names it
    LOAD: ClassVar[str] = "the load"

    def __post_init__(self) -> None:
        if not self.runs or len(self.runs) != len(self.counters):
            raise errors.RecordError(f"{self.LOAD} needs one counter series for each of its runs")
        for run in self.runs:
            check_marks(run, self.LOAD)

    def to_dict(self) -> dict:
        """Raw JSON form."""
        return {
            "idle": self.idle.to_dict(),
            "counters": [c.to_dict() for c in self.counters],
            "runs": [
                {**run.__dict__, "mark_t_s": list(run.mark_t_s), "mark_products": list(run.mark_products)}
                for run in self.runs
            ],
            "states": [s.to_dict() for s in self.states],
        }

    @functools.cached_property
    def marked_steps(self) -> tuple[list[Step], ...]:
        """Per run, each counter step between its first and last mark: found once a run."""
        found = []
        for counter, run in zip(self.counters, self.runs, strict=True):
            steps, lo, hi = counter.steps, run.mark_t_s[0], run.mark_t_s[-1]
            found.append(
                [
                    Step(float(t), float(e), float(hw))
                    for t, e, hw in zip(steps.t_s, steps.energy_mj, steps.half_width_s, strict=True)
                    if lo <= t <= hi
                ]
            )
        return tuple(found)

    def state_share(self, flag: Callable[[BoardState], bool]) -> float:
        """Share of the state reads for which ``flag`` holds (nan with none)."""
        flags = [flag(s) for s in self.states]
        return sum(flags) / len(flags) if flags else math.nan

    def products_at(self, i: int, t_s) -> np.ndarray:
        """Products run ``i`` had done by each time of ``t_s`` (s), from its marks: linear within a chunk."""
        run = self.runs[i]
        t_marks = np.concatenate([[run.t0_s], run.mark_t_s])
        n_marks = np.concatenate([[0], run.mark_products])
        return np.interp(np.asarray(t_s, dtype=float), t_marks, n_marks)

    @classmethod
    def from_dict(cls, data: dict):
        """Inverse of :meth:`to_dict`."""
        return cls(
            AlignedSpan.from_dict(data["idle"]),
            tuple(CounterSeries.from_dict(c) for c in data["counters"]),
            tuple(job_run(r) for r in data["runs"]),
            tuple(BoardState.from_dict(s) for s in data["states"]),
        )


def check_marks(run, what: str) -> None:
    """Refuse a load whose marks no worker writes (they decide every block's products).

    Raises:
        RecordError: not a marked run of fp32 or bf16 products; marks empty, of unequal length,
            not finite, not rising, outside the run; products not whole, not rising by at most a
            chunk, or not ending at the run's products.
    """
    if not isinstance(run, MarkedRun) or run.dtype not in DTYPES:
        raise errors.RecordError(f"{what} is not a marked run of {'/'.join(DTYPES)} products")
    t, n = np.asarray(run.mark_t_s, dtype=float), np.asarray(run.mark_products)
    fine = (
        len(t) > 1
        and len(t) == len(n)
        and np.isfinite(t).all()
        and (np.diff(t) > 0).all()
        and run.t0_s <= t[0]
        and t[-1] <= run.t1_s
        and (np.diff(n) > 0).all()
        and (np.diff(n) <= CHUNK).all()
        and 0 < n[0] <= CHUNK
        and n[-1] == run.matmuls
    )
    if not fine:
        raise errors.RecordError(
            f"{what}'s marks are not a worker's: each chunk's end must be finite, rising "
            f"and inside the run, its products whole, rising by at most {CHUNK} and ending at the "
            f"run's {run.matmuls}"
        )
