"""Every figure of a probe report with its stated uncertainty, computed from the report's raw series.

What each probe record states about how well its figures are known, as one half-width per
figure, in the figure's own unit (docs/probe.md, "Each figure's stated uncertainty"):

* **A span's mean power** (idle levels, load spans, the sparse reading): the span's two edges
  are known to their half-widths (:attr:`~nvmeter.meter.span.AlignedSpan.edge_uncertainty_s`,
  ~6 ms on the H200), which moves the power by ``power x that / length``; plus twice the
  standard error of the sample buffer's means over 0.2 s blocks of the span (the power's own
  fluctuation). The same for the sample buffer's mean over the span.
* **Power from a counter poll** (the tight-polling series, a cadence phase): the first and last
  steps' half-widths over the time between them, times the power.
* **A median of n readings** (read costs, gaps, burst errors, step levels; the instant field's
  readings counted once per update, as it repeats its value between updates): half the
  distribution-free ~95% confidence interval of a median, ``[x(k), x(n+1-k)]`` of the sorted
  readings (order statistics; with n <= 5 no such interval reaches 95% and the whole range is
  used: coverage ``1 - 2^(1-n)``).
* **Differences, ratios, J/TFLOP, energy per product**: their parts' uncertainties, in quadrature.
* **A rate of products** (TFLOP/s): one product more or less in the job, ``rate / products``.
* **A fitted delay or settling time** (step response): the counter's delays to the sum of an
  interval's two edges' half-widths (median), its settling to one interval; the instant field's
  delays to half its update period, its settling to one period (median gaps between changes).
* **The sample buffer's count and history**: one sample; twice the gaps' spread times the root
  of their number.

Extremes (the min or max of n readings, the profile's counter period which is a max) grow with
n and have no uncertainty here: they are listed, not judged. So are counts of reads and steps
and a run's chosen lengths. Exactness is compared for equality.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from nvmeter.meter.series import CounterSeries
from nvmeter.meter.span import AlignedSpan

# Blocks over which a span's samples are averaged for the noise term, s: ten ~20 ms samples.
BLOCK_S = 0.2
# Coverage of a median's confidence interval.
MEDIAN_CONFIDENCE = 0.95

JUDGED = "judged"
EXTREME = "extreme"  # a min or max: grows with the number of readings
COUNT = "count"  # reads, steps, chosen lengths: follow the schedule
EQUAL = "equal"  # must be the same (exactness, alignment)


@dataclass(frozen=True)
class Figure:
    """One figure of a report.

    Attributes:
        key: Where it is, dotted (``idle.no_context.power_w``).
        value: The figure (None if the record has none).
        unit: Its unit.
        u: Its stated uncertainty, a half-width in ``unit`` (None where :attr:`kind` is not judged).
        kind: ``judged``, ``extreme``, ``count`` or ``equal``.
        n: Readings behind it, where that matters (a median's, an extreme's).

    """

    key: str
    value: float | bool | None
    unit: str
    u: float | None
    kind: str = JUDGED
    n: int | None = None


# -- the building blocks -------------------------------------------------------------------------
def median_ci(values) -> tuple[float, float, float]:
    """A distribution-free confidence interval of the median: (low, high, coverage).

    The largest k with P(k <= B <= n - k) >= MEDIAN_CONFIDENCE, B ~ Binomial(n, 1/2), gives
    ``[x(k), x(n+1-k)]`` (1-based order statistics); with none, the whole range.
    """
    x = np.sort(np.asarray([v for v in values if v is not None and math.isfinite(v)], dtype=float))
    n = x.size
    if n == 0:
        return math.nan, math.nan, 0.0
    best_k, best_cov = 1, 1 - 2.0 ** (1 - n) if n > 1 else 0.0
    for k in range(1, n // 2 + 1):
        cov = sum(math.comb(n, j) for j in range(k, n - k + 1)) / 2.0**n
        if cov >= MEDIAN_CONFIDENCE:
            best_k, best_cov = k, cov
    return float(x[best_k - 1]), float(x[n - best_k]), best_cov


def median_u(values) -> float:
    """Half the width of :func:`median_ci`."""
    low, high, _ = median_ci(values)
    return (high - low) / 2


def span_u(span: AlignedSpan, samples: bool = False) -> float:
    """Uncertainty of a span's mean power (counter, or with ``samples`` the buffer's), W."""
    power = span.samples_power_w if samples else span.power_w
    edges = abs(power) * span.edge_uncertainty_s / span.duration_s
    return math.hypot(edges, 2 * _block_se(span))


def _block_se(span: AlignedSpan) -> float:
    """Standard error of the span's mean power from the sample buffer's BLOCK_S means, W."""
    t = np.array([s.t_s for s in span.samples])
    p = np.array([s.power_w for s in span.samples])
    inside = (t > span.t_a_s) & (t <= span.t_b_s)
    t, p = t[inside], p[inside]
    blocks = np.floor((t - span.t_a_s) / BLOCK_S)
    means = np.array([p[blocks == b].mean() for b in np.unique(blocks)])
    return float(means.std(ddof=1) / math.sqrt(means.size)) if means.size > 1 else 0.0


def poll_u(series: CounterSeries) -> float:
    """Uncertainty of a counter poll's power (first to last step), W."""
    st = series.steps
    if len(st) < 2:
        return math.nan
    return abs(st.power_w()) * float(st.half_width_s[0] + st.half_width_s[-1]) / float(st.t_s[-1] - st.t_s[0])


