"""The error model: how a window's bound is built, versioned so records keep theirs.

A Measurement's bound has two parts. The *reading* part (edges, idle, sampling) follows
from the board's telemetry (:class:`~nvmeter.boards.profile.BoardProfile`). The *state*
part says how far the window's calls may cost from the same calls in steady state; its
constants live here, and only here. Every Measurement stores the version of the model
that derives its figures, so recomputing an old record uses the model it was made with.

History:
    1: nvmeter 0.1. ``state_rel`` 0.4% of the energy above idle (window-to-window
       variation), plus for a window whose lead-in drew under half the work's power
       ``cold_rel`` 2.5% of the energy above idle of its first ``cold_ramp_s`` 0.3 s.
       Fitted by ``python bench/window_accuracy.py fit results/window-accuracy-h200.json``
       (run 1, H200, FP32 matmuls) and checked on run 2 (another H200).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from nvmeter import errors


@dataclass(frozen=True)
class ErrorModel:
    """The bound's state constants, one set per version.

    Attributes:
        version: The model's version (the history above).
        state_rel: Window-to-window variation of the same calls, share of the energy above idle.
        cold_rel: Extra share, for a cold window, of the energy above idle of its first
            ``cold_ramp_s``.
        cold_ramp_s: How long the clocks ramp after idle, s.
        lead_s: The lead-in: sample history just before the window's first read, s.
        cold_lead_share: A window is cold when its lead-in drew under this share of the
            work's power above idle.

    """

    version: int
    state_rel: float
    cold_rel: float
    cold_ramp_s: float
    lead_s: float
    cold_lead_share: float

    def to_dict(self) -> dict:
        """Plain dict for JSON."""
        return asdict(self)


MODELS: dict[int, ErrorModel] = {
    1: ErrorModel(
        version=1, state_rel=0.004, cold_rel=0.025, cold_ramp_s=0.3, lead_s=0.3, cold_lead_share=0.5
    ),
}
CURRENT = max(MODELS)


def model(version: int) -> ErrorModel:
    """The error model of ``version``.

    Raises:
        RecordError: a version this nvmeter does not know (a record from a newer one).

    """
    try:
        return MODELS[version]
    except (KeyError, TypeError) as exc:
        known = ", ".join(map(str, MODELS))
        raise errors.RecordError(f"error model {version!r} is not one this nvmeter knows ({known})") from exc
