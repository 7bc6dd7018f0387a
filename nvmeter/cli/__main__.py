"""``python -m nvmeter.cli``: the same as the ``nvmeter`` console script."""

from nvmeter.cli import main

main()
