"""nvmeter: what one call of GPU code really costs in energy, from NVML, with an honest error bar.

The public API, in one place (``from nvmeter import EnergyWindow, measure, open_board``):

Boards (:mod:`nvmeter.boards`):
    open_board: the one factory of boards (a GPU by CUDA index or UUID, or the simulated one).
    open_boards, simulated_host: several boards ("all", or a list); a simulated host's boards on one clock.
    Board, BoardIdentity, PowerSample: the telemetry protocol.
    BoardProfile: the board's telemetry figures the meter uses.
    NvmlBoard, SimulatedBoard, SimConfig, Fault: the two implementations.
Meter (:mod:`nvmeter.meter`):
    EnergyWindow, measure, measure_many, Measurement: per-call energy above idle, with a bound.
    MeasureProgress: where a measure() run is, as its progress callback is told.
    JobWindow, DistributedWindow, JobMeasurement: one window over several boards, and over the
        ranks of a torch.distributed job; per-step energy above idle, each board counted once.
    IdleBaseline: where the idle power came from.
    EnergyMonitor: named begin/end windows, for code shaped like ZeusMonitor.
    ErrorModel: the bound's versioned state constants.
Probes (:mod:`nvmeter.probes`):
    Rig: a board and its context-holding worker (:mod:`nvmeter.worker.rig`).
    run_probes, load_report, ProbeReport: the board's characterisation.
Scorer (:mod:`nvmeter.score`):
    ScoreConfig, Target, RunRecord: ``nvmeter score``'s settings, method and run records.

Modules load on first use, so ``python -m nvmeter.worker.child`` starts fast.
"""

from __future__ import annotations

__version__ = "0.3.0"

_LAZY = {
    "open_board": "nvmeter.boards.factory",
    "open_boards": "nvmeter.boards.factory",
    "simulated_host": "nvmeter.boards.factory",
    "Board": "nvmeter.boards.protocol",
    "BoardIdentity": "nvmeter.boards.protocol",
    "PowerSample": "nvmeter.boards.protocol",
    "BoardProfile": "nvmeter.boards.profile",
    "NvmlBoard": "nvmeter.boards.nvml",
    "SimulatedBoard": "nvmeter.boards.simulated",
    "SimConfig": "nvmeter.boards.simulated",
    "Fault": "nvmeter.boards.simulated",
    "EnergyWindow": "nvmeter.meter.window",
    "measure": "nvmeter.meter.adaptive",
    "measure_many": "nvmeter.meter.adaptive",
    "MeasureProgress": "nvmeter.meter.adaptive",
    "Measurement": "nvmeter.meter.measurement",
    "JobWindow": "nvmeter.meter.job",
    "EnergyMonitor": "nvmeter.meter.monitor",
    "DistributedWindow": "nvmeter.meter.distributed",
    "JobMeasurement": "nvmeter.meter.jobmeasurement",
    "IdleBaseline": "nvmeter.meter.baseline",
    "ErrorModel": "nvmeter.meter.errormodel",
    "Rig": "nvmeter.worker.rig",
    "run_probes": "nvmeter.probes.report",
    "load_report": "nvmeter.probes.report",
    "ProbeReport": "nvmeter.probes.report",
    "ScoreConfig": "nvmeter.score.config",
    "Target": "nvmeter.score.target",
    "RunRecord": "nvmeter.score.record",
}

__all__ = [*_LAZY, "__version__"]


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'nvmeter' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
