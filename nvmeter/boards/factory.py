"""`open_board`: the one place a :class:`~nvmeter.boards.protocol.Board` is made."""

from __future__ import annotations

from nvmeter.boards.protocol import Board, device_spec, names_all


def open_board(device: int | str | Board | None = None, *, simulate: bool = False, config=None) -> Board:
    """A board by CUDA index, ``GPU-…`` UUID, or the simulated one.

    Args:
        device: CUDA index (``CUDA_VISIBLE_DEVICES`` respected), ``GPU-…`` UUID or unique
            prefix, None for index 0, or a Board (returned as it is).
        simulate: Make a :class:`~nvmeter.boards.simulated.SimulatedBoard` instead.
        config: The simulated board's :class:`~nvmeter.boards.simulated.SimConfig`.

    Raises:
        UsageError: a device that is no CUDA index or UUID (:func:`~nvmeter.boards.protocol.device_spec`).
        DeviceNotFound: with ``simulate``, a device other than index 0 or the simulated UUID.
        NvmlUnavailable, NoGpu, DeviceNotFound, NotSupported, PermissionDenied: NVML's answer.

    """
    from nvmeter import errors

    if isinstance(device, Board) and not isinstance(device, (int, str)):
        return device
    if simulate:
        from nvmeter.boards.simulated import SimulatedBoard

        device = device_spec(device)  # read as a GPU's: "0" and " 0 " are index 0 there too (a review)
        board = SimulatedBoard(config)
        uuid = board.identity().uuid
        named = isinstance(device, str) and uuid.startswith(device)
        if device not in (None, 0) and not named:
            raise errors.DeviceNotFound(f"the simulated board is CUDA index 0 ({uuid}); no device {device!r}")
        return board
    if config is not None:
        raise errors.UsageError("config is for the simulated board (simulate=True)")
    from nvmeter.boards.nvml import NvmlBoard

    return NvmlBoard(device)


def simulated_host(boards: int = 1, *, clock=None, config=None) -> list[Board]:
    """The simulated boards of one host, on one shared virtual clock.

    Board ``i`` has seed ``config.seed + i`` and, where ``config`` gives a UUID, that UUID
    with ``i`` added to its last field (hexadecimal); else each takes the next simulated UUID.
    The boards of a simulated host differ in identity and noise.

    Args:
        boards: How many boards the host has (>= 1).
        clock: Their shared :class:`~nvmeter.clock.VirtualClock` (default: a new one).
        config: Board 0's :class:`~nvmeter.boards.simulated.SimConfig`.

    Raises:
        UsageError: fewer than one board, or a UUID whose last field is not hexadecimal.

    """
    from nvmeter import errors
    from nvmeter.boards.simulated import SimConfig, SimulatedBoard
    from nvmeter.clock import VirtualClock

    if not isinstance(boards, int) or boards < 1:
        raise errors.UsageError(f"a simulated host has at least one board, not {boards!r}")
    clock = clock or VirtualClock()
    base = config or SimConfig()
    uuids = [None] * boards if base.uuid is None else _uuids_from(base.uuid, boards)
    return [SimulatedBoard(base.with_(seed=base.seed + i, uuid=u), clock) for i, u in enumerate(uuids)]


def _uuids_from(first: str, boards: int) -> list[str]:
    """``first`` and the UUIDs after it, counting in its last (hexadecimal) field."""
    from nvmeter import errors

    stem, last = first.rsplit("-", 1)
    try:
        int(last, 16)
    except ValueError as exc:
        raise errors.UsageError(f"a simulated UUID ends in a hexadecimal field, not {first!r}") from exc
    return [f"{stem}-{int(last, 16) + i:012x}" for i in range(boards)]


def open_boards(devices, *, simulate: bool = False, sim_boards: int = 1, available=None) -> list[Board]:
    """Several boards: ``"all"`` (every visible one), or a list of indices, UUIDs or Boards.

    A board named twice (by index and by UUID, say) is opened once.

    Args:
        devices: ``"all"``, one device as :func:`open_board` takes, or a sequence of them.
        simulate: Pick from a new simulated host (:func:`simulated_host`) instead of NVML.
        sim_boards: That simulated host's number of boards.
        available: Pick indices and UUIDs from these boards instead (a simulated host
            made by the caller); ``"all"`` is all of them.

    Returns:
        The boards, in the order named.

    Raises:
        UsageError: an empty list. DeviceNotFound and the rest: as :func:`open_board`.

    """
    from nvmeter import errors

    specs = _specs(devices)
    if simulate or available is not None:
        host = list(available) if available is not None else simulated_host(sim_boards)
        boards = host if names_all(devices) else [_pick_simulated(host, spec) for spec in specs]
    elif names_all(devices):
        from nvmeter.boards.nvml import visible_uuids

        boards = [open_board(uuid) for uuid in visible_uuids()]
    else:
        boards = [open_board(spec) for spec in specs]
    unique: dict[str, Board] = {}
    for board in boards:
        unique.setdefault(board.identity().uuid, board)
    if not unique:
        raise errors.UsageError("devices names no board: give 'all' or at least one index or UUID")
    return list(unique.values())


def _specs(devices) -> list:
    if names_all(devices):
        return []
    if isinstance(devices, (int, str, Board)) or devices is None:
        return [devices]
    return list(devices)


def _pick_simulated(host: list[Board], spec) -> Board:
    from nvmeter import errors

    if isinstance(spec, Board) and not isinstance(spec, (int, str)):
        return spec
    spec = device_spec(spec)
    if spec is None:
        spec = 0
    if isinstance(spec, int) and spec < len(host):
        return host[spec]
    if isinstance(spec, str):
        hits = [b for b in host if b.identity().uuid.startswith(spec)]
        if len(hits) == 1:
            return hits[0]
    raise errors.DeviceNotFound(
        f"the simulated host has {len(host)} board(s) (indices 0-{len(host) - 1}); no device {spec!r}"
    )
