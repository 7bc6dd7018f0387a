"""nvmeter: what one call of GPU code really costs in energy, from NVML, with an honest error bar.

Public API:
    Board, BoardIdentity, PowerSample: the telemetry protocol (:mod:`nvmeter.board`).
    NvmlBoard: a real GPU (:mod:`nvmeter.nvml`, the only module importing pynvml).
    SimulatedBoard, SimConfig, Fault: the simulated board (:mod:`nvmeter.simboard`).
    Rig: a board and its context-holding worker (:mod:`nvmeter.rig`).
    run_probes, load_report, ProbeReport: board characterisation (:mod:`nvmeter.probe`).
    EnergyWindow, measure, Measurement: per-call energy above idle (:mod:`nvmeter.window`).
    IdleBaseline: where the idle power came from (:mod:`nvmeter.idle`).
    ScoreConfig, RunRecord: ``nvmeter score``'s settings and run records (:mod:`nvmeter.scorerun`;
        the procedure is :mod:`nvmeter.score`, the tables :mod:`nvmeter.summary`).
    errors: the exception hierarchy.

Heavy modules load on first use, so ``python -m nvmeter.worker`` starts fast.
"""

from __future__ import annotations

__version__ = "0.1.0"

_LAZY = {
    "Board": "nvmeter.board",
    "BoardIdentity": "nvmeter.board",
    "PowerSample": "nvmeter.board",
    "NvmlBoard": "nvmeter.nvml",
    "SimulatedBoard": "nvmeter.simboard",
    "SimConfig": "nvmeter.simboard",
    "Fault": "nvmeter.simboard",
    "Rig": "nvmeter.rig",
    "run_probes": "nvmeter.probe",
    "load_report": "nvmeter.probe",
    "ProbeReport": "nvmeter.probe",
    "EnergyWindow": "nvmeter.window",
    "measure": "nvmeter.window",
    "Measurement": "nvmeter.window",
    "IdleBaseline": "nvmeter.idle",
    "ScoreConfig": "nvmeter.scorerun",
    "RunRecord": "nvmeter.scorerun",
}

__all__ = [*_LAZY, "__version__"]


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'nvmeter' has no attribute {name!r}")
