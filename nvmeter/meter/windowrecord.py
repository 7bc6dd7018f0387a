"""One window as a file of its own: the ``window`` record (``Measurement.save``, ``Measurement.load``).

A Measurement's :meth:`~nvmeter.meter.measurement.Measurement.to_dict` is a block inside other
records (run, pytest-energy, job); this kind wraps one with a kind, a version and where it came
from, so that ``nvmeter show`` and :meth:`Measurement.load` can read it back, verified: every
figure recomputed from the raw readings, a stored figure that differs refused.
"""

from __future__ import annotations

from pathlib import Path

from nvmeter import provenance, records, verify
from nvmeter.meter.measurement import Measurement
from nvmeter.meter.windowcheck import check_dict
from nvmeter.provenance import Provenance

KIND = "window"


def save(m: Measurement, path: Path) -> None:
    """Write ``m`` as a ``window`` record (atomic: :func:`nvmeter.records.write_json`).

    Its provenance is the saving process's (nvmeter, Python, packages, host): save a window in
    the process that measured it, as ``EnergyWindow`` and ``measure()`` return it.

    Raises:
        UsageError: the path is empty or cannot be written.
    """
    records.write_json(
        path,
        {**records.header(KIND), "provenance": provenance.collect().to_dict(), "window": m.to_dict()},
    )


def load(path: Path, parsed: dict | None = None) -> Measurement:
    """Read a ``window`` record, its figures verified against its raw readings.

    ``parsed``: the file's JSON, where the caller has parsed it already (:func:`nvmeter.records.parse_json`).

    Raises:
        RecordError: unreadable, another kind or schema, damaged (a field of the wrong type, a raw
            series that cannot be real: :mod:`nvmeter.meter.sanity`), or a stored figure that
            differs from its recomputation.
    """
    path = Path(path)
    data = records.read_json(path, KIND, parsed)
    with records.building(path, KIND):
        Provenance.from_dict(records.mapping(data["provenance"], "provenance"))
        m = Measurement.from_dict(check_dict(data["window"], "window"))
        fresh = m.derived()  # inside: a raw series that breaks the arithmetic is this record's damage
    verify.check(path, [("window.derived", data["window"].get("derived"), fresh)])
    return m
