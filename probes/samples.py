"""The driver's power-sample buffer: spacing, history, and agreement with the counter.

``nvmlDeviceGetSamples(NVML_TOTAL_POWER_SAMPLES)`` keeps ~119 samples ~20 ms apart
on the H200 (docs/facts.md): finer than the counter's 100 ms, but only ~2.4 s of
history, so a window longer than that must read it more than once.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from nvmeter.boards.protocol import PowerSample
from nvmeter.meter.series import samples_from_dict, samples_to_dict, summary
from nvmeter.meter.span import AlignedSpan
from nvmeter.probes import schedule
from nvmeter.worker.rig import Rig

NAME = "samples"
TITLE = "power-sample buffer"
IN_QUICK = False

LOAD_N = schedule.LOAD_N


def needs(quick: bool) -> set[str]:
    """The schedule's measurements this probe's record is made of (:mod:`nvmeter.probes.schedule`)."""
    return {"idle_context", "buffer", "random"}


@dataclass(frozen=True)
class Samples:
    """One full buffer read, and an idle and a load span with their samples."""

    buffer: tuple[PowerSample, ...]
    idle: AlignedSpan
    load: AlignedSpan

    def derived(self) -> dict:
        """Spacing (ms), history (s), count, and samples/counter power ratios."""
        t = np.array([s.t_s for s in self.buffer])
        return {
            "count": len(self.buffer),
            "history_s": float(t[-1] - t[0]) if len(t) > 1 else 0.0,
            "spacing_ms": summary(np.diff(t) * 1e3),
            "idle_counter_w": self.idle.power_w,
            "idle_samples_w": self.idle.samples_power_w,
            "idle_ratio": self.idle.samples_power_w / self.idle.power_w,
            "load_counter_w": self.load.power_w,
            "load_samples_w": self.load.samples_power_w,
            "load_ratio": self.load.samples_power_w / self.load.power_w,
        }

    def rows(self) -> list[tuple[str, str]]:
        """Summary-table rows."""
        d = self.derived()
        sp = d["spacing_ms"]
        return [
            (
                "sample buffer",
                f"{d['count']} samples, {sp['median']:.1f} ms apart "
                f"({sp['min']:.1f}-{sp['max']:.1f}), {d['history_s']:.2f} s of history",
            ),
            (
                "samples vs counter",
                f"idle {d['idle_samples_w']:.1f} vs {d['idle_counter_w']:.1f} W "
                f"({d['idle_ratio'] - 1:+.2%}); "
                f"load {d['load_samples_w']:.1f} vs {d['load_counter_w']:.1f} W ({d['load_ratio'] - 1:+.2%})",
            ),
        ]

    def to_dict(self) -> dict:
        """Raw JSON form."""
        return {
            "buffer": samples_to_dict(self.buffer),
            "idle": self.idle.to_dict(),
            "load": self.load.to_dict(),
        }

    @classmethod
    def from_dict(cls, data: dict) -> Samples:
        """Inverse of :meth:`to_dict`."""
        return cls(
            samples_from_dict(data["buffer"]),
            AlignedSpan.from_dict(data["idle"]),
            AlignedSpan.from_dict(data["load"]),
        )


def assemble(m: dict, quick: bool) -> Samples:
    """The record: a buffer read at context idle, the context idle span and the random-operand load span."""
    return Samples(m["buffer"], m["idle_context"], m["random"].span)


def run(rig: Rig, quick: bool) -> Samples:
    """This probe alone (``nvmeter probe --only samples``)."""
    return assemble(schedule.measure(rig, quick, needs(quick)), quick)
