"""Shared fixtures: the simulated board and rig; a guard for GPU-only tests."""

from __future__ import annotations

import pytest

from nvmeter.rig import Rig
from nvmeter.simboard import SimConfig, SimulatedBoard
from nvmeter.worker import SimWorker


@pytest.fixture
def sim_board() -> SimulatedBoard:
    return SimulatedBoard(SimConfig(seed=7))


@pytest.fixture
def sim_rig(sim_board) -> Rig:
    return Rig(sim_board, lambda: SimWorker(sim_board))
