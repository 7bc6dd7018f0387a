"""The worker: the process that holds the CUDA context, and its simulated twin.

- :mod:`~nvmeter.worker.protocol`: the :class:`Worker` interface and :class:`MatmulRun`.
- :mod:`~nvmeter.worker.process`: the parent side (start, talk, freeze, resume, reap).
- :mod:`~nvmeter.worker.child`: the child side (``python -m nvmeter.worker.child``).
- :mod:`~nvmeter.worker.simulated`: :class:`SimWorker` on the simulated board.
- :mod:`~nvmeter.worker.rig`: :class:`Rig`, a board and the worker on it.

Kept free of imports, so the child starts fast.
"""
