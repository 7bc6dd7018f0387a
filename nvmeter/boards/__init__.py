"""Boards: the telemetry protocol, its NVML and simulated implementations, profiles, the factory.

- :mod:`~nvmeter.boards.protocol`: :class:`Board`, :class:`BoardIdentity`, :class:`PowerSample`.
- :mod:`~nvmeter.boards.nvml`: a real GPU; the only module that imports ``pynvml``.
- :mod:`~nvmeter.boards.simulated`: a model of a board on a virtual clock, with faults.
- :mod:`~nvmeter.boards.profile`: :class:`BoardProfile`, the telemetry figures the meter uses.
- :mod:`~nvmeter.boards.factory`: :func:`open_board`, the one place a board is made.

This wing imports nothing of the meter, the probes or the scorer.
"""
