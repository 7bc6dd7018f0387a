"""The sub-windows of one uninterrupted run: their per-call energies, Student-t interval and drift.

``measure()`` marks counter steps inside one run of calls; between consecutive steps lies a
sub-window whose energy the counter gives exactly. Their spread says how much the same
calls' cost moves from window to window on this board and this work, so the bound's state
part is measured, not assumed (scipy.stats: the t quantile and the linear trend).
"""

from __future__ import annotations

import itertools
import math
import statistics
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

from nvmeter.meter.series import Step

if TYPE_CHECKING:
    from nvmeter.meter.errormodel import ErrorModel
    from nvmeter.meter.measurement import Measurement

# A trend counts as drift when its p-value is below this and it moves the per-call energy
# across the run by more than the interval's half-width.
DRIFT_P = 0.01


def boundaries(m: Measurement) -> list[Step]:
    """Each in-work step: the start step and each inner step, in time order."""
    edges = [m.start, *m.inner] if m.in_work else list(m.inner)
    # each edge at its sharpest step, as the window's own start (Measurement._edges)
    found = [step for s in edges if (step := s.edge_step(m.work_t1_s)) is not None]
    inside = sorted(b for b in found if m.work_t0_s < b.t_s < m.work_t1_s)
    # keep only a rising series: a reset or a backwards counter is the window's problem, not a spread;
    # and each step once: two marks within one counter period (a call longer than the sub-windows)
    # find the same step, whose two placements made a sub-window of no energy that read -121 W
    # (an adversarial review: a run with 1 s calls among 10 ms ones ended NOT RELIABLE at ±51%)
    kept: list[Step] = []
    for b in inside:
        if kept and b.energy_mj == kept[-1].energy_mj:
            kept[-1] = min(kept[-1], b, key=lambda step: step.half_width_s)  # one step: its sharper placement
        elif not kept or b.energy_mj > kept[-1].energy_mj:
            kept.append(b)
    return kept


def powers_above(steps: list[Step], idle_w: float) -> list[tuple[float, float]]:
    """(power above idle W, its variance from the two edges' placement W²) between consecutive steps.

    Args:
        steps: Each step, in time order.
        idle_w: The idle power, W.
    """
    found = []
    for (t_a, e_a, hw_a), (t_b, e_b, hw_b) in itertools.pairwise(steps):
        if t_b > t_a:
            power_w = (e_b - e_a) / 1e3 / (t_b - t_a)
            # a step known to +-hw (uniform) moves the sub-window's length by hw²/3 in variance
            edge_var = (power_w / (t_b - t_a)) ** 2 * (hw_a**2 + hw_b**2) / 3
            found.append((power_w - idle_w, edge_var))
    return found


def cut_at(steps: list[Step], every_s: float) -> list[Step]:
    """The first step and each step ``every_s`` or more after the last kept; a shorter rest is left out."""
    cuts = steps[:1]
    for step in steps[1:]:
        if step.t_s - cuts[-1].t_s >= every_s:
            cuts.append(step)
    return cuts


def pooled_rel_sd(groups) -> tuple[float, int]:
    """(relative SD, degrees of freedom) of values about their own group's mean, pooled over groups.

    Each group is one uninterrupted run's blocks, so a level that moves between runs (a board
    warming between them) is not counted as spread. Groups of fewer than two values, or with a
    mean not above zero, add nothing. The SD is nan with no degree of freedom.

    Args:
        groups: Iterable of sequences of finite values (per-call mJ of consecutive blocks).
    """
    ss, dof = 0.0, 0
    for values in groups:
        mean = statistics.fmean(values) if len(values) >= 2 else math.nan
        if not mean > 0:
            continue
        ss += sum((v / mean - 1) ** 2 for v in values)
        dof += len(values) - 1
    return (math.sqrt(ss / dof) if dof else math.nan), dof


def batch_steps(steps: list[Step], model: ErrorModel) -> list[Step]:
    """The steps that cut the sub-windows into the model's batches (error model 9), else ``steps``.

    Consecutive sub-windows join into a batch until it lasts ``model.batch_s``; a shorter
    remainder joins the last batch. The counter gives each batch's energy as exactly as a
    sub-window's, and the steps inside a batch drop out (their placement cancels). Fewer than
    ``model.min_subwindows`` batches: the sub-windows themselves (too few batches for an interval).
    """
    if not model.batch_s > 0 or not steps:
        return steps
    cuts = cut_at(steps, model.batch_s)
    if len(cuts) - 1 < model.min_subwindows:
        return steps
    cuts[-1] = steps[-1]  # the remainder, shorter than a batch, joins the last one
    return cuts


def join_short(steps: list[Step], min_s: float) -> list[Step]:
    """The steps that join each sub-window shorter than ``min_s`` to the next (error model 12).

    A shorter remainder at the end joins the last sub-window; with no sub-window that short,
    ``steps`` itself (the same list).
    """
    if all(b.t_s - a.t_s >= min_s for a, b in itertools.pairwise(steps)):
        return steps
    cuts = cut_at(steps, min_s)
    if len(cuts) < 2:
        return [steps[0], steps[-1]]
    cuts[-1] = steps[-1]
    return cuts


