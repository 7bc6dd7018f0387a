"""Numbers and flags a caller passes: finite, within their bounds, or an error that names them.

One check for every such argument (a clock's wait, a simulated load, a window's control
figure), so that each refusal reads the same way: the argument, what it must be, what came.
"""

from __future__ import annotations

import math
import numbers


def finite(
    value,
    name: str,
    *,
    kind: str = "number",
    minimum: float = -math.inf,
    maximum: float = math.inf,
    error: type[Exception] = ValueError,
) -> float:
    """``value`` as a float if it is a finite real number within ``[minimum, maximum]``.

    Args:
        value: What the caller passed.
        name: The argument's name, for the message.
        kind: What it is, with its unit ("number of seconds", "time in seconds", …).
        minimum: Its least value (-inf: none; only the bounds there are are named).
        maximum: Its greatest value (inf: none).
        error: The exception to raise (``errors.UsageError`` where the CLI shows it as one line).

    Raises:
        error: a bool, a non-number, nan, an infinity, or a value outside the bounds.
    """
    number = isinstance(value, numbers.Real) and not isinstance(value, bool)
    if not (number and math.isfinite(value) and minimum <= value <= maximum):
        limits = [f">= {minimum:g}"] if minimum > -math.inf else []
        limits += [f"<= {maximum:g}"] if maximum < math.inf else []
        need = " ".join([f"a finite {kind}", " and ".join(limits)]).rstrip()
        raise error(f"{name} must be {need}, not {value!r}")
    return float(value)


def flag(value, name: str, error: type[Exception] = ValueError) -> bool:
    """``value`` if it is True or False (1, "yes" and None are not).

    Raises:
        error: anything else, naming ``name``.
    """
    if not isinstance(value, bool):
        raise error(f"{name} is True or False, not {value!r}")
    return value
