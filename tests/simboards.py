"""The simulated board the meter's tests start from."""

from nvmeter.boards.profile import HOPPER
from nvmeter.boards.simulated import SimConfig, SimulatedBoard

# The simulated H200's profile with a run level its owner set (the board known to run at one level:
# the simulator has no second one unless told), so error model 13's floor is model 2's 0.7%, not the
# Hopper defaults' 3%. The tests of measure()'s stopping rule use it: their targets are under 3%.
LEVEL_GIVEN = HOPPER.with_(source="tests: Hopper defaults, the board's run level", run_level_rel=0.003)


def context_board(seed: int) -> SimulatedBoard:
    """A simulated H200 (``seed``) whose CUDA context has been open for 1 s of virtual time."""
    board = SimulatedBoard(SimConfig(seed=seed))
    board.set_context(True)
    board.clock.sleep(1.0)
    return board


def pulsed_window(board: SimulatedBoard, load_w: float, on_s: float, off_s: float, calls: int, **window):
    """A window (no sync) of ``calls`` calls: ``load_w`` above idle for ``on_s``, then idle for ``off_s``.

    ``window``: more of EnergyWindow's keywords (``profile=``, ``idle=``, ...).

    Returns:
        The window's Measurement.
    """
    from nvmeter.meter.window import EnergyWindow

    with EnergyWindow(board, sync="none", **window) as w:
        for _ in range(calls):
            board.set_load(load_w)
            board.clock.sleep(on_s)
            board.set_load(0.0)
            board.clock.sleep(off_s)
            w.call()
    return w.result