def subwindow_mj(m: Measurement, steps: list[Step] | None = None) -> tuple[float, ...]:
    """Per-call energy above idle, less the control, of each sub-window, mJ, shape (k,).

    ``steps``: the in-work steps that cut them (default :func:`boundaries`, every one).
    """
    if not m.calls or not m.work_s > 0:
        return ()
    mj_per_w = m.work_s / m.calls * 1e3
    steps = m.subwindow_steps if steps is None else steps
    return tuple(above_w * mj_per_w - m.control_mj for above_w, _ in powers_above(steps, m.idle_w))


def state_halfwidth_mj(m: Measurement) -> float | None:
    """Half-width of the Student-t interval of the run's per-call energy from its sub-windows, mJ.

    The sub-windows' variance less what their edges' placement explains (the middle edges'
    errors cancel in the run's total, so they are no state of the board), over the number
    of sub-windows, at the model's confidence (:func:`state_halfwidth_w`, per call). None
    with fewer than ``min_subwindows``.
    """
    halfwidth_w = m.subwindow_halfwidth_w  # None without calls or time
    return None if halfwidth_w is None else halfwidth_w * m.work_s / m.calls * 1e3


def state_halfwidth_w(steps: list[Step], idle_w: float, model: ErrorModel) -> float | None:
    """Half-width of the Student-t interval of the run's mean power above idle, W, from its steps.

    Over the sub-windows between consecutive steps; under error model 9 the larger of that
    and the interval over the model's batches of them (:func:`batch_steps`), where there are
    enough. Why the larger: neighbouring sub-windows' costs are correlated, positively for
    work whose cost moves over seconds, where the sub-windows' interval understates the mean's
    uncertainty and the batches' does not; but work whose cost cycles with about the batches'
    length gives every batch the same mean while the run ends part-way through a cycle, and
    there the sub-windows' interval is the one that sees it (an adversarial review's 2 s cycle
    read +4.0% outside a batches-only bound of ±1.2%). None with fewer than ``min_subwindows``
    sub-windows.
    """

    def interval(cuts: list[Step]) -> float | None:
        found = powers_above(cuts, idle_w)
        return student_t_halfwidth([v for v, _ in found], [e for _, e in found], model)

    own, batches = interval(steps), batch_steps(steps, model)
    if own is None or batches is steps:
        return own
    return max(own, interval(batches) or 0.0)


def student_t_halfwidth(values: list[float], edge_vars: list[float], model: ErrorModel) -> float | None:
    """Student-t half-width of the mean of ``values`` beyond their edge variance, in their unit.

    None with fewer than the model's ``min_subwindows``.
    """
    k = len(values)
    if k < model.min_subwindows:
        return None
    from scipy import stats

    state_var = max(0.0, statistics.variance(values) - statistics.fmean(edge_vars))
    quantile = float(stats.t.ppf(0.5 + model.confidence / 2, k - 1))
    return quantile * math.sqrt(state_var / k)


@dataclass(frozen=True)
class Drift:
    """A linear trend of the sub-windows' per-call energy.

    Attributes:
        rel_per_s: Change per second, share of the mean per-call energy.
        p_value: Two-sided p-value of the slope (scipy.stats.linregress).
        across_rel: The trend's change across the run, share of the mean.
        halfwidth_rel: The Student-t half-width, share of the mean (nan with too few sub-windows).
        temperature_c: The board's temperature at the first and last edge, °C (nan: unknown).
    """

    rel_per_s: float
    p_value: float
    across_rel: float
    halfwidth_rel: float
    temperature_c: tuple[float, float]

    @property
    def significant(self) -> bool:
        """True when the trend is both unlikely by chance and larger than the interval."""
        return self.p_value < DRIFT_P and abs(self.across_rel) > self.halfwidth_rel

    def __repr__(self) -> str:
        t0, t1 = self.temperature_c
        temps = f", {t0:.0f} -> {t1:.0f} °C" if math.isfinite(t0) and math.isfinite(t1) else ""
        return f"drift {self.rel_per_s:+.2%}/s ({self.across_rel:+.2%} across, p={self.p_value:.2g}{temps})"

    def to_dict(self) -> dict:
        """Plain dict for JSON."""
        return asdict(self)


def drift(m: Measurement) -> Drift | None:
    """The sub-windows' linear trend over time (None under four sub-windows or a zero mean)."""
    values = subwindow_mj(m)
    if len(values) < 4:
        return None
    mean = statistics.fmean(values)
    if not mean:
        return None
    from scipy import stats

    edges = m.subwindow_steps
    mids = [(a[0] + b[0]) / 2 for a, b in itertools.pairwise(edges) if b[0] > a[0]][: len(values)]
    fit = stats.linregress(mids, values)
    halfwidth = state_halfwidth_mj(m)
    temps = (m.states[0].temperature_c, m.states[-1].temperature_c) if m.states else (math.nan, math.nan)
    return Drift(
        rel_per_s=float(fit.slope / mean),
        p_value=float(fit.pvalue),
        across_rel=float(fit.slope * (mids[-1] - mids[0]) / mean),
        halfwidth_rel=abs(halfwidth / mean) if halfwidth is not None else math.nan,
        temperature_c=temps,
    )
