"""The ``nvmeter`` command: a thin layer over the library.

Exit codes (README, "Exit codes"): 0 success; 1 a check failed; 2 bad input (arguments,
files, paths); 3 telemetry unavailable (no driver, no GPU, unsupported, lost);
4 the GPU worker failed; 130 interrupted.

The modules, each owning one thing:

- :mod:`~nvmeter.cli.root`: the typer app, ``--version``, the commands in the help's order,
  :func:`main` (the console script's, through :mod:`nvmeter._entry`) and click's refusals as one line.
- :mod:`~nvmeter.cli.console`: standard output and standard error (``out``, ``err``), one-line
  messages (``say_line``), tables, and a standard output that is gone or full.
- :mod:`~nvmeter.cli.guard`: what runs around each command (``guarded``): nvmeter's errors,
  Ctrl-C and the ending signals as one line and an exit code, the orphans the console adopts.
- :mod:`~nvmeter.cli.options`: the options' and arguments' parsers and shared declarations
  (paths, flags, ``--device``, ``--band``, the probe names).
- a module per command: :mod:`~nvmeter.cli.probe`, :mod:`~nvmeter.cli.show`,
  :mod:`~nvmeter.cli.run`, :mod:`~nvmeter.cli.check`, :mod:`~nvmeter.cli.score`,
  :mod:`~nvmeter.cli.summarize` and :mod:`~nvmeter.cli.data` (the ``data`` sub-app).

The command modules import none of root's: it imports them and registers their functions.
``app`` and ``main`` load root when first asked for, so that ``python -m nvmeter.cli`` puts its
Ctrl-C handler in place (:mod:`nvmeter._entry`) before typer is imported (a new user's trial: a
Ctrl-C in those ~0.1 s was a traceback).
"""

__all__ = ["app", "main"]


def __getattr__(name: str):
    if name in __all__:
        from nvmeter.cli import root

        return getattr(root, name)
    raise AttributeError(f"module 'nvmeter.cli' has no attribute {name!r}")
