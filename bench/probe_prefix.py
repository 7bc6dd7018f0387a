"""Would the new probe schedule have read today's figures? The committed H200 probe, re-analysed.

The full run of nvmeter.probes.schedule measures shorter spans than results/probe-h200.json
did, shares spans between probes and runs them in another order. This re-reads that record's
raw series the way the new schedule would have measured them, wherever the record allows:

* a shorter counter poll (the tight poll, the cadence's phases, the step's idle after): its
  first seconds, re-analysed exactly;
* the first 8 bursts of each size of 16 (the gaps' random draws are the same: bursts.SEED),
  re-analysed exactly, also with the spans the schedule shares (the idle between the two
  reference loads, the random-operand load span as the long window);
* a shorter aligned span (idle, load): no counter was read inside a span, so its first seconds
  are read from the sample buffer, scaled by the whole span's counter/samples ratio;
* a span the schedule takes from another probe: that probe's span.

Each row gives today's figure and its stated uncertainty (nvmeter.probes.figures), the
re-analysed figure, their difference, whether it lies within today's uncertainty, and the
stated uncertainty at the new length. Usage::

    python bench/probe_prefix.py [--md results/probe-speed/prefix.md]
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "results"


def _load(name: str):
    from nvmeter.probes.report import load_report

    return load_report(RESULTS / name)


def _cut(series, t_from: float, t_to: float):
    from nvmeter.meter.series import CounterSeries

    idx = [i for i in range(len(series)) if series.t0_s[i] >= t_from and series.t1_s[i] <= t_to]
    return CounterSeries(
        tuple(series.t0_s[i] for i in idx),
        tuple(series.t1_s[i] for i in idx),
        tuple(series.energy_mj[i] for i in idx),
    )


def _prefix_power(span, length_s: float) -> tuple[float, float]:
    """A span's first ``length_s`` by the sample buffer, scaled to the counter; and its stated uncertainty.

    The uncertainty is the span's at that length: the same edges over ``length_s``, and the
    noise term of the samples in the prefix.
    """
    from nvmeter.meter.series import integrate_samples_j
    from nvmeter.probes.figures import BLOCK_S

    a = span.t_a_s
    ratio = span.power_w / span.samples_power_w
    power = integrate_samples_j(span.samples, a, a + length_s) / length_s * ratio
    t = np.array([s.t_s for s in span.samples])
    p = np.array([s.power_w for s in span.samples])
    inside = (t > a) & (t <= a + length_s)
    blocks = np.floor((t[inside] - a) / BLOCK_S)
    means = np.array([p[inside][blocks == b].mean() for b in np.unique(blocks)])
    se = means.std(ddof=1) / math.sqrt(means.size)
    edges = abs(power) * span.edge_uncertainty_s / length_s
    return power, math.hypot(edges, 2 * se)


class Table:
    """Rows of the comparison, printed as Markdown."""

    def __init__(self) -> None:
        self.rows: list[tuple] = []

    def add(self, key, old, u_old, new, u_new, how: str) -> None:
        diff = new - old
        within = abs(diff) <= u_old
        widen = u_new / u_old if u_old else math.nan
        self.rows.append((key, old, u_old, new, diff, within, u_new, widen, how))

    def markdown(self) -> str:
        head = (
            "| figure | today | today's U | new schedule | difference | within today's U | U at new length "
            "| U new / today | how |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- |"
        )
        lines = [head]
        for key, old, u_old, new, diff, within, u_new, widen, how in self.rows:
            lines.append(
                f"| {key} | {_g(old)} | {_g(u_old)} | {_g(new)} | {diff:+.4g} "
                f"| {'yes' if within else '**no**'} | {_g(u_new)} | {widen:.2f} | {how} |"
            )
        return "\n".join(lines)


def _g(x: float) -> str:
    return f"{x:.5g}" if isinstance(x, float) else str(x)


def full(table: Table) -> dict:
    """The full run's figures, re-read as the new schedule measures them (FULL plan)."""
    from nvmeter.probes import figures as F
    from nvmeter.probes.bursts import Bursts
    from nvmeter.probes.cadence import LOAD_RAMP_S, Cadence
    from nvmeter.probes.schedule import FULL
    from nvmeter.probes.step import Step

    rep = _load("probe-h200.json")
    P = rep.probes
    idle, ref = P["idle"], P["reference"]
    # idle levels: 5.1 s spans -> FULL.idle_s
    new_idle = {}
    for level, span in idle.spans.items():
        power, u = _prefix_power(span, FULL.idle_s)
        new_idle[level] = (power, u)
        table.add(
            f"idle.{level}.power_w",
            span.power_w,
            F.span_u(span),
            power,
            u,
            f"first {FULL.idle_s:g} s of 5.1 s",
        )
    for key, a, b in (
        ("idle.context_minus_no_context_w", "context", "no_context"),
        ("idle.frozen_minus_context_w", "frozen", "context"),
    ):
        old = idle.spans[a].power_w - idle.spans[b].power_w
        u_old = math.hypot(F.span_u(idle.spans[a]), F.span_u(idle.spans[b]))
        new = new_idle[a][0] - new_idle[b][0]
        table.add(key, old, u_old, new, math.hypot(new_idle[a][1], new_idle[b][1]), "from the rows above")
    # polling: tight 5 s -> FULL.tight_s; sparse = the no-context idle span (before any polling)
    tight = P["polling"].tight
    tight_new = _cut(tight, tight.t0_s[0], tight.t0_s[0] + FULL.tight_s)
    table.add(
        "polling.tight_power_w",
        tight.steps.power_w(),
        F.poll_u(tight),
        tight_new.steps.power_w(),
        F.poll_u(tight_new),
        f"first {FULL.tight_s:g} s of the 5 s poll, exact",
    )
    sparse = P["polling"].sparse
    table.add(
        "polling.sparse_power_w",
        sparse.power_w,
        F.span_u(sparse),
        new_idle["no_context"][0],
        new_idle["no_context"][1],
        "the no-context idle span (first 4 s): the schedule's sparse span",
    )
    artefact_old = tight.steps.power_w() - sparse.power_w
    artefact_new = tight_new.steps.power_w() - new_idle["no_context"][0]
    table.add(
        "polling.artefact_w",
        artefact_old,
        math.hypot(F.poll_u(tight), F.span_u(sparse)),
        artefact_new,
        math.hypot(F.poll_u(tight_new), new_idle["no_context"][1]),
        "the two rows above",
    )
    # samples probe: idle span = the context idle span, load span = the random reference's
    samples = P["samples"]
    table.add(
        "samples.idle_counter_w",
        samples.idle.power_w,
        F.span_u(samples.idle),
        new_idle["context"][0],
        new_idle["context"][1],
        "the context idle span (first 4 s)",
    )
    load_new, u_load_new = _prefix_power(ref.trials["random"].load, FULL.load_s)
    table.add(
        "samples.load_counter_w",
        samples.load.power_w,
        F.span_u(samples.load),
        load_new,
        u_load_new,
        f"the random reference's load span (first {FULL.load_s:g} s), 62 s later",
    )
    # reference: load spans 5 s -> FULL.load_s; shared idle spans
    trials = ref.trials
    c, r = trials["constant"], trials["random"]
    c_load, u_c_load = _prefix_power(c.load, FULL.load_s)
    r_load, u_r_load = _prefix_power(r.load, FULL.load_s)
    table.add(
        "reference.constant.load_w",
        c.load.power_w,
        F.span_u(c.load),
        c_load,
        u_c_load,
        f"first {FULL.load_s:g} s",
    )
    table.add(
        "reference.random.load_w",
        r.load.power_w,
        F.span_u(r.load),
        r_load,
        u_r_load,
        f"first {FULL.load_s:g} s",
    )
    table.add(
        "reference.constant.idle_before_w",
        c.idle_before.power_w,
        F.span_u(c.idle_before),
        new_idle["context"][0],
        new_idle["context"][1],
        "the context idle span (the schedule's): a cold board",
    )
    table.add(
        "reference.random.idle_before_w",
        r.idle_before.power_w,
        F.span_u(r.idle_before),
        c.idle_after.power_w,
        F.span_u(c.idle_after),
        "the constant trial's idle after (shared)",
    )
    for op, t, load, u_load, before, u_before in (
        ("constant", c, c_load, u_c_load, new_idle["context"][0], new_idle["context"][1]),
        ("random", r, r_load, u_r_load, c.idle_after.power_w, F.span_u(c.idle_after)),
    ):
        above = load - (before + t.idle_after.power_w) / 2
        u_above = math.sqrt(u_load**2 + (u_before**2 + F.span_u(t.idle_after) ** 2) / 4)
        j = above / t.tflops
        old = next(f for f in F.figures(rep) if f.key == f"reference.{op}.j_per_tflop")
        u_rate = t.tflops / t.run.matmuls
        u_j = j * math.hypot(u_above / above, u_rate / t.tflops)
        table.add(old.key, old.value, old.u, j, u_j, "the rows above (the rate unchanged)")
    # bursts: the first FULL.bursts of 16 a size; then with the shared idle and long window
    bursts = P["bursts"]
    first = {k: v[: FULL.bursts] for k, v in bursts.bursts.items()}
    cut = Bursts(bursts.idle, bursts.reference, bursts.reference_run, first)
    shared = Bursts(c.idle_after, r.load, r.run, first)
    old_f = {f.key: f for f in F._bursts(bursts)}
    cut_f = {f.key: f for f in F._bursts(cut)}
    shared_f = {f.key: f for f in F._bursts(shared)}
    for size in bursts.bursts:
        for method in ("edges", "tail", "samples"):
            key = f"bursts.{size}.{method}.median"
            o, n8, sh = old_f[key], cut_f[key], shared_f[key]
            table.add(key, o.value, o.u, n8.value, n8.u, f"first {FULL.bursts} of 16, exact")
            table.add(key, o.value, o.u, sh.value, sh.u, "and the shared idle and long window")
    o, sh = old_f["bursts.energy_per_matmul_j"], shared_f["bursts.energy_per_matmul_j"]
    table.add(
        o.key, o.value, o.u, sh.value, sh.u, "the random reference's 5 s load span and the idle before it"
    )
    # cadence: context = the step's idle poll, load = its load poll after the ramp, no context = the tight one
    cad = P["cadence"]
    pre, load_s, post = FULL.step_s
    ctx = _cut(cad.phases["context"], cad.phases["context"].t0_s[0], cad.phases["context"].t0_s[0] + pre)
    load = cad.phases["load"]
    ld = _cut(load, load.t0_s[0], load.t0_s[0] + load_s - LOAD_RAMP_S)
    new_cad = Cadence({"context": ctx, "load": ld, "no_context": tight_new})
    cad_old = {f.key: f for f in F._cadence(cad)}
    cad_new = {f.key: f for f in F._cadence(new_cad)}
    for phase, how in (
        ("context", f"first {pre:g} s of today's 4 s, exact"),
        ("load", f"first {load_s - LOAD_RAMP_S:g} s of today's 4 s, exact"),
        (
            "no_context",
            "the polling probe's tight poll (first 4 s) instead of a poll 0.5 s after the context closed",
        ),
    ):
        for what in ("gap_ms.median", "step_mj.median", "power_w"):
            key = f"cadence.{phase}.{what}"
            table.add(key, cad_old[key].value, cad_old[key].u, cad_new[key].value, cad_new[key].u, how)
    # step: the idle after 2 s -> FULL post
    step = P["step"]
    keep = [i for i in range(len(step.counter)) if step.counter.t1_s[i] <= step.load.t1_s + post]
    c_cut = _cut(step.counter, -math.inf, step.load.t1_s + post)
    step_new = Step(c_cut, tuple(step.instant_w[i] for i in keep), step.load)
    st_old = {f.key: f for f in F._step(step)}
    st_new = {f.key: f for f in F._step(step_new)}
    for key in st_old:
        table.add(
            key,
            st_old[key].value,
            st_old[key].u,
            st_new[key].value,
            st_new[key].u,
            f"idle after cut to {post:g} s",
        )
    return {
        "sparse_clean_w": _clean_sparse(sparse),
        "counter_period_new_s": max(
            float(np.max(s.steps.gaps_s)) for s in new_cad.phases.values() if len(s.steps) > 1
        ),
        "counter_period_old_s": rep.profile().counter_period_s,
        "ratios": _ratios([rep, _load("probe-h200-quick.json"), _load("probe-h200-quick-84564389.json")]),
    }


