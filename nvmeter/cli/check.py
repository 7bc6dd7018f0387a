"""``nvmeter check``: the J/TFLOP reference, run or read, judged against the board family's band."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from nvmeter import errors
from nvmeter.cli import console
from nvmeter.cli.console import make_table, say_line
from nvmeter.cli.guard import guarded
from nvmeter.cli.options import DeviceOpt, SimulateOpt, bool_flag, open_rig, parse_path, pick_band


@guarded
def check(
    probe_file: Annotated[
        Path | None,
        typer.Option(
            "--probe",
            help="Read the reference from this probe file instead of running it.",
            parser=parse_path,
        ),
    ] = None,
    device: DeviceOpt = None,
    simulate: SimulateOpt = False,
    band: Annotated[
        str | None, typer.Option("--band", help="Judge against this family's band (A100, H200, …).")
    ] = None,
    allow_no_band: Annotated[
        bool,
        bool_flag("--allow-no-band", help="Exit 0 when no band is known for the board (figures reported)."),
    ] = False,
) -> None:
    """Run (or read) the J/TFLOP reference and pass only inside the board family's band.

    Exit 0: inside the band (or, with --allow-no-band, no band known: figures reported, unjudged).

    Exit 1: outside the band, not exact FP32, a span without counter steps, or no band known.
    """
    from nvmeter.probes.bands import BANDS
    from nvmeter.probes.check import Verdict
    from nvmeter.probes.check import check as judge

    band = pick_band(band, BANDS)
    if probe_file is not None and (device is not None or simulate):
        raise errors.UsageError(
            "--probe reads the reference from its file: give it without --device and --simulate"
        )
    if probe_file is not None:
        from nvmeter.probes.report import load_report

        report = load_report(probe_file)
        if "reference" not in report.probes:
            raise errors.RecordError(
                f"{probe_file} has no reference probe: run nvmeter probe without --only, "
                "or with --only reference"
            )
        board, trial = report.board, report.probes["reference"].trials["constant"]
    else:
        from nvmeter.probes.reference import run_trial
        from nvmeter.probes.report import check_readings

        with open_rig(device, simulate) as rig:
            board = rig.board.identity()
            took = "~12 s of the simulated board's clock" if simulate else "~12 s"
            console.err.print(f"running the J/TFLOP reference on {board.name} {board.uuid} ({took})")
            trial = run_trial(rig, "constant", quick=False)
        check_readings("reference", trial)  # a counter that went backwards is a fault, not a band failure
    result = judge(board, trial, band)
    t = trial
    rows = [
        ("TFLOP/s", f"{t.tflops:.1f}"),
        (
            "power",
            f"{t.load.power_w:.1f} W (idle before {t.idle_before.power_w:.1f} W, "
            f"after {t.idle_after.power_w:.1f} W)",
        ),
        ("J/TFLOP above idle", f"{t.j_per_tflop:.2f}"),
        ("exact FP32", {True: "yes", False: "NO", None: "not checked"}[t.exact]),
        ("band", result.band.describe() if result.band else "none known for this board"),
    ]
    console.out.print(make_table(f"reference check: {board.name} {board.uuid}", rows))
    for reason in result.reasons:
        say_line(f"nvmeter: check failed: {reason}")
    console.out.print(result.verdict.value.upper())
    if result.verdict is Verdict.FAIL:
        raise typer.Exit(1)
    if result.verdict is Verdict.NO_BAND and not allow_no_band:
        # a gate that passes a board it cannot judge would pass any board
        say_line(
            f"nvmeter: check not judged: no band known for {board.name}; give --band FAMILY "
            f"({', '.join(BANDS)}) or --allow-no-band to accept the figures unjudged"
        )
        raise typer.Exit(1)
