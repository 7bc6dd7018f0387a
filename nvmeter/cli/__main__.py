"""``python -m nvmeter.cli``: the same as the ``nvmeter`` console script."""

from nvmeter._entry import main

main()
