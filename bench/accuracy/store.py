"""The run's record: one JSON file per board, written atomically, resumed by a re-run.

Layout (``schema_version`` 2)::

    {"kind": "window-accuracy", "schema_version": 2, "board": {...identity},
     "runs": [{"started_utc", "budget_s", "kinds", "config", "zeus", "host", ...}, ...],
     "kinds": {"fp32": {"work": {...params}, "plan": {...}, "idle_spans": [...],
                        "units": [{"id", "type", ..., "raw": Measurement.to_dict()}, ...],
                        "skipped": [...], "errors": [...], "free_call_ms": [...],
                        "long_calls": int (optional, since 2026-12-02), "done": bool}, ...}}

A unit's ``enter_parts_ms`` (since 14a8852) and ``exit_parts_ms`` (since the evening of 2026-12-05)
are optional: where nvmeter's own time at a window's edges went (``EnergyWindow.entry_parts_s``,
``exit_parts_s``); records from before read without them.

Units are cleaned once when added (NaN -> null; times rounded to the microsecond, which
keeps every derived figure to far below its bound and the file under 3 MB a board);
a save writes the whole file to a temporary name beside it and renames it.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
import time
from pathlib import Path

KIND = "window-accuracy"
SCHEMA_VERSION = 2
# Decimal places kept for floats in the raw readings: microseconds, milliwatts.
DIGITS = 6


class RecordMismatch(Exception):
    """The output file belongs to another board or another record."""


def compact(obj, digits: int = DIGITS):
    """JSON-ready copy: NaN/inf -> None, floats rounded to ``digits`` places, tuples -> lists."""
    if isinstance(obj, float):
        return round(obj, digits) if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {str(k): compact(v, digits) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [compact(v, digits) for v in obj]
    if hasattr(obj, "item") and callable(obj.item):  # numpy scalars
        return compact(obj.item(), digits)
    return obj


def write_atomic(path: Path, data: dict) -> None:
    """Write ``data`` as compact JSON to ``path``: a temporary file beside it, then a rename."""
    path = Path(path)
    text = json.dumps(data, separators=(",", ":"), allow_nan=False)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.write("\n")
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class Store:
    """The record of one board's run, kept in memory and saved whole.

    Args:
        path: The JSON file.
        data: The record (a new one from :meth:`open`, or the file's on resume).
    """

    def __init__(self, path: Path, data: dict) -> None:
        self.path = Path(path)
        self.data = data
        self.save_s = 0.0  # how long the last save took, s (the runner fits saves into pauses)

    @classmethod
    def open(cls, path: Path, board: dict, run: dict) -> Store:
        """A new record, or the file's (same board) with this run appended.

        Raises:
            RecordMismatch: the file is not a schema-2 window-accuracy record of this board.
        """
        path = Path(path)
        if path.exists():
            try:
                data = json.loads(path.read_text())
            except (OSError, json.JSONDecodeError) as exc:
                raise RecordMismatch(
                    f"{path} exists and is not readable JSON ({exc}); give another --out"
                ) from exc
            if data.get("kind") != KIND or data.get("schema_version") != SCHEMA_VERSION:
                raise RecordMismatch(
                    f"{path} is not a schema-{SCHEMA_VERSION} {KIND} record; give another --out"
                )
            if data.get("board", {}).get("uuid") != board.get("uuid"):
                raise RecordMismatch(
                    f"{path} was made on {data.get('board', {}).get('uuid')}, not on this board "
                    f"{board.get('uuid')}; give another --out"
                )
        else:
            data = {"kind": KIND, "schema_version": SCHEMA_VERSION, "board": board, "runs": [], "kinds": {}}
        data["runs"].append(compact(run))
        return cls(path, data)

    def kind(self, name: str) -> dict:
        """The kind's part of the record (made empty on first use)."""
        return self.data["kinds"].setdefault(
            name,
            {
                "work": None,
                "plan": None,
                "idle_spans": [],
                "units": [],
                "skipped": [],
                "errors": [],
                "free_call_ms": [],
                "done": False,
            },
        )

    def done_ids(self, name: str) -> set[str]:
        """Ids of the kind's trials already recorded (references excluded)."""
        return {u["id"] for u in self.kind(name)["units"] if u["type"] != "ref"}

    def add_unit(self, name: str, unit: dict) -> None:
        """Append a trial or reference, tagged with this run's index (clocks restart between runs).

        Cleaned now, so a save does not walk it again.
        """
        self.kind(name)["units"].append(compact({**unit, "run": len(self.data["runs"]) - 1}))

    def save(self) -> None:
        """Write the whole record atomically (units as cleaned when added; the rest cleaned now)."""
        t0 = time.perf_counter()
        kinds = {
            name: {**compact({k: v for k, v in part.items() if k != "units"}), "units": part["units"]}
            for name, part in self.data["kinds"].items()
        }
        write_atomic(
            self.path, {**compact({k: v for k, v in self.data.items() if k != "kinds"}), "kinds": kinds}
        )
        self.save_s = time.perf_counter() - t0
