"""Isolated bursts: how well each reading recovers the energy of one short call.

N bursts of ~20 ms and ~75 ms of 4096^2 FP32 products, each after a random idle
gap, read three ways: the counter at the burst's edges, the counter with a 0.25 s
tail, and the power-sample buffer integrated over the burst. The truth is the
per-burst energy from a long window of the same products back to back. On the H200
18 of 20 ~22 ms bursts read no counter step at all, while the sample buffer gave
0.86-1.05 of their energy (docs/facts.md).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from nvmeter.boards.protocol import PowerSample
from nvmeter.meter.series import integrate_samples_j, samples_from_dict, samples_to_dict, summary
from nvmeter.meter.span import AlignedSpan
from nvmeter.probes import schedule
from nvmeter.worker.protocol import MatmulRun
from nvmeter.worker.rig import Rig

NAME = "bursts"
TITLE = "isolated bursts"
IN_QUICK = True

LOAD_N = schedule.LOAD_N
TARGETS_S = (0.020, 0.075)
TAIL_S = 0.25
# The sample buffer is integrated from this long before the burst to TAIL_S after:
# the smoothing spreads a burst over a few tens of ms (docs/facts.md).
SAMPLE_LEAD_S = 0.1
GAP_S = (0.35, 0.7)  # random idle gap before each burst
# The gaps' random generator: the same draws in every run, so a run of N bursts a size makes
# the first N of a longer run's (bench/probe_prefix.py compares them with the committed 16).
SEED = 20261129
METHODS = ("edges", "tail", "samples")


def needs(quick: bool) -> set[str]:
    """The schedule's measurements this probe's record is made of (:mod:`nvmeter.probes.schedule`).

    The idle span is the one between the constant- and random-operand loads, the long window
    the random-operand load span: idle, the long window, then the bursts, as before.
    """
    return {"idle_between", "random", "bursts"}


@dataclass(frozen=True)
class Burst:
    """One isolated burst: counter reads around it, the job, and the samples over it."""

    pre: tuple[float, float, int]  # read start s, read end s, mJ
    post: tuple[float, float, int]
    tail: tuple[float, float, int]
    run: MatmulRun
    samples: tuple[PowerSample, ...]

    def readings_j(self, idle_counter_w: float, idle_samples_w: float) -> dict[str, float]:
        """Energy above idle by each method, J."""
        edges = (self.post[2] - self.pre[2]) / 1e3 - idle_counter_w * (self.post[1] - self.pre[0])
        tail = (self.tail[2] - self.pre[2]) / 1e3 - idle_counter_w * (self.tail[1] - self.pre[0])
        a, b = self.run.t0_s - SAMPLE_LEAD_S, self.run.t1_s + TAIL_S
        try:
            samples = integrate_samples_j(self.samples, a, b) - idle_samples_w * (b - a)
        except ValueError:
            samples = float("nan")
        return {"edges": edges, "tail": tail, "samples": samples}

    def to_dict(self) -> dict:
        """Raw JSON form."""
        return {
            "pre": list(self.pre),
            "post": list(self.post),
            "tail": list(self.tail),
            "run": self.run.__dict__,
            "samples": samples_to_dict(self.samples),
        }

    @classmethod
    def from_dict(cls, d: dict) -> Burst:
        """Inverse of :meth:`to_dict`."""
        return cls(
            tuple(d["pre"]),
            tuple(d["post"]),
            tuple(d["tail"]),
            MatmulRun(**d["run"]),
            samples_from_dict(d["samples"]),
        )


@dataclass(frozen=True)
class Bursts:
    """Idle spans, the long reference window, and every burst by size."""

    idle: AlignedSpan
    reference: AlignedSpan
    reference_run: MatmulRun
    bursts: dict[str, tuple[Burst, ...]]

    @property
    def energy_per_matmul_j(self) -> float:
        """Energy above idle of one product in the long window, J (counter, aligned edges)."""
        return energy_per_matmul_j(self.idle, self.reference, self.reference_run)

    def ratios(self) -> dict[str, dict[str, list[float]]]:
        """Reading / expected energy, per size and method."""
        per = self.energy_per_matmul_j
        out = {}
        for size, bursts in self.bursts.items():
            out[size] = {m: [] for m in METHODS}
            for b in bursts:
                expected = per * b.run.matmuls
                for m, v in b.readings_j(self.idle.power_w, self.idle.samples_power_w).items():
                    out[size][m].append(v / expected)
        return out

    def derived(self) -> dict:
        """Per size and method, the error distribution (reading/expected - 1)."""
        d = {
            "energy_per_matmul_j": self.energy_per_matmul_j,
            "idle_w": self.idle.power_w,
            "idle_samples_w": self.idle.samples_power_w,
        }
        for size, by_method in self.ratios().items():
            dur = [b.run.duration_s * 1e3 for b in self.bursts[size]]
            d[size] = {"duration_ms": summary(dur)}
            for m, r in by_method.items():
                err = np.asarray(r) - 1.0
                err = err[np.isfinite(err)]
                d[size][m] = {**summary(err), "mean_abs": float(np.mean(np.abs(err))) if err.size else None}
        return d

    def rows(self) -> list[tuple[str, str]]:
        """Summary-table rows."""
        d = self.derived()
        rows = []
        for size in self.bursts:
            dur = d[size]["duration_ms"]["median"]
            parts = []
            for m in METHODS:
                e = d[size][m]
                if e["n"]:  # the bursts' median error and their whole range, not an interval
                    parts.append(f"{m} median {e['median']:+.0%} (range {e['min']:+.0%}..{e['max']:+.0%})")
            rows.append((f"burst {dur:.0f} ms, error", "; ".join(parts)))
        return rows

    def to_dict(self) -> dict:
        """Raw JSON form."""
        return {
            "idle": self.idle.to_dict(),
            "reference": self.reference.to_dict(),
            "reference_run": self.reference_run.__dict__,
            "bursts": {k: [b.to_dict() for b in v] for k, v in self.bursts.items()},
        }

    @classmethod
    def from_dict(cls, d: dict) -> Bursts:
        """Inverse of :meth:`to_dict`."""
        return cls(
            AlignedSpan.from_dict(d["idle"]),
            AlignedSpan.from_dict(d["reference"]),
            MatmulRun(**d["reference_run"]),
            {k: tuple(Burst.from_dict(b) for b in v) for k, v in d["bursts"].items()},
        )


def energy_per_matmul_j(idle: AlignedSpan, reference: AlignedSpan, run: MatmulRun) -> float:
    """Energy above ``idle`` of one product of ``run``, from its aligned span ``reference``, J."""
    above = reference.energy_j - idle.power_w * reference.duration_s
    # the span covers only part of the job: scale by the job's product rate
    return above / (reference.duration_s * run.matmuls / run.duration_s)


def _read(rig: Rig) -> tuple[float, float, int]:
    t0 = rig.clock.now()
    value = rig.board.energy_mj()
    return (t0, rig.clock.now(), value)


def _burst(rig: Rig, worker, count: int, rng) -> Burst:
    clock = rig.clock
    clock.sleep(rng.uniform(*GAP_S))
    pre = _read(rig)
    run = worker.matmul(LOAD_N, "random", count=count).result()
    post = _read(rig)
    clock.sleep(TAIL_S)
    tail = _read(rig)
    clock.sleep(0.05)  # let the sample covering the tail's end land
    samples = rig.board.power_samples(since_s=run.t0_s - SAMPLE_LEAD_S - 0.1)
    return Burst(pre, post, tail, run, samples)


def run_bursts(rig: Rig, worker, n: int) -> dict[str, tuple[Burst, ...]]:
    """``n`` bursts of each size, interleaved, each after a random gap from idle."""
    per = worker.seconds_per_matmul(LOAD_N)
    counts = {f"{round(t * 1e3)}ms": max(1, round(t / per)) for t in TARGETS_S}
    rng = np.random.default_rng(SEED)
    bursts: dict[str, list[Burst]] = {k: [] for k in counts}
    for i in range(n):
        rig.on_phase(f"burst {i + 1}/{n}")
        for size, count in counts.items():
            bursts[size].append(_burst(rig, worker, count, rng))
    return {k: tuple(v) for k, v in bursts.items()}


def assemble(m: dict, quick: bool) -> Bursts:
    """The record: the idle between the loads, the random-operand load span as the long window, the bursts."""
    return Bursts(m["idle_between"], m["random"].span, m["random"].run, m["bursts"])


def run(rig: Rig, quick: bool) -> Bursts:
    """This probe alone (``nvmeter probe --only bursts``)."""
    return assemble(schedule.measure(rig, quick, needs(quick)), quick)
