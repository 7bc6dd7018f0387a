"""The H200 J/TFLOP band from our boards' references, and the check of an independent board against it.

From the repository root:

    python bench/h200_band.py derive --out results/h200-band/derivation.json \
        [--md results/h200-band/derivation.md] [--results results]
    python bench/h200_band.py check FILES... --derivation results/h200-band/derivation.json \
        [--out results/h200-band/check-NAME.json]

The reference is ``nvmeter check``'s: 4096^2 FP32 products, TF32 off, constant operands 2^-6,
energy above the idle either side per TFLOP (J/TFLOP) and the achieved rate (TFLOP/s)
(:mod:`nvmeter.probes.reference`). Score runs hold one per run (their ``energy.reference``),
probe files one per file (``probes.reference``, constant operands); both are read through
nvmeter's own loaders, which upgrade old formats and refuse a record whose stored figures
differ from its raw readings, and every figure here is recomputed from the raw readings.

``derive`` keeps every H200 reading whose products were exact (true FP32) and whose spans saw
counter steps at their edges (``nvmeter check``'s two rules besides the band), takes each
board's median, and needs :data:`MIN_BOARDS` boards. The band runs from :data:`LOW_FACTOR` x
the lowest board to :data:`HIGH_FACTOR` x the highest, for J/TFLOP and TFLOP/s alike, rounded
outward. With fewer boards it still writes the readings, with ``band`` null, and exits 1.

``check`` judges boards the derivation did not use: each board's median reading inside the
derived band or not. A board the derivation used is reported as not independent and not
judged. Exit 0: every independent board inside; 1: one outside; 2: bad input (one line).

The records: kinds ``h200-band`` and ``h200-band-check`` (docs/formats.md).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

from nvmeter import errors, provenance, records
from nvmeter.boards.protocol import BoardIdentity
from nvmeter.probes.bands import band_for
from nvmeter.probes.check import trial_problems
from nvmeter.probes.reference import Trial

FAMILY = "H200"  # the key of the band in probes/bands.py
DERIVATION_KIND = "h200-band"
CHECK_KIND = "h200-band-check"

# At least this many distinct boards before the band stops being provisional (issue #15,
# part 3): with fewer, one unusual board moves an edge by its whole deviation.
MIN_BOARDS = 5

# The A100 band's margins around its boards (docs/facts.md: 15 boards read 7.2-9.2 J/TFLOP,
# band 6-11): 6 / 7.2 = 0.833 below the lowest board, 11 / 9.2 = 1.196 above the highest.
# The public A100 figures give no per-board TFLOP/s, so the rate takes the same margins.
LOW_FACTOR = 0.83
HIGH_FACTOR = 1.2

# Rounding steps of the edges, rounded outward so the rule never narrows the band:
# J/TFLOP to a tenth, TFLOP/s to whole units (as probes/bands.py writes its edges).
J_PER_TFLOP_STEP = 0.1
TFLOPS_STEP = 1.0

RULE = (
    f"Per board, the median of its constant-operand references (J/TFLOP and TFLOP/s apart). "
    f"With at least {MIN_BOARDS} distinct boards, the band runs from {LOW_FACTOR} x the lowest "
    f"board's median to {HIGH_FACTOR} x the highest, for J/TFLOP and for TFLOP/s, the low edge "
    f"rounded down and the high edge up to {J_PER_TFLOP_STEP:g} J/TFLOP and {TFLOPS_STEP:g} TFLOP/s. "
    f"The margins are the public A100 band's around its 15 boards (6/7.2 = 0.83, 11/9.2 = 1.2; "
    f"docs/facts.md), applied to TFLOP/s too because the A100 figures give no per-board rate."
)

# What nvmeter's loaders read here; any other kind in results/ is skipped.
KINDS = ("score", "probe")


class NotEnoughBoards(errors.NvmeterError):
    """Fewer distinct boards than :data:`MIN_BOARDS`: no band (exit 1, as a failed check)."""

    exit_code = 1


@dataclass(frozen=True)
class Reading:
    """One constant-operand reference as a record holds it.

    Attributes:
        board: The board it ran on.
        file: The record, as the path was given.
        kind: ``score`` or ``probe``.
        date_utc: When the record was made (a score run's ``created_utc``, a probe's ``started_utc``).
        trial: The reference trial (raw readings; the figures are recomputed from them).

    """

    board: BoardIdentity
    file: str
    kind: str
    date_utc: str
    trial: Trial

    @property
    def j_per_tflop(self) -> float:
        """Energy above idle per TFLOP, J."""
        return self.trial.j_per_tflop

    @property
    def tflops(self) -> float:
        """Achieved rate, TFLOP/s."""
        return self.trial.tflops

    @property
    def why_unusable(self) -> str | None:
        """Why this reading cannot judge a band (``nvmeter check``'s rules besides the band), or None."""
        if self.trial.exact is None:  # stricter than nvmeter check: a band rests on checked products only
            return "exactness was not checked"
        problems = trial_problems(self.trial)
        return problems[0] if problems else None

    @property
    def key(self) -> tuple:
        """The same measurement in two files (a copy) has the same job on the board's clock.

        The UUID is left out on purpose: a copy with its board renamed is still the same
        measurement, and two boards' timestamps never agree to the nanosecond.
        """
        run = self.trial.run
        return (run.t0_s, run.t1_s, run.matmuls)

    def to_dict(self) -> dict:
        """One row: board, file, date and the two figures."""
        return {
            "board_uuid": self.board.uuid,
            "board_name": self.board.name,
            "file": self.file,
            "kind": self.kind,
            "date_utc": self.date_utc,
            "j_per_tflop": self.j_per_tflop,
            "tflops": self.tflops,
        }


# -- reading the records ----------------------------------------------------------------------
def read_references(path: Path) -> list[Reading]:
    """The constant-operand references in one score run or probe file (empty for another kind).

    Raises:
        RecordError: a score or probe record that is damaged, of an unknown version, or whose
            stored figures differ from its raw readings.

    """
    try:
        data = records.read_any(path, KINDS)
    except errors.RecordError as exc:
        if "not an nvmeter" in str(exc):
            return []
        raise
    if data["kind"] == "probe":
        from nvmeter.probes.report import load_report

        report = load_report(path)
        reference = report.probes.get("reference")
        if reference is None or "constant" not in reference.trials:
            return []
        return [Reading(report.board, str(path), "probe", report.started_utc, reference.trials["constant"])]
    from nvmeter.score.summarize import load_records

    [(_, record)] = load_records([path])
    if record.energy is None:  # a run that ended before its energy readings
        return []
    return [Reading(record.board, str(path), "score", record.created_utc, record.energy.reference)]


def is_family(board: BoardIdentity) -> bool:
    """Whether the H200 band judges this board: its name, as ``nvmeter check`` matches it, on real hardware.

    A simulated board takes a real board's name (``Simulated H200``) but its figures are the
    simulator's, so it never counts toward a band or a check.
    """
    band = band_for(board.name)
    return band is not None and band.family == FAMILY and not board.simulated


def collect(results: Path) -> tuple[list[Reading], list[dict]]:
    """Every usable H200 reading under ``results``, and what was left out and why.

    Raises:
        UsageError: ``results`` is not a folder.
        RecordError: as :func:`read_references`.

    """
    if not results.is_dir():
        raise errors.UsageError(f"{results}: no such folder")
    kept: list[Reading] = []
    left_out: list[dict] = []
    seen: dict[tuple, str] = {}
    for path in sorted(results.rglob("*.json")):
        for reading in read_references(path):
            why = None
            if not is_family(reading.board):
                sim = ", simulated" if reading.board.simulated else ""
                why = f"not an {FAMILY} board ({reading.board.name}{sim})"
            elif reading.why_unusable:
                why = reading.why_unusable
            elif reading.key in seen:
                why = f"the same measurement as {seen[reading.key]}"
            if why:
                left_out.append({**reading.to_dict(), "why": why})
                continue
            seen[reading.key] = reading.file
            kept.append(reading)
    return kept, left_out


# -- the rule ---------------------------------------------------------------------------------
def _floor_to(value: float, step: float) -> float:
    # round() first so that e.g. 0.83 x 5.0 = 4.1499999... does not fall a step
    return round(math.floor(round(value / step, 9)) * step, 9)


def _ceil_to(value: float, step: float) -> float:
    return round(math.ceil(round(value / step, 9)) * step, 9)


def per_board(readings: list[Reading]) -> list[dict]:
    """Each board's median J/TFLOP and TFLOP/s over its readings, with their range, in UUID order."""
    boards: dict[str, list[Reading]] = {}
    for r in readings:
        boards.setdefault(r.board.uuid, []).append(r)
    out = []
    for uuid in sorted(boards):
        rs = boards[uuid]
        j = [r.j_per_tflop for r in rs]
        t = [r.tflops for r in rs]
        out.append(
            {
                "uuid": uuid,
                "name": rs[0].board.name,
                "readings": len(rs),
                "files": [r.file for r in rs],
                "j_per_tflop": statistics.median(j),
                "j_per_tflop_min": min(j),
                "j_per_tflop_max": max(j),
                "tflops": statistics.median(t),
                "tflops_min": min(t),
                "tflops_max": max(t),
            }
        )
    return out


def spread(values: list[float]) -> dict:
    """Lowest, highest, and (highest - lowest) / lowest of the boards' medians."""
    low, high = min(values), max(values)
    return {"min": low, "max": high, "relative_range": (high - low) / low}


def band_edges(boards: list[dict]) -> dict:
    """The rule applied to the boards' medians: the rounded band, and the edges before rounding."""
    j = [b["j_per_tflop"] for b in boards]
    t = [b["tflops"] for b in boards]
    unrounded = {
        "j_per_tflop": [LOW_FACTOR * min(j), HIGH_FACTOR * max(j)],
        "tflops": [LOW_FACTOR * min(t), HIGH_FACTOR * max(t)],
    }
    return {
        "j_per_tflop": [
            _floor_to(unrounded["j_per_tflop"][0], J_PER_TFLOP_STEP),
            _ceil_to(unrounded["j_per_tflop"][1], J_PER_TFLOP_STEP),
        ],
        "tflops": [
            _floor_to(unrounded["tflops"][0], TFLOPS_STEP),
            _ceil_to(unrounded["tflops"][1], TFLOPS_STEP),
        ],
        "unrounded": unrounded,
    }


def inside(band: dict, j_per_tflop: float, tflops: float) -> bool:
    """Both figures within the band, edges included (as :meth:`nvmeter.probes.bands.Band.contains`)."""
    lo_j, hi_j = band["j_per_tflop"]
    lo_t, hi_t = band["tflops"]
    return lo_j <= j_per_tflop <= hi_j and lo_t <= tflops <= hi_t


def derivation(results: Path) -> dict:
    """The derivation record: readings, per-board medians, spread, and the band (None below MIN_BOARDS)."""
    readings, left_out = collect(results)
    boards = per_board(readings)
    enough = len(boards) >= MIN_BOARDS
    return {
        **records.header(DERIVATION_KIND),
        "provenance": provenance.collect().to_dict(),
        "family": FAMILY,
        "rule": RULE,
        "min_boards": MIN_BOARDS,
        "low_factor": LOW_FACTOR,
        "high_factor": HIGH_FACTOR,
        "j_per_tflop_step": J_PER_TFLOP_STEP,
        "tflops_step": TFLOPS_STEP,
        "results": str(results),
        "readings": [r.to_dict() for r in readings],
        "left_out": left_out,
        "boards": boards,
        "spread": (
            {
                "j_per_tflop": spread([b["j_per_tflop"] for b in boards]),
                "tflops": spread([b["tflops"] for b in boards]),
            }
            if boards
            else None
        ),
        "enough_boards": enough,
        "band": band_edges(boards) if enough else None,
        "uuids": [b["uuid"] for b in boards],
    }


def markdown(record: dict) -> str:
    """A short table per board, the spread, and the band (or why there is none)."""
    lines = [
        f"# {FAMILY} J/TFLOP band: derivation",
        "",
        f"Written by `bench/h200_band.py derive` from `{record['results']}` "
        f"(commit {provenance.Provenance.from_dict(record['provenance']).short_commit or 'unknown'}); "
        f"the record is derivation.json beside this page.",
        "",
        f"Rule: {record['rule']}",
        "",
        "| board | readings | J/TFLOP median (range) | TFLOP/s median (range) |",
        "| --- | --- | --- | --- |",
    ]
    for b in record["boards"]:
        lines.append(
            f"| {b['uuid']} | {b['readings']} | {b['j_per_tflop']:.2f} "
            f"({b['j_per_tflop_min']:.2f}-{b['j_per_tflop_max']:.2f}) | {b['tflops']:.1f} "
            f"({b['tflops_min']:.1f}-{b['tflops_max']:.1f}) |"
        )
    lines.append("")
    s = record["spread"]
    if s:
        lines.append(
            f"Across boards (medians): {s['j_per_tflop']['min']:.2f}-{s['j_per_tflop']['max']:.2f} J/TFLOP "
            f"({s['j_per_tflop']['relative_range']:.1%} apart), {s['tflops']['min']:.1f}-"
            f"{s['tflops']['max']:.1f} TFLOP/s ({s['tflops']['relative_range']:.1%} apart)."
        )
        lines.append("")
    band = record["band"]
    if band:
        u = band["unrounded"]
        lines.append(
            f"**Band: {band['j_per_tflop'][0]:g}-{band['j_per_tflop'][1]:g} J/TFLOP, "
            f"{band['tflops'][0]:g}-{band['tflops'][1]:g} TFLOP/s** over {len(record['boards'])} boards "
            f"(before rounding {u['j_per_tflop'][0]:.3f}-{u['j_per_tflop'][1]:.3f} J/TFLOP, "
            f"{u['tflops'][0]:.2f}-{u['tflops'][1]:.2f} TFLOP/s)."
        )
    else:
        lines.append(
            f"**No band:** {len(record['boards'])} distinct {FAMILY} board(s), the rule needs "
            f"{record['min_boards']}. The band in probes/bands.py stays provisional."
        )
    if record["left_out"]:
        lines += ["", "Left out:", ""]
        lines += [f"- {x['file']} ({x['board_uuid']}): {x['why']}" for x in record["left_out"]]
    return "\n".join(lines) + "\n"


# -- check ------------------------------------------------------------------------------------
def read_derivation(path: Path) -> dict:
    """A derivation record that holds a band.

    Raises:
        RecordError: unreadable, another kind, or a derivation that found too few boards.

    """
    record = records.read_json(path, DERIVATION_KIND)
    try:
        verify_derivation(record, path)
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
        raise errors.RecordError(
            f"{path}: not a whole derivation record ({type(exc).__name__}: {exc})"
        ) from exc
    if record["band"] is None:
        raise errors.RecordError(
            f"{path} holds no band ({len(record['uuids'])} board(s), the rule needs {record['min_boards']})"
        )
    return record


def verify_derivation(record: dict, path: Path) -> None:
    """Raise RecordError unless the derivation's readings are its files' and its band their rule's.

    Each reading is read again from its file (which must still be there), then the boards,
    their UUIDs and the band are recomputed with this module's rule and compared.
    """
    readings = []
    for row in record["readings"]:
        found = [r for r in read_references(Path(row["file"])) if r.board.uuid == row["board_uuid"]]
        match = [r for r in found if (r.j_per_tflop, r.tflops) == (row["j_per_tflop"], row["tflops"])]
        if not match:
            raise errors.RecordError(f"{path}: its reading from {row['file']} is not that file's (altered?)")
        readings.append(match[0])
    boards = per_board(readings)
    fresh = {
        "boards": boards,
        "uuids": [b["uuid"] for b in boards],
        "band": band_edges(boards) if len(boards) >= MIN_BOARDS else None,
    }
    for key, value in fresh.items():
        if json.loads(json.dumps(value)) != record[key]:
            raise errors.RecordError(
                f"{path}: its {key} disagrees with its readings under the rule (altered?)"
            )


def checked(files: list[Path], derivation_path: Path) -> dict:
    """The check record: each independent board's median reading against the derived band.

    Raises:
        UsageError: a file with no usable H200 reference, or no independent board at all.
        RecordError: as :func:`read_derivation` and :func:`read_references`.

    """
    record = read_derivation(derivation_path)
    used = set(record["uuids"])
    readings: list[Reading] = []
    seen: set[tuple] = set()
    for path in files:
        if not path.is_file():
            raise errors.UsageError(f"{path}: no such file")
        found = read_references(path)
        if not found:
            raise errors.UsageError(f"{path}: not a score run or probe file with a reference")
        for r in found:
            if not is_family(r.board):
                what = "a simulated board" if r.board.simulated else f"not an {FAMILY}"
                raise errors.UsageError(f"{path}: {r.board.name} {r.board.uuid} is {what}")
            if r.why_unusable:
                raise errors.UsageError(f"{path}: the reference cannot be judged: {r.why_unusable}")
            if r.key not in seen:  # a file named twice counts once
                seen.add(r.key)
                readings.append(r)
    refused = per_board([r for r in readings if r.board.uuid in used])
    boards = per_board([r for r in readings if r.board.uuid not in used])
    if not boards:
        names = ", ".join(b["uuid"] for b in refused)
        raise errors.UsageError(
            f"no independent board: {names} was used for the derivation ({derivation_path})"
        )
    band = record["band"]
    for b in boards:
        b["inside"] = inside(band, b["j_per_tflop"], b["tflops"])
        b["readings_inside"] = sum(
            inside(band, r.j_per_tflop, r.tflops) for r in readings if r.board.uuid == b["uuid"]
        )
    return {
        **records.header(CHECK_KIND),
        "provenance": provenance.collect().to_dict(),
        "family": FAMILY,
        "derivation": str(derivation_path),
        "band": {"j_per_tflop": band["j_per_tflop"], "tflops": band["tflops"]},
        "readings": [r.to_dict() for r in readings],
        "boards": boards,
        "not_independent": [
            {"uuid": b["uuid"], "files": b["files"], "why": "used for the derivation"} for b in refused
        ],
        "all_inside": all(b["inside"] for b in boards),
    }


def check_lines(result: dict) -> list[str]:
    """One line per board: inside or outside, with its median figures."""
    band = result["band"]
    text = (
        f"{band['j_per_tflop'][0]:g}-{band['j_per_tflop'][1]:g} J/TFLOP, "
        f"{band['tflops'][0]:g}-{band['tflops'][1]:g} TFLOP/s"
    )
    lines = []
    for b in result["boards"]:
        verdict = "INSIDE" if b["inside"] else "OUTSIDE"
        lines.append(
            f"{verdict}: {b['uuid']} {b['j_per_tflop']:.2f} J/TFLOP at {b['tflops']:.1f} TFLOP/s "
            f"(median of {b['readings']}, {b['readings_inside']} inside) in {text}"
        )
    for b in result["not_independent"]:
        lines.append(f"NOT INDEPENDENT: {b['uuid']} was used for the derivation; not judged")
    return lines


# -- command line -----------------------------------------------------------------------------
def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("derive", help="derive the band from every H200 reference under --results")
    d.add_argument("--out", type=Path, required=True, help="the derivation record (JSON)")
    d.add_argument("--md", type=Path, help="a short markdown page of the derivation")
    d.add_argument("--results", type=Path, default=Path("results"), help="the folder to read (results)")
    c = sub.add_parser("check", help="judge boards the derivation did not use against its band")
    c.add_argument("files", type=Path, nargs="+", help="score runs (run-*.json) or probe files")
    c.add_argument("--derivation", type=Path, required=True, help="a derivation record with a band")
    c.add_argument("--out", type=Path, help="the check record (JSON)")
    return p


def _derive(args) -> int:
    for out in (args.out, args.md):
        if out is not None:
            records.check_writable(out, record=out is args.out, kind=DERIVATION_KIND)
    record = derivation(args.results)
    records.write_json(args.out, record)
    if args.md:
        args.md.write_text(markdown(record))
    boards = record["boards"]
    if record["band"] is None:
        raise NotEnoughBoards(
            f"{len(boards)} distinct {FAMILY} board(s) with a usable reference under {args.results}, "
            f"the rule needs {MIN_BOARDS}: no band (readings written to {args.out})"
        )
    band = record["band"]
    print(
        f"{FAMILY} band from {len(boards)} boards ({len(record['readings'])} readings): "
        f"{band['j_per_tflop'][0]:g}-{band['j_per_tflop'][1]:g} J/TFLOP, "
        f"{band['tflops'][0]:g}-{band['tflops'][1]:g} TFLOP/s -> {args.out}"
    )
    return 0


def _check(args) -> int:
    if args.out is not None:
        records.check_writable(args.out, kind=CHECK_KIND)
    result = checked(args.files, args.derivation)
    if args.out is not None:
        records.write_json(args.out, result)
    print("\n".join(check_lines(result)))
    return 0 if result["all_inside"] else 1


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit code (one line on stderr for an error, no traceback)."""
    args = _parser().parse_args(argv)
    try:
        return _derive(args) if args.cmd == "derive" else _check(args)
    except errors.NvmeterError as exc:
        print(f"h200_band: {exc}", file=sys.stderr)
        return exc.exit_code


if __name__ == "__main__":
    sys.exit(main())