def _median_figures(key: str, values, unit: str, scale: float = 1.0) -> list[Figure]:
    v = np.asarray([x for x in values if x is not None and math.isfinite(x)], dtype=float) * scale
    if v.size == 0:
        return [Figure(f"{key}.median", None, unit, None, JUDGED, 0)]
    return [
        Figure(f"{key}.median", float(np.median(v)), unit, median_u(v), JUDGED, int(v.size)),
        Figure(f"{key}.min", float(v.min()), unit, None, EXTREME, int(v.size)),
        Figure(f"{key}.max", float(v.max()), unit, None, EXTREME, int(v.size)),
    ]


def _span_figures(key: str, span: AlignedSpan) -> list[Figure]:
    return [
        Figure(f"{key}.power_w", span.power_w, "W", span_u(span)),
        Figure(f"{key}.samples_power_w", span.samples_power_w, "W", span_u(span, samples=True)),
        Figure(f"{key}.duration_s", span.duration_s, "s", None, COUNT),
        Figure(f"{key}.aligned", span.aligned, "", None, EQUAL),
    ]


def _ratio_u(span: AlignedSpan) -> float:
    """The samples/counter ratio's uncertainty: the edges move the samples' integral, not the counter's."""
    return span.edge_uncertainty_s / span.duration_s


# -- per probe -----------------------------------------------------------------------------------
def _read_cost(rec) -> list[Figure]:
    return [f for sig, v in rec.reads_s.items() for f in _median_figures(f"read_cost.{sig}", v, "us", 1e6)]


def _polling(rec) -> list[Figure]:
    d = rec.derived()
    u_tight, u_sparse = poll_u(rec.tight), span_u(rec.sparse)
    return [
        Figure("polling.tight_power_w", d["tight_power_w"], "W", u_tight),
        Figure("polling.sparse_power_w", d["sparse_power_w"], "W", u_sparse),
        Figure("polling.sparse_samples_power_w", d["sparse_samples_power_w"], "W", span_u(rec.sparse, True)),
        Figure("polling.artefact_w", d["artefact_w"], "W", math.hypot(u_tight, u_sparse)),
        Figure("polling.tight_reads_per_s", d["tight_reads_per_s"], "1/s", None, COUNT),
    ]


def _idle(rec) -> list[Figure]:
    out = [f for level, span in rec.spans.items() for f in _span_figures(f"idle.{level}", span)]
    u = {level: span_u(span) for level, span in rec.spans.items()}
    d = rec.derived()
    out.append(
        Figure(
            "idle.context_minus_no_context_w",
            d["context_minus_no_context_w"],
            "W",
            math.hypot(u["context"], u["no_context"]),
        )
    )
    out.append(
        Figure(
            "idle.frozen_minus_context_w",
            d["frozen_minus_context_w"],
            "W",
            math.hypot(u["frozen"], u["context"]),
        )
    )
    return out


