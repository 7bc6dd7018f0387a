"""Window accuracy on real GPUs: nvmeter's per-call energy against long references, per kind of work.

Modules: :mod:`~accuracy.kinds` (the work), :mod:`~accuracy.plan` (which trials, in
which blocks), :mod:`~accuracy.stream` (timed calls and their gaps),
:mod:`~accuracy.runner` (one board's run), :mod:`~accuracy.store` (the JSON record),
:mod:`~accuracy.analysis` (errors against references), :mod:`~accuracy.fitcheck` (the
error model's state constants, and issue 10's targets), :mod:`~accuracy.plot`,
:mod:`~accuracy.legacy` (schema-1 files of runs 1 and 2), :mod:`~accuracy.cli`.
Entry: ``python bench/window_accuracy.py run|plan|analyze|fit|check ...``.
"""
