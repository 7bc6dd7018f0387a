"""A board's :class:`~nvmeter.boards.profile.BoardProfile` from its probe report.

Each figure the meter uses comes from the probe that measures it; a figure the report
lacks (a quick or partial probe) keeps the family's default, and the source says which.
"""

from __future__ import annotations

from nvmeter.boards.profile import BoardProfile, default_profile

# A bound on the sample buffer's disagreement with the counter: twice the larger of the
# idle and load ratios' offsets the samples probe read, and never under 0.1%.
_SAMPLES_MARGIN = 2.0
_SAMPLES_FLOOR = 0.001


def profile_from_report(report) -> BoardProfile:
    """The profile of the probed board (a :class:`~nvmeter.probes.report.ProbeReport`).

    What its probes did not measure comes from the family's defaults. The user cache keeps the
    probes of earlier runs with a run's own (``nvmeter probe --only``), so a run of some probes
    does not reset what an earlier run measured.
    """
    derived = report.derived()
    profile = default_profile(report.board.name)
    used = []
    for name, figures in _FIGURES.items():
        if name in derived:
            changes = figures(derived[name], profile)
            if changes:
                profile = profile.with_(**changes)
                used.append(name)
    source = f"probe {report.board.uuid} {report.finished_utc}: " + (", ".join(used) or "no telemetry probe")
    return profile.with_(source=source)


def _cadence(d: dict, _base: BoardProfile) -> dict:
    gaps = [
        level["gap_ms"]["max"] for level in d.values() if isinstance(level, dict) and level["gap_ms"]["n"]
    ]
    return {"counter_period_s": max(gaps) / 1e3} if gaps else {}


def _polling(d: dict, _base: BoardProfile) -> dict:
    return {"polling_artefact_w": max(0.0, d["artefact_w"])}


def _samples(d: dict, _base: BoardProfile) -> dict:
    offset = max(abs(d["idle_ratio"] - 1), abs(d["load_ratio"] - 1))
    return {
        "sample_spacing_s": d["spacing_ms"]["median"] / 1e3,
        "samples_vs_counter": max(_SAMPLES_FLOOR, _SAMPLES_MARGIN * offset),
    }


# The step probe's counter delays (10-11 ms on the H200) bound the power lag from above but are
# not it: the lag an in-work edge sees was fitted on the window bench (nvmeter.boards.profile).
def _cap_spread(d: dict, _base: BoardProfile) -> dict:
    from nvmeter.probes.capspread import profile_spread

    spread = profile_spread(d)
    return {"cap_spread": spread} if spread else {}


def _run_levels(d: dict, base: BoardProfile) -> dict:
    """Only a wider run level than the family's: eight runs cannot rule out a rarer level.

    A probe whose runs all took one level says little of a level one run in ten takes: eight runs
    all take the same level with a chance of 0.9^8 + 0.1^8 = 43%, and 59 of 150 such probes read
    under it, and then every run at that level fell outside a bound that
    trusted the probe (an adversarial review on the simulated board, 2026-12-07). Ruling out a
    level taken once in twenty runs, with 95% confidence, needs about 60 runs without one (the
    rule of three), which a probe of a minute cannot make.
    """
    level = d["run_level_rel"]  # None: too few runs with a figure, or a limited load
    return {"run_level_rel": level} if level is not None and level > (base.run_level_rel or 0.0) else {}


_FIGURES = {
    "cadence": _cadence,
    "polling": _polling,
    "samples": _samples,
    "cap_spread": _cap_spread,
    "run_levels": _run_levels,
}
