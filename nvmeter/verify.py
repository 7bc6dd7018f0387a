"""Stored figures against their recomputation from raw readings.

Every record nvmeter writes keeps its raw readings beside the figures derived from them
(``derived`` blocks). ``nvmeter summarize`` (score records) and ``nvmeter show`` (probe and
run records) rebuild each record from its raw readings, derive every figure again with this
nvmeter, and refuse a record whose stored figures differ: it was altered, or written by code
whose figures differ.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from pathlib import Path

from nvmeter import errors

# Stored and recomputed figures agree to this relative tolerance: JSON keeps every float
# exactly (shortest repr), so only the order of floating-point operations could differ.
REL_TOL = 1e-9
# Prose among the derived figures: why a figure is not reliable, the state's notes. Their wording
# changes between versions ("0.0%" became "0.010%"), and a job record an earlier nvmeter wrote was
# refused for it (a review, 2026-12-07); only whether there is any is compared. The figures and
# ``reliable`` beside them are compared in full.
PROSE_KEYS = frozenset({"reason", "state_changes"})


def plain(value):
    """Numpy scalars as Python ones, tuples as lists, nan as None (as JSON stores them)."""
    if hasattr(value, "item") and callable(value.item) and not isinstance(value, (list, dict)):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return value


def first_difference(stored, fresh, where: str = "derived") -> tuple[str, object, object] | None:
    """The first place where ``stored`` and ``fresh`` (plain JSON values) disagree, or None.

    Keys are visited in sorted order, list items in order; numbers agree to ``REL_TOL``.

    Returns:
        (where, stored value, fresh value) of the first disagreement.

    """
    if isinstance(fresh, dict):
        if not isinstance(stored, dict):
            return where, stored, fresh
        for key in sorted(set(stored) | set(fresh)):
            if key not in stored or key not in fresh:
                return f"{where}.{key}", stored.get(key, "(missing)"), fresh.get(key, "(missing)")
            if key in PROSE_KEYS:
                if bool(stored[key]) != bool(fresh[key]):
                    return f"{where}.{key}", stored[key], fresh[key]
                continue
            found = first_difference(stored[key], fresh[key], f"{where}.{key}")
            if found:
                return found
        return None
    if isinstance(fresh, list):
        if not isinstance(stored, list) or len(stored) != len(fresh):
            return where, stored, fresh
        for i, (a, b) in enumerate(zip(stored, fresh, strict=True)):
            found = first_difference(a, b, f"{where}[{i}]")
            if found:
                return found
        return None
    numbers = (int, float)
    if isinstance(fresh, numbers) and not isinstance(fresh, bool):
        return None if _close(stored, fresh) else (where, stored, fresh)
    return None if stored == fresh else (where, stored, fresh)


def _close(stored, fresh) -> bool:
    """True when ``stored`` is a number within :data:`REL_TOL` of ``fresh``."""
    if isinstance(stored, bool) or not isinstance(stored, (int, float)):
        return False
    try:
        return math.isclose(stored, fresh, rel_tol=REL_TOL, abs_tol=1e-12)
    except OverflowError:  # a 400-digit integer in a hand-edited record is no float's figure
        return False


# How much of a long value a message shows, characters.
SHOWN_CHARS = 60


def shown(was, now) -> tuple[str, str]:
    """Both values' reprs cut to :data:`SHOWN_CHARS`, each from a little before where they differ.

    Two texts alike for their first 60 characters were cut to the same words (a breaker's
    trial): the difference is what the reader needs.
    """
    a, b = repr(was), repr(now)
    same = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
    start = max(0, same - 10) if max(len(a), len(b)) > SHOWN_CHARS else 0

    def cut(text: str) -> str:
        text = ("..." if start else "") + text[start:]
        return text if len(text) <= SHOWN_CHARS else text[: SHOWN_CHARS - 3] + "..."

    return cut(a), cut(b)


def check(path: Path, checks: Iterable[tuple[str, object, object]]) -> None:
    """Refuse a record whose stored figures differ from their recomputation.

    Args:
        path: The record's file (named in the error).
        checks: (where, stored block, recomputed block) triples; the recomputed block is
            passed through :func:`plain` here.

    Raises:
        RecordError: one line naming the first figure that differs, with both values.

    """
    for where, stored, fresh in checks:
        found = first_difference(stored, plain(fresh), where)
        if found:
            at, was, now = found
            was_text, now_text = shown(was, now)
            raise errors.RecordError(
                f"{path}: {at} disagrees with its recomputation from the raw readings "
                f"(stored {was_text}, recomputed {now_text}); the record was altered, "
                "or written by an nvmeter whose figures differ"
            )
