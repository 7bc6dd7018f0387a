"""The scorer: ``nvmeter score`` and ``nvmeter summarize``.

- :mod:`~nvmeter.score.config`: :class:`ScoreConfig` and the defaults, each with its reason.
- :mod:`~nvmeter.score.target`: :class:`Target`, the method a run scores.
- :mod:`~nvmeter.score.record`: :class:`RunRecord` and the raw readings it holds.
- :mod:`~nvmeter.score.checks`: the checks that can void a run's energy.
- :mod:`~nvmeter.score.procedure`: one run, start to record.
- :mod:`~nvmeter.score.summarize`: the tables, recomputed from records.
- :mod:`~nvmeter.score.method_client`, :mod:`~nvmeter.score.method_host`: the scorer's
  side and the worker's side of the process that loads and calls a method.
"""
