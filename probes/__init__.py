"""The probes, in the order ``nvmeter probe`` runs them.

Each module has ``NAME``, ``TITLE``, ``IN_QUICK``, ``budget_s(quick)``, ``run(rig, quick)``
returning a frozen record with ``derived()``, ``rows()``, ``to_dict()`` and a
``from_dict()`` class method, so every derived number can be recomputed from the
raw series in a probe file.

The order keeps context changes few: the no-context measurements come first, and
cadence ends by closing the context.
"""

from . import bursts, cadence, idle, polling, read_cost, reference, samples, step

ALL = (read_cost, polling, idle, samples, step, bursts, reference, cadence)
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
}


def selected(quick: bool) -> tuple:
    """The probes a run makes: all, or the quick subset."""
    return tuple(m for m in ALL if m.IN_QUICK or not quick)
