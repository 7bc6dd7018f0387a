"""Compare two probe records figure by figure: is each new figure within the old one's stated uncertainty?

    python bench/probe_compare.py OLD.json NEW.json [--control OLD2.json] [--json OUT.json] [--all] [--strict]

For every figure both records have (nvmeter.probes.figures: what each figure's stated
uncertainty is and how it is computed from the raw series), prints the old and new value,
their difference, both stated uncertainties (half-widths), and whether the new figure lies
within the old one's uncertainty (``|new - old| <= U_old``) and within both together
(``|new - old| <= sqrt(U_old^2 + U_new^2)``). Extremes (min, max: they grow with the number
of readings), counts and chosen lengths are listed but not judged (``--all`` shows them);
exactness and alignment must be equal. ``--control OLD2.json``, a second run of the old probe on
the same board, adds the run-to-run test: a stated uncertainty is a within-run figure and leaves
out what moves between runs minutes apart (the board's temperature, its idle draw), so the old
probe itself lands outside its own uncertainty on many figures (results/probe-speed/). The new
figure then ``repeats`` when ``|new - old| <= |old2 - old| + sqrt(U_old^2 + U_new^2)``: it differs
from the old one by no more than the old one differs from itself, plus both uncertainties.

Both records are read as any probe file is (any
version, every stored figure checked against its raw series).

Exit status: 0, or with ``--strict`` 1 when a judged figure is outside the old one's
uncertainty or an exactness or alignment differs; 2 for bad input (a file that cannot be read, a
``--json`` path that is an input or cannot be written, a control from another board or mode), in
one line before anything is printed.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

# the --json file's kind (a bench's, not one nvmeter reads)
COMPARE_KIND = "bench-probe-compare"


def compare(old_report, new_report, control_report=None) -> list[dict]:
    """One row per figure of either report, in the old report's order (then the new one's).

    With ``control_report`` (the old probe again), each judged row also gets ``control_diff``
    (old2 - old) and ``repeats`` (see the module's docstring).
    """
    from nvmeter.probes.figures import EQUAL, JUDGED, figures

    old = {f.key: f for f in figures(old_report)}
    new = {f.key: f for f in figures(new_report)}
    control = {f.key: f for f in figures(control_report)} if control_report is not None else {}
    rows = []
    for key in [*old, *(k for k in new if k not in old)]:
        o, n = old.get(key), new.get(key)
        row = {
            "figure": key,
            "unit": (o or n).unit,
            "kind": (o or n).kind,
            "old": o.value if o else None,
            "new": n.value if n else None,
            "u_old": o.u if o else None,
            "u_new": n.u if n else None,
            "n_old": o.n if o else None,
            "n_new": n.n if n else None,
        }
        if o is None or n is None:
            row["verdict"] = "only in new" if o is None else "only in old"
        elif row["kind"] == EQUAL:
            row["verdict"] = "same" if o.value == n.value else "DIFFERS"
        elif row["kind"] != JUDGED:
            row["verdict"] = f"not judged ({row['kind']})"
        elif not _finite(o.value, n.value, o.u):
            row["verdict"] = "no figure"
        else:
            diff = n.value - o.value
            row["diff"] = diff
            row["within_old"] = bool(abs(diff) <= o.u)
            both = math.hypot(o.u, n.u) if _finite(n.u) else o.u
            row["within_both"] = bool(abs(diff) <= both)
            row["verdict"] = (
                "within" if row["within_old"] else ("within both" if row["within_both"] else "OUTSIDE")
            )
            c = control.get(key)
            if c is not None and _finite(c.value):
                row["control_diff"] = c.value - o.value
                row["repeats"] = bool(abs(diff) <= abs(row["control_diff"]) + both)
                if not row["within_both"]:
                    row["verdict"] += ", repeats" if row["repeats"] else ", DOES NOT REPEAT"
        rows.append(row)
    return rows


def _plain(value):
    """numpy scalars as Python ones, for JSON."""
    return value.item() if hasattr(value, "item") else str(value)


def _finite(*values) -> bool:
    return all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in values)


def _fmt(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return str(v)
    if isinstance(v, int):
        return str(v)
    return f"{v:.5g}"


def table(rows: list[dict], show_all: bool = False) -> str:
    """The rows as a fixed-width table, and a one-line count of the verdicts."""
    from nvmeter.probes.figures import JUDGED

    controlled = any("control_diff" in r for r in rows)
    control_col = ("old2-old",) if controlled else ()
    head = ("figure", "unit", "old", "new", "new-old", *control_col, "U old", "U new", "verdict")
    lines = []
    for r in rows:
        if not show_all and r["kind"] not in (JUDGED, "equal") and "only" not in r["verdict"]:
            continue
        diff = f"{r['diff']:+.4g}" if "diff" in r else "-"
        control = f"{r['control_diff']:+.4g}" if "control_diff" in r else "-"
        lines.append(
            (
                r["figure"],
                r["unit"],
                _fmt(r["old"]),
                _fmt(r["new"]),
                diff,
                *((control,) if controlled else ()),
                _fmt(r["u_old"]),
                _fmt(r["u_new"]),
                r["verdict"],
            )
        )
    widths = [max(len(str(x)) for x in col) for col in zip(head, *lines, strict=True)]
    out = [
        "  ".join(str(x).ljust(w) for x, w in zip(row, widths, strict=True)).rstrip()
        for row in (head, *lines)
    ]
    judged = [r for r in rows if "within_old" in r]
    inside = sum(r["within_old"] for r in judged)
    both = sum(r["within_both"] for r in judged)
    differ = [r["figure"] for r in rows if r["verdict"] == "DIFFERS"]
    repeat = [r for r in judged if "repeats" in r]
    repeats = (
        f", {sum(r['repeats'] for r in repeat)} of {len(repeat)} within the old one's own run-to-run "
        "difference and both"
        if repeat
        else ""
    )
    out.append(
        f"{inside} of {len(judged)} judged figures within the old one's stated uncertainty, "
        f"{both} within both together{repeats}" + (f"; differ: {', '.join(differ)}" if differ else "")
    )
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("old", type=Path)
    parser.add_argument("new", type=Path)
    parser.add_argument("--control", type=Path, help="the old probe run again on the same board")
    parser.add_argument("--json", type=Path, help="also write the rows here")
    parser.add_argument("--all", action="store_true", help="also list extremes, counts and lengths")
    parser.add_argument(
        "--strict", action="store_true", help="exit 1 when a judged figure is outside or a fixed one differs"
    )
    args = parser.parse_args(argv)
    from nvmeter import errors

    try:
        old, new, control = _load(args)
    except errors.NvmeterError as exc:
        print(f"probe_compare: {exc}", file=sys.stderr)
        return 2
    rows = compare(old, new, control)
    print(f"old: {args.old} ({old.board.uuid}, {old.started_utc}, {'quick' if old.quick else 'full'})")
    print(f"new: {args.new} ({new.board.uuid}, {new.started_utc}, {'quick' if new.quick else 'full'})")
    if control is not None:
        print(f"control: {args.control} ({control.started_utc}, {'quick' if control.quick else 'full'})")
    if old.board.uuid != new.board.uuid:
        print("note: the two records come from different boards")
    if old.quick != new.quick:
        print("note: one record is a --quick probe and the other a full one")
    print(table(rows, args.all))
    if args.json:
        from nvmeter import errors, records

        record = {
            "kind": COMPARE_KIND,  # the kind lets a later comparison replace this file, and nothing else
            "old": str(args.old),
            "new": str(args.new),
            "control": args.control and str(args.control),
        }
        try:
            records.write_json(args.json, json.loads(json.dumps({**record, "rows": rows}, default=_plain)))
        except errors.NvmeterError as exc:
            print(f"probe_compare: {exc}", file=sys.stderr)
            return 2
    outside = any("within_old" in r and not r["within_old"] for r in rows)
    differs = any(r["verdict"] == "DIFFERS" for r in rows)
    return 1 if args.strict and (outside or differs) else 0


def _load(args):
    """The three reports, after every check on the arguments (nothing is printed before them).

    Raises:
        RecordError: an unreadable record (named). UsageError: an output path that is an input
            or cannot be written, or a control from another board or of the other mode than the old
            record.
    """
    from nvmeter import errors, records
    from nvmeter.probes.report import load_report

    inputs = [p for p in (args.old, args.new, args.control) if p is not None]
    if args.json is not None:
        records.check_writable(args.json, inputs=tuple(("compared", p) for p in inputs), kind=COMPARE_KIND)
    loaded = []
    for path in inputs:
        try:
            loaded.append(load_report(path))
        except errors.NvmeterError as exc:
            text = str(exc)
            raise errors.RecordError(text if str(path) in text else f"{path}: {text}") from exc
    old, new, control = (*loaded, None) if args.control is None else loaded
    if control is not None:
        if control.board.uuid != old.board.uuid or new.board.uuid != old.board.uuid:
            raise errors.UsageError("--control judges repeats on one board: old, new and control share it")
        if control.quick != old.quick:
            raise errors.UsageError("--control must be the old record's kind of probe (full or --quick)")
    return old, new, control


if __name__ == "__main__":
    sys.exit(main())
