"""The finished methods of earlier evaluation records, kept by ``evaluate --resume`` instead of run again.

A kept method is trusted only as far as it can be checked: its record must be whole, made with the
same plan (seed, draws, order, hold-out) and on the same kind of device as the run it joins, its calls
must be the plan's draws in the plan's order, and its verdict, accuracies and timings must equal what
its calls give (:func:`nvmeter.workloads.judge.from_calls`), and its method's version (workloads record
v4's ``sources``) must be this checkout's (a row of another version runs again; one from an earlier
record, which kept no version, is kept and named in ``resumed_from``'s ``unversioned``). Correct counts
themselves cannot be re-derived without the method's labels, which records do not keep.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from nvmeter import errors, records
from nvmeter.workloads import judge, methods

# The evaluation record's kind; its versions live with the others in nvmeter.formats (docs/formats.md).
KIND = "workloads"
# what a kept method's stored figures must equal, recomputed from its calls
_DERIVED = ("verdict", "mnist_accuracy", "holdout_accuracy", "passed", "ms_median", "ms_min", "ms_max")


def _check_calls(name: str, result: dict, run: dict) -> None:
    """Raise ValueError unless the calls are the plan's draws, in order, with sane numbers."""
    if [[c["dataset"], c["seed"]] for c in result["calls"]] != [list(k) for k in run["order"]]:
        raise ValueError(f"method {name}: its calls are not the plan's draws in the plan's order")
    for c in result["calls"]:
        whole = all(isinstance(c[k], int) and not isinstance(c[k], bool) for k in ("correct", "rows"))
        if not (whole and 0 <= c["correct"] <= c["rows"] and c["rows"] > 0):
            raise ValueError(
                f"method {name}: a call's correct/rows are not counts ({c['correct']}/{c['rows']})"
            )
        if not (isinstance(c["ms"], (int, float)) and math.isfinite(c["ms"]) and c["ms"] > 0):
            raise ValueError(f"method {name}: a call's ms is not a positive time ({c['ms']!r})")


def _keep(name: str, result: dict, run: dict) -> bool:
    """True if ``result`` is finished and consistent; False if it must run again.

    Raises:
        ValueError: the result is finished but altered (its figures disagree with its calls).
    """
    if result["error"] is not None or len(result["calls"]) != len(run["order"]):
        return False
    try:
        spec = methods.spec(name)
    except errors.UsageError:  # a method this nvmeter does not have: never kept
        return False
    for key in ("difficulty", "a100_ms", "a100_mnist"):  # the method's constants (workloads/methods.py)
        if result[key] != getattr(spec, key):
            raise ValueError(f"method {name}: {key} {result[key]!r} is not the method's")
    for key in ("steps", "kernels_per_call", "kernels_per_step"):
        value = result[key]
        if value is not None and not (
            isinstance(value, (int, float)) and math.isfinite(value) and value >= 0
        ):
            raise ValueError(f"method {name}: {key} {value!r} is not a count")
    _check_calls(name, result, run)
    # through JSON, as the stored figures went (tuples become lists)
    fresh = json.loads(
        json.dumps(judge.from_calls(result, len(run["mnist_seeds"]), len(run["holdout_seeds"])))
    )
    for key in _DERIVED:
        if result[key] != fresh[key]:
            raise ValueError(f"method {name}: its {key} disagrees with its calls (the record was altered)")
    if not isinstance(result["board_uuid"], (str, type(None))):
        raise ValueError(f"method {name}: board_uuid is not a UUID")
    # another version of the method's code runs again; a row from before versions were kept (null)
    # is kept, and the record says so (resumed_from's "unversioned")
    # compared as the record hashed it: v4 records' scheme 1 matches only on the Python that wrote them
    return result["sources"] is None or result["sources"] == spec.sources(result["sources_scheme"])


class Resumed:
    """The finished methods of earlier records of one plan and one device kind.

    Args:
        paths: Records of kind ``workloads`` (any version). A method finished in several is
            taken from the last one named.

    Raises:
        RecordError: A path is not a whole workloads record, or a finished method's figures
            disagree with its calls (an altered record).
        UsageError: The records were made with different plans or on different kinds of device.
    """

    def __init__(self, paths: list[Path]) -> None:
        self.first: dict | None = None
        self.methods: dict[str, dict] = {}
        self.sources: list[dict] = []
        for path in paths:
            record = records.read_json(path, KIND)
            try:
                self._add(path, record, paths[0])
            except (KeyError, TypeError, ValueError, AttributeError) as exc:
                what = str(exc) if isinstance(exc, ValueError) else f"{type(exc).__name__}: {exc}"
                raise errors.RecordError(f"--resume {path}: not a whole workloads record ({what})") from exc

    def _add(self, path: Path, record: dict, first_path: Path) -> None:
        run, device = record["run"], record["device"]
        _device_kind(device)  # a record without its device is not whole
        if self.first is None:
            self.first = record
        elif run != self.first["run"]:
            raise errors.UsageError(
                f"--resume {path}: made with another plan than {first_path} (seed, draws or hold-out differ)"
            )
        elif _device_kind(device) != _device_kind(self.first["device"]):
            raise errors.UsageError(
                f"--resume {path}: made on {device['name']} ({device['type']}), {first_path} on "
                f"{self.first['device']['name']} ({self.first['device']['type']}); "
                "one table, one kind of device"
            )
        kept = {n: r for n, r in record["methods"].items() if _keep(n, r, run)}
        self.methods.update(kept)
        board = record["board"]["uuid"] if record["board"] else None
        self.sources.append(
            {"file": path.name, "created_utc": str(record["created_utc"]), "board_uuid": board,
             "nvmeter_commit": record["provenance"]["nvmeter_commit"], "methods": sorted(kept),
             "unversioned": sorted(n for n, r in kept.items() if r["sources"] is None)}
        )  # fmt: skip

    def check(self, run: dict, device: dict) -> None:
        """Raise UsageError unless this run's ``run`` and ``device`` are the records' plan and device kind."""
        if self.first is None:
            return
        if self.first["run"] != run:
            raise errors.UsageError(
                "--resume: the records were made with another plan (seed, draws, hold-out or KMNIST in "
                "the cache differ); run without --resume, or with the same --seed and data"
            )
        if _device_kind(device) != _device_kind(self.first["device"]):
            raise errors.UsageError(
                f"--resume: the records ran on {self.first['device']['name']}, this run on "
                f"{device['name']}; one table, one kind of device"
            )

    def check_request(self, seed: int, mnist_draws: int, holdout_draws: int) -> None:
        """Raise UsageError unless the flags ask for the records' plan (a merge makes no plan of its own)."""
        run = self.first["run"]
        asked = (seed, mnist_draws, holdout_draws)
        have = (run["seed"], len(run["mnist_seeds"]), len(run["holdout_seeds"]))
        if asked != have:
            raise errors.UsageError(
                f"--resume: the records' plan is seed {have[0]}, {have[1]} MNIST and {have[2]} hold-out "
                f"draws; asked for seed {asked[0]}, {asked[1]} and {asked[2]}"
            )


def _device_kind(device: dict) -> tuple[str, str]:
    return (device["type"], device["name"])
