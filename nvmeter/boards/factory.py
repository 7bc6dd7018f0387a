"""`open_board`: the one place a :class:`~nvmeter.boards.protocol.Board` is made."""

from __future__ import annotations

from nvmeter.boards.protocol import Board


def open_board(device: int | str | Board | None = None, *, simulate: bool = False, config=None) -> Board:
    """A board by CUDA index, ``GPU-…`` UUID, or the simulated one.

    Args:
        device: CUDA index (``CUDA_VISIBLE_DEVICES`` respected), ``GPU-…`` UUID or unique
            prefix, None for index 0, or a Board (returned as it is).
        simulate: Make a :class:`~nvmeter.boards.simulated.SimulatedBoard` instead.
        config: The simulated board's :class:`~nvmeter.boards.simulated.SimConfig`.

    Raises:
        DeviceNotFound: with ``simulate``, a device other than index 0 or the simulated UUID.
        NvmlUnavailable, NoGpu, DeviceNotFound, NotSupported, PermissionDenied: NVML's answer.

    """
    from nvmeter import errors

    if isinstance(device, Board) and not isinstance(device, (int, str)):
        return device
    if simulate:
        from nvmeter.boards.simulated import SimulatedBoard

        board = SimulatedBoard(config)
        uuid = board.identity().uuid
        named = isinstance(device, str) and len(device) > 4 and uuid.startswith(device)
        if device not in (None, 0) and not named:
            raise errors.DeviceNotFound(f"the simulated board is CUDA index 0 ({uuid}); no device {device!r}")
        return board
    if config is not None:
        raise errors.UsageError("config is for the simulated board (simulate=True)")
    from nvmeter.boards.nvml import NvmlBoard

    return NvmlBoard(device)
