"""J/TFLOP reference: FP32 4096^2 products with TF32 off, above the idle either side.

With constant operands 2^-6 every product entry is exactly 1 (4096 x 2^-12), which
checks that the products really ran in FP32; random operands draw more power. The
A100 band for constant operands is 6-11 J/TFLOP at 15-23 TFLOP/s (docs/facts.md);
:mod:`nvmeter.probes.bands` holds the bands and where they come from.
"""

from __future__ import annotations

from dataclasses import dataclass

from nvmeter.meter.span import AlignedSpan, measure_span
from nvmeter.probes import schedule
from nvmeter.worker.protocol import MatmulRun
from nvmeter.worker.rig import Rig

NAME = "reference"
TITLE = "J/TFLOP reference"
IN_QUICK = True

# Matrix size, elements a side: the public A100 probe's reference ran FP32 4096^2 products, whose
# 6-11 J/TFLOP band nvmeter check compares against (docs/facts.md, docs/probe.md).
N = 4096
OPERANDS = ("constant", "random")


def _durations(quick: bool) -> tuple[float, float]:
    """(idle span, load span) seconds of :func:`run_trial`; the A100 recipe ran 5 s of load."""
    return (0.6, 1.0) if quick else (2.0, 5.0)


def _operands(quick: bool) -> tuple[str, ...]:
    """Quick runs only the band's recipe (constant operands)."""
    return OPERANDS[:1] if quick else OPERANDS


def needs(quick: bool) -> set[str]:
    """The schedule's measurements this probe's record is made of (:mod:`nvmeter.probes.schedule`).

    The constant trial's idle before is the context idle span, its idle after the span between
    the two loads, which is also the random trial's idle before.
    """
    base = {"idle_context", "constant", "idle_between"}
    return base if quick else base | {"random", "idle_after"}


@dataclass(frozen=True)
class Trial:
    """Idle before, the load span, idle after, and the job itself."""

    idle_before: AlignedSpan
    load: AlignedSpan
    idle_after: AlignedSpan
    run: MatmulRun

    @property
    def idle_w(self) -> float:
        """Mean of the idle either side, W."""
        return (self.idle_before.power_w + self.idle_after.power_w) / 2

    @property
    def tflops(self) -> float:
        """Achieved TFLOP/s over the whole job."""
        return self.run.tflops

    @property
    def above_idle_w(self) -> float:
        """Load power above idle, W."""
        return self.load.power_w - self.idle_w

    @property
    def j_per_tflop(self) -> float:
        """Energy above idle per TFLOP, J (nan for a job that did no products: never inf)."""
        return self.above_idle_w / self.tflops if self.tflops > 0 else float("nan")

    @property
    def exact(self) -> bool | None:
        """For constant operands: every entry of the last product exactly 1."""
        return None if self.run.max_abs_err is None else self.run.max_abs_err == 0.0

    def derived(self) -> dict:
        """TFLOP/s, W (load, idle either side, above idle), J/TFLOP, exactness."""
        return {
            "tflops": self.tflops,
            "load_w": self.load.power_w,
            "idle_before_w": self.idle_before.power_w,
            "idle_after_w": self.idle_after.power_w,
            "above_idle_w": self.above_idle_w,
            "j_per_tflop": self.j_per_tflop,
            "exact": self.exact,
            "max_abs_err": self.run.max_abs_err,
        }

    def to_dict(self) -> dict:
        """Raw JSON form."""
        return {
            "idle_before": self.idle_before.to_dict(),
            "load": self.load.to_dict(),
            "idle_after": self.idle_after.to_dict(),
            "run": self.run.__dict__,
        }

    @classmethod
    def from_dict(cls, d: dict) -> Trial:
        """Inverse of :meth:`to_dict`."""
        return cls(
            AlignedSpan.from_dict(d["idle_before"]),
            AlignedSpan.from_dict(d["load"]),
            AlignedSpan.from_dict(d["idle_after"]),
            MatmulRun(**d["run"]),
        )


@dataclass(frozen=True)
class Reference:
    """One trial per operand kind."""

    trials: dict[str, Trial]

    def derived(self) -> dict:
        """Per operand kind: see :meth:`Trial.derived`."""
        return {k: t.derived() for k, t in self.trials.items()}

    def rows(self) -> list[tuple[str, str]]:
        """Summary-table rows."""
        rows = []
        for k, t in self.trials.items():
            exact = {True: ", exact", False: ", NOT exact", None: ""}[t.exact]
            rows.append(
                (
                    f"reference, {k} operands",
                    f"{t.j_per_tflop:.2f} J/TFLOP at {t.tflops:.1f} TFLOP/s, "
                    f"{t.load.power_w:.0f} W ({t.above_idle_w:.0f} W above idle){exact}",
                )
            )
        return rows

    def to_dict(self) -> dict:
        """Raw JSON form."""
        return {"n": N, "trials": {k: t.to_dict() for k, t in self.trials.items()}}

    @classmethod
    def from_dict(cls, d: dict) -> Reference:
        """Inverse of :meth:`to_dict`."""
        return cls({k: Trial.from_dict(t) for k, t in d["trials"].items()})


def run_trial(rig: Rig, operands: str, quick: bool) -> Trial:
    """Idle span, a load span inside one product job, idle span: one trial on its own.

    ``nvmeter check`` (5 s of load between 2 s idle spans: the A100 recipe) and the scorer
    (``--reference quick``: 1 s between 0.6 s spans) run this; ``nvmeter probe`` makes its
    trials from the schedule's shared spans instead (:func:`assemble`).
    """
    board, clock = rig.board, rig.clock
    worker = rig.context()
    idle_s, load_s = _durations(quick)
    rig.on_phase(f"{operands} operands: idle before")
    before = measure_span(board, clock, idle_s)
    rig.on_phase(f"{operands} operands: load")
    # the span starts 0.3 s in and its edges take up to 2 x 0.35 s
    job = worker.matmul(N, operands, seconds=load_s + 1.5, check=True)
    clock.sleep(0.3)
    load = measure_span(board, clock, load_s)
    run_ = job.result()
    rig.on_phase(f"{operands} operands: idle after")
    clock.sleep(0.3)
    after = measure_span(board, clock, idle_s)
    return Trial(before, load, after, run_)


def assemble(m: dict, quick: bool) -> Reference:
    """Constant operands (the band's recipe) and, in a full run, random ones, from the schedule's spans."""
    constant = m["constant"]
    trials = {"constant": Trial(m["idle_context"], constant.span, m["idle_between"], constant.run)}
    if not quick:
        random = m["random"]
        trials["random"] = Trial(m["idle_between"], random.span, m["idle_after"], random.run)
    return Reference(trials)


def run(rig: Rig, quick: bool) -> Reference:
    """This probe alone (``nvmeter probe --only reference``)."""
    return assemble(schedule.measure(rig, quick, needs(quick)), quick)
