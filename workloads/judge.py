"""Difficulty bands and the judge: does a method's run pass its level?

Rules (docs/task.md, "Difficulty"): over the MNIST draws the total of correct
labels must reach ``ceil(total x (1 - band))``; each MNIST draw must also reach its floor,
``band + 1.5`` points of error at most; over the hold-out draws at least 15% must be
correct (6,000 of 40,000 in a full run). A full run has 11 MNIST draws and 4 hold-out
draws; the judge applies the same rules to whatever draws it is given.

All thresholds are integers in basis points (1/100 of a percent) so that the counts are
exact: ``ceil(110000 x 0.946)`` in floating point is 104,061, not 104,060.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from nvmeter import errors

_BP = 10_000  # basis points in 1
# Max MNIST error per level, bp (docs/task.md table).
BANDS_BP = {1: 540, 2: 340, 3: 270, 4: 230, 5: 190}
# The per-draw floor allows 1.5 points more error than the band (docs/task.md).
_FLOOR_MARGIN_BP = 150
# Hold-out: at least 15% correct, well above chance (10%) (docs/task.md).
HOLDOUT_MIN_BP = 1_500
# A full run: 11 MNIST draws and 4 hold-out draws (docs/task.md).
RUN_MNIST_DRAWS = 11
RUN_HOLDOUT_DRAWS = 4


def _ceil_fraction(total: int, numerator_bp: int) -> int:
    return -(-total * numerator_bp // _BP)


def required(total: int, level: int) -> int:
    """Correct labels needed of ``total`` MNIST test rows at ``level`` (1..5).

    Raises:
        UsageError: unknown level.

    """
    return _ceil_fraction(total, _BP - _band(level))


def floor(rows: int, level: int) -> int:
    """Correct labels one MNIST draw of ``rows`` test rows needs at ``level``."""
    return _ceil_fraction(rows, _BP - _band(level) - _FLOOR_MARGIN_BP)


def _band(level: int) -> int:
    try:
        return BANDS_BP[level]
    except KeyError:
        raise errors.UsageError(f"difficulty {level!r} is not one of {sorted(BANDS_BP)}") from None


@dataclass(frozen=True)
class Score:
    """One draw's result.

    Attributes:
        dataset: ``mnist``, ``fashion`` or ``kmnist``.
        seed: The draw's seed.
        correct: Test rows labelled correctly.
        rows: Test rows.

    """

    dataset: str
    seed: int
    correct: int
    rows: int

    @property
    def accuracy(self) -> float:
        """Fraction correct, 0..1."""
        return self.correct / self.rows


def score(draw, labels) -> Score:
    """Score a method's ``labels`` (array-like or tensor of (rows,) ints) against ``draw``.

    Raises:
        UsageError: the labels' shape is not the draw's test rows.

    """
    if hasattr(labels, "detach"):
        labels = labels.detach().cpu().numpy()
    labels = np.asarray(labels)
    if labels.shape != draw.test_y.shape:
        raise errors.UsageError(f"labels have shape {labels.shape}, the draw needs {draw.test_y.shape}")
    return Score(draw.dataset, draw.seed, int((labels == draw.test_y).sum()), len(draw.test_y))


@dataclass(frozen=True)
class Verdict:
    """The judge's decision for one method at one level.

    Attributes:
        level: Difficulty 1..5.
        mnist_correct, mnist_rows: Totals over the MNIST draws.
        mnist_required: Correct labels the total needed.
        draw_floor: Correct labels each MNIST draw needed (for 10,000-row draws).
        below_floor: Seeds of MNIST draws under their floor.
        holdout_correct, holdout_rows: Totals over the hold-out draws (0, 0 if none).
        holdout_required: Correct hold-out labels needed.
        reasons: Why it failed, one line each; empty when it passed.

    """

    level: int
    mnist_correct: int
    mnist_rows: int
    mnist_required: int
    draw_floor: int
    below_floor: tuple[int, ...]
    holdout_correct: int
    holdout_rows: int
    holdout_required: int
    reasons: tuple[str, ...]

    @property
    def passed(self) -> bool:
        """Whether every rule held."""
        return not self.reasons

    def to_dict(self) -> dict:
        """JSON-ready fields, with ``passed``."""
        return {**{k: getattr(self, k) for k in self.__dataclass_fields__}, "passed": self.passed}


def judge(mnist: Sequence[Score], holdout: Sequence[Score], level: int) -> Verdict:
    """Judge a method's MNIST and hold-out scores at ``level``.

    Raises:
        UsageError: an unknown level, no MNIST scores, or a score of the wrong dataset.

    """
    if not mnist:
        raise errors.UsageError("the judge needs at least one MNIST draw")
    if any(s.dataset != "mnist" for s in mnist) or any(s.dataset == "mnist" for s in holdout):
        raise errors.UsageError("MNIST scores and hold-out scores are mixed up")
    correct = sum(s.correct for s in mnist)
    rows = sum(s.rows for s in mnist)
    need = required(rows, level)
    below = tuple(s.seed for s in mnist if s.correct < floor(s.rows, level))
    h_correct = sum(s.correct for s in holdout)
    h_rows = sum(s.rows for s in holdout)
    h_need = _ceil_fraction(h_rows, HOLDOUT_MIN_BP)
    reasons = []
    if correct < need:
        reasons.append(f"MNIST {correct:,} of {rows:,} correct; difficulty {level} needs {need:,}")
    for s in mnist:
        if s.correct < floor(s.rows, level):
            reasons.append(
                f"MNIST draw {s.seed}: {s.correct:,} correct, under the floor {floor(s.rows, level):,}"
            )
    if h_correct < h_need:
        reasons.append(f"hold-out {h_correct:,} of {h_rows:,} correct; needs {h_need:,} (15%)")
    return Verdict(
        level=level,
        mnist_correct=correct,
        mnist_rows=rows,
        mnist_required=need,
        draw_floor=floor(10_000, level),
        below_floor=below,
        holdout_correct=h_correct,
        holdout_rows=h_rows,
        holdout_required=h_need,
        reasons=tuple(reasons),
    )


def from_calls(result: dict, mnist_draws: int, holdout_draws: int) -> dict:
    """What a method's result derives from its calls: verdict, accuracies, passed, ms median/min/max.

    ``result`` holds ``difficulty``, ``error`` and ``calls`` (dataset, seed, ms, correct, rows);
    a result is passed only if it has no error, all ``mnist_draws`` + ``holdout_draws`` calls and the
    judge passes it. Fields that cannot be derived (no MNIST call, no call) are None.
    """
    calls = result["calls"]
    scores = [Score(c["dataset"], c["seed"], c["correct"], c["rows"]) for c in calls]
    mnist = [s for s in scores if s.dataset == "mnist"]
    holdout = [s for s in scores if s.dataset != "mnist"]
    out = {"verdict": None, "mnist_accuracy": None, "holdout_accuracy": None, "passed": False,
           "ms_median": None, "ms_min": None, "ms_max": None}  # fmt: skip
    if mnist:
        verdict = judge(mnist, holdout, result["difficulty"])
        out["verdict"] = verdict.to_dict()
        out["mnist_accuracy"] = verdict.mnist_correct / verdict.mnist_rows
        out["holdout_accuracy"] = verdict.holdout_correct / verdict.holdout_rows if holdout else None
        complete = result["error"] is None and len(mnist) == mnist_draws and len(holdout) == holdout_draws
        out["passed"] = bool(complete and verdict.passed)
    times = [c["ms"] for c in calls]
    if times:
        out["ms_median"] = statistics.median(times)
        out["ms_min"] = min(times)
        out["ms_max"] = max(times)
    return out
