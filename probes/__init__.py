"""The probes, in the order a probe file lists them.

Each module has ``NAME``, ``TITLE``, ``IN_QUICK``, ``needs(quick)`` (the measurements of
:mod:`nvmeter.probes.schedule` its record is made of), ``assemble(measured, quick)`` and
``run(rig, quick)`` (the probe alone), returning a frozen record with ``derived()``,
``rows()``, ``to_dict()`` and a ``from_dict()`` class method, so every derived number can be
recomputed from the raw series in a probe file.

The schedule, not this order, decides when each thing is measured: the no-context
measurements first, each span made once for every probe that uses it.
"""

from . import (
    bursts,
    cadence,
    capspread,
    coverage,
    idle,
    polling,
    read_cost,
    reference,
    runlevels,
    samples,
    step,
)

ALL = (read_cost, polling, idle, samples, step, bursts, reference, cadence, capspread, runlevels, coverage)
BY_NAME = {m.NAME: m for m in ALL}
RECORDS = {
    "read_cost": read_cost.ReadCost,
    "polling": polling.Polling,
    "idle": idle.Idle,
    "samples": samples.Samples,
    "step": step.Step,
    "bursts": bursts.Bursts,
    "reference": reference.Reference,
    "cadence": cadence.Cadence,
    "cap_spread": capspread.CapSpread,
    "run_levels": runlevels.RunLevels,
    "coverage": coverage.Coverage,
}


def offered(quick: bool) -> tuple:
    """The probes a run may make: all, or the quick subset."""
    return tuple(m for m in ALL if m.IN_QUICK or not quick)


def selected(quick: bool) -> tuple:
    """The probes a run makes unless told which: those offered, less the opt-in ones.

    The cap-spread, run-level and coverage probes are opt-in (``--cap-spread``, ``--run-levels``,
    ``--coverage``, or named in ``--only``): their ~30 s, ~45 s and ~20 s would take a full run past
    issue 16's 60 s.
    """
    return tuple(m for m in offered(quick) if not getattr(m, "OPT_IN", False))
