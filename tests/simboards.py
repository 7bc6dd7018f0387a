"""The simulated board the meter's tests start from."""

from nvmeter.boards.simulated import SimConfig, SimulatedBoard


def context_board(seed: int) -> SimulatedBoard:
    """A simulated H200 (``seed``) whose CUDA context has been open for 1 s of virtual time."""
    board = SimulatedBoard(SimConfig(seed=seed))
    board.set_context(True)
    board.clock.sleep(1.0)
    return board
