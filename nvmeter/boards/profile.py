"""`BoardProfile`: the telemetry properties of one board that the meter's edges and bound use.

Every figure here is one that ``nvmeter probe`` measures. A profile names where it came
from (``source``): a family's defaults, or a probe file of that very board. The meter reads
these figures only from a profile, never from module constants, so a board that differs
from the one our defaults were measured on gets its own figures once it is probed.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace

from nvmeter import errors


@dataclass(frozen=True)
class BoardProfile:
    """What the meter needs to know of a board's telemetry.

    Attributes:
        source: Where the figures come from, e.g. ``"defaults:H200"`` or a probe file's path.
        counter_period_s: Energy-counter update period, s. Plain edges are known to a period.
        edge_timeout_s: Longest wait for a counter step at an aligned edge, s.
        polling_artefact_w: Extra board power while the counter is polled back to back, W.
        tail_s: Wait after the work before the end edge, s (the counter's step delay plus
            the samples' fall to idle).
        sample_spacing_s: Spacing of the driver's power samples, s.
        sample_lead_s: Samples taken before the work's start when integrating it, s.
        samples_vs_counter: Relative disagreement of the sample buffer's integral with the
            counter over seconds (a bound, not a correction).
        sample_every_s: Read the sample buffer at least this often, s (its history is longer).

    """

    source: str
    counter_period_s: float
    edge_timeout_s: float
    polling_artefact_w: float
    tail_s: float
    sample_spacing_s: float
    sample_lead_s: float
    samples_vs_counter: float
    sample_every_s: float

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name != "source" and not (isinstance(value, (int, float)) and 0 <= value < 1e6):
                raise errors.RecordError(f"board profile {self.source}: {f.name} = {value!r} is not a figure")

    def to_dict(self) -> dict:
        """Plain dict for JSON."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> BoardProfile:
        """Inverse of :meth:`to_dict`.

        Raises:
            RecordError: a field is missing or not a figure.

        """
        try:
            return cls(**{f.name: data[f.name] for f in fields(cls)})
        except (KeyError, TypeError) as exc:
            raise errors.RecordError(f"a board profile lacks {exc}") from exc

    def with_(self, **changes) -> BoardProfile:
        """A copy with some figures changed."""
        return replace(self, **changes)


# The H200 figures nvmeter 0.1 used as module constants, from results/probe-h200.json
# (H200 GPU-2e139fc3): counter period 100.0 ms median; longest gap 116 ms seen, 0.35 s
# also covers a late update and a slow read; polling artefact +2.8 W; the counter follows a
# load within 10-11 ms and samples after a burst fall to idle within ~60 ms; samples
# 20.0 ms apart; samples vs counter +0.07% idle, +0.04% load (0.1% bound); the buffer holds
# 2.36 s, read once a second. Records of score schema 1 were derived with these.
H200_V1 = BoardProfile(
    source="defaults:H200 (results/probe-h200.json)",
    counter_period_s=0.100,
    edge_timeout_s=0.35,
    polling_artefact_w=2.8,
    tail_s=0.06,
    sample_spacing_s=0.020,
    sample_lead_s=0.02,
    samples_vs_counter=0.001,
    sample_every_s=1.0,
)


def default_profile(board_name: str) -> BoardProfile:
    """The profile for a board that has not been probed, by its NVML name.

    Only the H200 has been measured so far, so every board gets its figures; the source
    says so. (The error-model work widens these per family.)
    """
    del board_name
    return H200_V1