def _samples(rec) -> list[Figure]:
    d = rec.derived()
    t = np.array([s.t_s for s in rec.buffer])
    gaps_ms = np.diff(t) * 1e3
    out = [
        Figure("samples.count", d["count"], "", 1.0, JUDGED),
        Figure("samples.history_s", d["history_s"], "s", _history_u(gaps_ms)),
        *_median_figures("samples.spacing_ms", gaps_ms, "ms"),
    ]
    for which, span in (("idle", rec.idle), ("load", rec.load)):
        out += [
            Figure(f"samples.{which}_counter_w", span.power_w, "W", span_u(span)),
            Figure(f"samples.{which}_samples_w", span.samples_power_w, "W", span_u(span, True)),
            Figure(f"samples.{which}_ratio", d[f"{which}_ratio"], "", _ratio_u(span)),
        ]
    return out


def _history_u(gaps_ms: np.ndarray) -> float:
    """The buffer's history is the sum of its gaps: twice their spread times the root of their number, s.

    As if each gap varied on its own; where the timestamps jitter around a regular grid (the
    H200's 9.6-28.2 ms gaps around 20.0 ms), the history varies less: a bound.
    """
    if gaps_ms.size < 2:
        return math.nan
    return 2 * float(gaps_ms.std(ddof=1)) * math.sqrt(gaps_ms.size) / 1e3


def _step(rec) -> list[Figure]:
    d = rec.derived()
    _, b, p = rec._intervals()
    steps = rec.counter.steps
    edges_s = (
        float(np.median(steps.half_width_s[:-1] + steps.half_width_s[1:])) if len(steps) > 1 else math.nan
    )
    interval_s = float(np.median(np.diff(steps.t_s))) if len(steps) > 1 else math.nan
    inst = np.asarray(rec.instant_w)
    mids = (np.asarray(rec.counter.t0_s) + np.asarray(rec.counter.t1_s)) / 2
    changes = mids[1:][np.diff(inst) != 0]
    period_s = float(np.median(np.diff(changes))) if changes.size > 1 else math.nan
    t0, t1 = rec.load.t0_s, rec.load.t1_s
    mid_load = t0 + rec.load.duration_s / 2
    # the instant field repeats its value until its next update: one reading per update is independent
    fresh = np.concatenate([[True], np.diff(inst) != 0])
    levels = {
        "counter": (p[b < t0], p[(b > mid_load) & (b < t1)]),
        "instant": (inst[fresh & (mids < t0)], inst[fresh & (mids > mid_load) & (mids < t1)]),
    }
    u_delay = {"counter": edges_s * 1e3, "instant": period_s / 2 * 1e3}
    u_settle = {"counter": interval_s * 1e3, "instant": period_s * 1e3}
    spans = rec.delay_spans_ms()

    def delay(sig: str, edge: str) -> Figure:
        # the reported delay is the lowest of those that fit equally well: cover the highest too
        span = spans[sig][f"{edge}_delay_ms"]
        u = max(u_delay[sig], span[1] - span[0]) if span else u_delay[sig]
        return Figure(f"step.{sig}.{edge}_delay_ms", d[sig][f"{edge}_delay_ms"], "ms", u)

    out = []
    for sig in ("counter", "instant"):
        before, during = levels[sig]
        out += [
            Figure(f"step.{sig}.idle_w", d[sig]["idle_w"], "W", median_u(before), JUDGED, int(before.size)),
            Figure(
                f"step.{sig}.plateau_w", d[sig]["plateau_w"], "W", median_u(during), JUDGED, int(during.size)
            ),
            delay(sig, "rise"),
            delay(sig, "fall"),
            Figure(f"step.{sig}.rise_settle_ms", d[sig]["rise_settle_ms"], "ms", u_settle[sig]),
        ]
    return out


