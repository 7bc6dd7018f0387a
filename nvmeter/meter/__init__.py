"""The meter: counter series and spans, idle baselines, sync, the error model and the windows.

- :mod:`~nvmeter.meter.series`, :mod:`~nvmeter.meter.span`: counter reads, steps, aligned spans.
- :mod:`~nvmeter.meter.baseline`: :class:`IdleBaseline` and the idle spans it is measured from.
- :mod:`~nvmeter.meter.sync`: device synchronisation at the edges.
- :mod:`~nvmeter.meter.errormodel`: the bound's state constants, versioned.
- :mod:`~nvmeter.meter.measurement`: :class:`Measurement`, one window's raw readings.
- :mod:`~nvmeter.meter.window`: :class:`EnergyWindow`.
- :mod:`~nvmeter.meter.adaptive`: :func:`measure` and :func:`measure_many`.

The meter imports boards only: no probe, worker, workload or scorer.
"""
