"""``nvmeter check``: is this board's J/TFLOP reference inside its family's band?"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from nvmeter.boards.protocol import BoardIdentity
from nvmeter.probes.bands import BANDS, Band, band_for
from nvmeter.probes.reference import Trial


class Verdict(enum.Enum):
    """The outcome; the CLI exits 1 on FAIL only (README, "Exit codes")."""

    PASS = "pass"
    FAIL = "fail"
    NO_BAND = "no band known"


@dataclass(frozen=True)
class CheckResult:
    """The reference trial (constant operands), the band used, and the verdict.

    Attributes:
        board: The board checked.
        trial: The constant-operand reference trial.
        band: The band applied, or None where no band is known.
        reasons: Why it failed (empty on a pass).

    """

    board: BoardIdentity
    trial: Trial
    band: Band | None
    reasons: tuple[str, ...]

    @property
    def verdict(self) -> Verdict:
        """PASS, FAIL, or NO_BAND."""
        if self.reasons:
            return Verdict.FAIL
        return Verdict.NO_BAND if self.band is None else Verdict.PASS

    def __repr__(self) -> str:
        t = self.trial
        return (
            f"{self.verdict.name}: {t.j_per_tflop:.2f} J/TFLOP at {t.tflops:.1f} TFLOP/s "
            f"({self.board.short}; band {self.band.describe() if self.band else 'none known'})"
        )


def trial_problems(trial: Trial) -> tuple[str, ...]:
    """Why a reference trial cannot be judged against any band (empty if it can).

    The products must be exact (true FP32; an unchecked trial, ``exact`` None, passes here) and
    every span must have seen a counter step at both edges.
    """
    problems = []
    if trial.exact is False:
        problems.append(f"the product was not exact (max |C-1| = {trial.run.max_abs_err:g}): not true FP32")
    if not (trial.idle_before.aligned and trial.load.aligned and trial.idle_after.aligned):
        problems.append("a span saw no counter step at an edge")
    return tuple(problems)


def check(board: BoardIdentity, trial: Trial, band_name: str | None = None) -> CheckResult:
    """Judge a constant-operand reference trial against the board family's band.

    Args:
        board: The board the trial ran on.
        trial: Constant-operand trial from :mod:`nvmeter.probes.reference`.
        band_name: Force this band (a key of :data:`nvmeter.probes.bands.BANDS`).

    Raises:
        KeyError: ``band_name`` is not a known band.

    """
    band = BANDS[band_name] if band_name else band_for(board.name)
    reasons = list(trial_problems(trial))
    outside = band.outside(trial.j_per_tflop, trial.tflops) if band is not None else []
    if outside:
        reasons.append(f"outside the band {band.describe()}: {', '.join(outside)}")
    return CheckResult(board, trial, band, tuple(reasons))