def _bursts(rec) -> list[Figure]:
    d = rec.derived()
    ref, run = rec.reference, rec.reference_run
    rate = ref.duration_s * run.matmuls / run.duration_s  # products in the span
    u_per = math.hypot(abs(ref.power_w) * ref.edge_uncertainty_s, span_u(rec.idle) * ref.duration_s) / rate
    out = [
        Figure("bursts.energy_per_matmul_j", d["energy_per_matmul_j"], "J", u_per),
        Figure("bursts.idle_w", d["idle_w"], "W", span_u(rec.idle)),
        Figure("bursts.idle_samples_w", d["idle_samples_w"], "W", span_u(rec.idle, True)),
    ]
    ratios = rec.ratios()
    for size, bursts in rec.bursts.items():
        out += _median_figures(f"bursts.{size}.duration_ms", [b.run.duration_s * 1e3 for b in bursts], "ms")
        for method, r in ratios[size].items():
            err = np.asarray(r, dtype=float) - 1.0
            err = err[np.isfinite(err)]
            out += _median_figures(f"bursts.{size}.{method}", err, "")
            if err.size:
                se = float(np.abs(err).std(ddof=1) / math.sqrt(err.size)) if err.size > 1 else math.nan
                out.append(
                    Figure(f"bursts.{size}.{method}.mean_abs", float(np.mean(np.abs(err))), "", 2 * se)
                )
    return out


def _reference(rec) -> list[Figure]:
    out = []
    for op, t in rec.trials.items():
        u_load, u_b, u_a = span_u(t.load), span_u(t.idle_before), span_u(t.idle_after)
        u_above = math.sqrt(u_load**2 + (u_b**2 + u_a**2) / 4)
        u_rate = t.tflops / t.run.matmuls if t.run.matmuls else math.nan
        rel = math.hypot(u_above / t.above_idle_w, u_rate / t.tflops) if t.tflops else math.nan
        out += [
            Figure(f"reference.{op}.tflops", t.tflops, "TFLOP/s", u_rate),
            Figure(f"reference.{op}.load_w", t.load.power_w, "W", u_load),
            Figure(f"reference.{op}.idle_before_w", t.idle_before.power_w, "W", u_b),
            Figure(f"reference.{op}.idle_after_w", t.idle_after.power_w, "W", u_a),
            Figure(f"reference.{op}.above_idle_w", t.above_idle_w, "W", u_above),
            Figure(f"reference.{op}.j_per_tflop", t.j_per_tflop, "J/TFLOP", abs(t.j_per_tflop) * rel),
            Figure(f"reference.{op}.exact", t.exact, "", None, EQUAL),
        ]
    return out


def _cadence(rec) -> list[Figure]:
    out = []
    for phase, series in rec.phases.items():
        steps = series.steps
        out += _median_figures(f"cadence.{phase}.gap_ms", steps.gaps_s * 1e3, "ms")
        out += _median_figures(f"cadence.{phase}.step_mj", steps.sizes_mj, "mJ")
        out += [
            Figure(f"cadence.{phase}.power_w", steps.power_w(), "W", poll_u(series)),
            Figure(f"cadence.{phase}.changes", len(steps), "", None, COUNT),
        ]
    return out


_PROBES = {
    "read_cost": _read_cost,
    "polling": _polling,
    "idle": _idle,
    "samples": _samples,
    "step": _step,
    "bursts": _bursts,
    "reference": _reference,
    "cadence": _cadence,
}


def _profile(report, by_key: dict[str, Figure]) -> list[Figure]:
    """The figures of the board's profile that a probe measured (nvmeter.probes.profile)."""
    profile = report.profile()
    out = []
    if "cadence" in report.probes:
        n = sum(len(s.steps) for s in report.probes["cadence"].phases.values())
        out.append(Figure("profile.counter_period_s", profile.counter_period_s, "s", None, EXTREME, n))
    if "polling" in report.probes:
        out.append(
            Figure(
                "profile.polling_artefact_w", profile.polling_artefact_w, "W", by_key["polling.artefact_w"].u
            )
        )
    if "samples" in report.probes:
        spacing = by_key["samples.spacing_ms.median"]
        out.append(Figure("profile.sample_spacing_s", profile.sample_spacing_s, "s", spacing.u / 1e3))
        worst = max(("idle", "load"), key=lambda w: abs(by_key[f"samples.{w}_ratio"].value - 1))
        out.append(
            Figure(
                "profile.samples_vs_counter",
                profile.samples_vs_counter,
                "",
                2 * by_key[f"samples.{worst}_ratio"].u,
            )
        )
    return out


def figures(report) -> list[Figure]:
    """Every figure of a :class:`~nvmeter.probes.report.ProbeReport`: its probes', then its profile's."""
    out = [f for name, rec in report.probes.items() for f in _PROBES[name](rec)]
    return out + _profile(report, {f.key: f for f in out})