def _clean_sparse(sparse) -> float:
    """Today's sparse span after the hangover: the samples from 2.0 s on, scaled to the counter, W."""
    from nvmeter.meter.series import integrate_samples_j

    a = sparse.t_a_s + 2.0
    ratio = sparse.power_w / sparse.samples_power_w
    return integrate_samples_j(sparse.samples, a, sparse.t_b_s) / (sparse.t_b_s - a) * ratio


def _ratios(reports) -> list[tuple[str, float, float]]:
    """Every aligned span's samples/counter ratio in the committed probes: (where, length s, ratio - 1)."""
    from nvmeter.meter.span import AlignedSpan

    out = []

    def walk(obj, where):
        if isinstance(obj, AlignedSpan):
            out.append((where, obj.duration_s, obj.samples_power_w / obj.power_w - 1))
        elif isinstance(obj, dict):
            for k, v in obj.items():
                walk(v, f"{where}.{k}")
        elif hasattr(obj, "__dataclass_fields__"):
            for k in obj.__dataclass_fields__:
                walk(getattr(obj, k), f"{where}.{k}")

    for rep in reports:
        for name, rec in rep.probes.items():
            walk(rec, f"{rep.board.uuid[:12]}{' quick' if rep.quick else ''}:{name}")
    return out


def halves() -> list[tuple[str, float]]:
    """Every idle span's two halves' difference by the sample buffer, W (schedule.DISTURBED_W's source)."""
    out = []
    for name in ("probe-h200.json", "probe-h200-quick.json", "probe-h200-quick-84564389.json"):
        rep = _load(name)
        for level, span in rep.probes["idle"].spans.items():
            t = np.array([s.t_s for s in span.samples])
            p = np.array([s.power_w for s in span.samples])
            mid = (span.t_a_s + span.t_b_s) / 2
            a = p[(t > span.t_a_s) & (t <= mid)].mean()
            b = p[(t > mid) & (t <= span.t_b_s)].mean()
            out.append((f"{name} idle.{level}", float(b - a)))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--md", type=Path, help="also write the report here (Markdown)")
    args = parser.parse_args(argv)
    table = Table()
    notes = full(table)
    text = [
        "# The committed H200 probe, re-read as the new schedule measures it",
        "",
        "Written by `python bench/probe_prefix.py --md results/probe-speed/prefix.md` from",
        "results/probe-h200.json (full run, GPU-2e139fc3). U: the stated uncertainty",
        "(nvmeter.probes.figures, docs/probe.md), a half-width.",
        "",
        table.markdown(),
        "",
        f"- Today's sparse span after its first 2.0 s (the samples, scaled to the counter): "
        f"{notes['sparse_clean_w']:.2f} W; its first 1.8 s read ~82.7 W (the polling hangover).",
        "- The profile's counter period (the longest gap): "
        f"{notes['counter_period_old_s'] * 1e3:.1f} ms today, "
        f"{notes['counter_period_new_s'] * 1e3:.1f} ms from the new phases.",
        "- Idle spans' halves (W, second minus first, sample buffer): "
        + ", ".join(f"{w} {d:+.2f}" for w, d in halves()),
        "",
        "Samples/counter ratio - 1 of every aligned span in the three committed probes (length s: ratio):",
        "",
    ]
    for where, length, dev in sorted(notes["ratios"], key=lambda r: r[1]):
        text.append(f"- {where}: {length:.1f} s: {dev:+.3%}")
    out = "\n".join(text) + "\n"
    sys.stdout.write(out)
    if args.md:
        args.md.parent.mkdir(parents=True, exist_ok=True)
        args.md.write_text(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
