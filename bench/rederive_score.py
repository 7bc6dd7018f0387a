"""Rewrite the derived blocks of score records from their raw readings, with today's rules.

`nvmeter summarize` refuses a record whose stored figures disagree with their recomputation.
When a rule changes after a run (first: `window_ms_consistent`, after a8360a8), the raw
readings stay as measured and this script recomputes what is derived from them, noting
in each record which rule-set rewrote it and why:

    python bench/rederive_score.py --why "..." results/score-h200/*/run-*.json

A record of an older format version is rewritten in the current one (docs/formats.md).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from nvmeter import provenance, records
from nvmeter.score.record import RunRecord
from nvmeter.verify import first_difference


def rederive(path: Path, why: str, commit: str) -> str | None:
    """Rewrite ``path`` if a derived figure changed; returns the first change, or None."""
    stored = records.read_json(path, "score")
    fresh = json.loads(json.dumps(RunRecord.from_dict(stored).to_dict()))
    change = first_difference(stored, fresh, "record")
    if change is None:
        return None
    note = {"commit": commit, "why": why, "first_change": change}
    fresh["rederived"] = [*stored["rederived"], note]
    records.write_json(path, fresh)
    return str(change)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("files", type=Path, nargs="+")
    p.add_argument("--why", required=True)
    args = p.parse_args()
    commit = provenance.commit()
    for f in args.files:
        print(f, rederive(f, args.why, commit) or "unchanged")


if __name__ == "__main__":
    main()
