"""``python bench/window_accuracy.py run|plan|analyze|fit|check``: a thin layer over the package."""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import sys
from pathlib import Path

from accuracy import kinds as kinds_mod
from nvmeter import errors, records


def _names(text: str, known, what: str) -> tuple[str, ...]:
    """A comma-separated list of ``known`` names (argparse's type error names the unknown ones)."""
    names = tuple(k.strip() for k in text.split(",") if k.strip())
    unknown = [k for k in names if k not in known]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"unknown {what} {', '.join(unknown) or '(none)'}; {what}: {', '.join(known)}"
        )
    return names


def _kinds(text: str) -> tuple[str, ...]:
    return _names(text, kinds_mod.ALL_KINDS, "kinds")


def _types(text: str) -> tuple[str, ...]:
    from accuracy import plan

    return _names(text, plan.TYPES, "trial types")


def _lengths(text: str) -> tuple[float, ...]:
    from accuracy import plan

    try:
        values = tuple(float(x) for x in text.split(",") if x.strip())
    except ValueError:
        values = ()
    if not values or set(values) - set(plan.WARM_S):
        known = ", ".join(f"{w:g}" for w in plan.WARM_S)
        raise argparse.ArgumentTypeError(f"warm window lengths are among {known} s, not {text!r}")
    return values


def _figures(what: str, high: float, unit: str):
    """An argparse type: comma-separated ``what`` from 0 to ``high`` ``unit`` (at least one)."""

    def parse(text: str) -> tuple[float, ...]:
        values = tuple(_float(x) for x in text.split(",") if x.strip())
        if not values or not all(0 <= v <= high for v in values):  # nan fails too
            raise argparse.ArgumentTypeError(
                f"must be comma-separated {what} from 0 to {high:g} {unit}, not {text!r}"
            )
        return values

    return parse


def _singles(args):
    """The single calls' diagnostics of ``args`` (accuracy.plan.Singles)."""
    from accuracy import plan

    delays_s = tuple(ms / 1e3 for ms in args.single_delays_ms)
    return plan.Singles(delays_s, args.single_dither, args.single_tail_s)


def _seconds(zero_ok: bool = False):
    """An argparse type: a finite number of seconds > 0 (>= 0 with ``zero_ok``)."""
    least = ">= 0" if zero_ok else "> 0"

    def parse(text: str) -> float:
        value = _float(text)
        if not (math.isfinite(value) and (value >= 0 if zero_ok else value > 0)):
            raise argparse.ArgumentTypeError(f"must be a finite number of seconds {least}, not {text!r}")
        return value

    return parse


def _float(text: str) -> float:
    """``text`` as a float, nan where it is none."""
    try:
        return float(text)
    except ValueError:
        return math.nan


def _share(text: str) -> float:
    """An argparse type: a relative bound, a finite number in (0, 1)."""
    value = _float(text)
    if not (math.isfinite(value) and 0 < value < 1):
        raise argparse.ArgumentTypeError(f"must be a share between 0 and 1 (0.02 is 2%), not {text!r}")
    return value


def _measure_max_s(text: str) -> float:
    """An argparse type: measure()'s longest window, from the bench's sub-window to measure()'s own limit."""
    from accuracy.runner import MEASURE_SUBWINDOW_S
    from nvmeter.meter.adaptive import MAX_S

    value = _seconds()(text)
    if not MEASURE_SUBWINDOW_S <= value <= MAX_S:
        raise argparse.ArgumentTypeError(f"must be {MEASURE_SUBWINDOW_S:g}-{MAX_S:g} s, not {text!r}")
    return value


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 1, not {text!r}")
    return value


def _schema(path: Path) -> int:
    from nvmeter import records

    return records.parse_json(path, "a window-accuracy record").get("schema_version", 1)


def analyze(path: Path, plot: Path | None = None) -> dict:
    """One file's summary (schema 1: the first bench's analysis)."""
    if _schema(path) == 1:
        from accuracy import legacy

        return legacy.analyze(path, plot)
    from accuracy import analysis

    summary = analysis.analyze([path])
    if plot:
        from accuracy.plot import plot as draw

        draw(summary, plot)
    return summary


def fit(path: Path, kinds: tuple[str, ...] = kinds_mod.FIT_KINDS) -> dict:
    """The error model's state constants from one file (schema 1: as model 1 was fitted)."""
    if _schema(path) == 1:
        from accuracy import legacy

        return legacy.fit(path)
    from accuracy import fitcheck

    return fitcheck.fit(path, kinds)


def _parser() -> argparse.ArgumentParser:
    from accuracy import plan
    from accuracy.runner import MEASURE_SUBWINDOW_S, Config

    p = argparse.ArgumentParser(prog="window_accuracy.py", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    for name in ("run", "plan"):
        r = sub.add_parser(name, help="run the bench on board 0" if name == "run" else "print the plan only")
        r.add_argument(
            "--kinds", type=_kinds, default=kinds_mod.FIT_KINDS, help="comma-separated kinds of work"
        )
        r.add_argument("--budget-s", type=_seconds(), default=420.0, help="wall time for all kinds, s")
        r.add_argument("--block-s", type=_seconds(), default=45.0, help="trials between references, s")
        r.add_argument("--ref-s", type=_seconds(), default=10.0, help="reference window, s")
        r.add_argument("--idle-s", type=_seconds(), default=2.0, help="each quiescent idle span, s")
        r.add_argument(
            "--lead-s",
            type=_seconds(zero_ok=True),
            default=2.0,
            help="calls with no gap before a warm trial or reference, s",
        )
        r.add_argument("--seed", type=int, default=20261201)
        r.add_argument(
            "--only", type=_types, default=None, help="comma-separated trial types (default: all but stall)"
        )
        r.add_argument("--measure-runs", type=_positive_int, default=None, help="measure() trials a kind")
        r.add_argument(
            "--measure-target",
            type=_share,
            default=Config.target_rel_err,
            help=f"measure()'s target_rel_err (default {Config.target_rel_err:g})",
        )
        r.add_argument(
            "--measure-max-s",
            type=_measure_max_s,
            default=Config.measure_max_window_s,
            help=f"measure()'s max_window_s, s (default {Config.measure_max_window_s:g}, "
            f"at least {MEASURE_SUBWINDOW_S:g})",
        )
        r.add_argument(
            "--measure-warmup-s",
            type=_seconds(zero_ok=True),
            default=None,
            help="measure()'s warmup_s, s (default its own)",
        )
        r.add_argument(
            "--measure-min-windows",
            type=_positive_int,
            default=None,
            help="measure()'s min_windows (default its own, 3): more hold each run for longer",
        )
        r.add_argument("--single-runs", type=_positive_int, default=None, help="single-call trials a kind")
        r.add_argument(
            "--single-delays-ms",
            type=_figures("delays", 1000, "ms"),
            default=(),
            help="comma-separated idle inside each single call's window before the call, ms, in turn "
            "(a diagnostic of where the call falls in the counter's period)",
        )
        r.add_argument(
            "--single-dither",
            choices=plan.SINGLE_DITHER,
            default="off",
            help="single calls' windows dither their start: all, none (the meter's default), or every other",
        )
        r.add_argument(
            "--single-tail-s",
            type=_figures("tails", 2, "s"),
            default=(),
            help="comma-separated EnergyWindow(tail_s=...) of the single calls' windows, s, in turn "
            "(default: the profile's)",
        )
        r.add_argument(
            "--iso-idle",
            action="store_true",
            help="idle spans right before and after each isolated reference, which it is read with",
        )
        r.add_argument(
            "--warm-s",
            type=_lengths,
            default=None,
            help="comma-separated warm window lengths, s (default all)",
        )
        if name == "run":
            r.add_argument("--out", type=Path, required=True, help="the record (a re-run resumes it)")
            r.add_argument("--simulate", action="store_true", help="the simulated board and the kinds' twins")
            r.add_argument("--no-zeus", action="store_true", help="leave ZeusMonitor out")
            r.add_argument("--quiet", action="store_true", help="log references and blocks, not every trial")
            r.add_argument(
                "--exit",
                choices=("wait", "return"),
                default="wait",
                help="trials' window exit: idle for the end edge, or find it in the next calls",
            )
            r.add_argument(
                "--enclose",
                action="store_true",
                help="each block's warm windows inside its reference (one unbroken run of calls), and "
                "a reference of isolated single calls beside the single-call trials",
            )
            r.add_argument(
                "--step-log",
                action="store_true",
                help="every other warm trial logs the counter's steps inside its window (sparse polls; "
                "a diagnostic for the next error model)",
            )
        else:
            r.add_argument("--call-ms", type=float, default=40.0, help="one call, ms, for the estimate")
            r.add_argument("--meter-ms", type=float, default=5.0, help="nvmeter's own time per window, ms")
    a = sub.add_parser("analyze", help="errors against the references, per kind")
    a.add_argument("files", type=Path, nargs="+")
    a.add_argument("--json", type=Path, help="write the summary here")
    a.add_argument("--markdown", type=Path, help="write the tables here")
    a.add_argument("--plot", type=Path, help="write the figure here")
    a.add_argument(
        "--model",
        type=_positive_int,
        default=None,
        help="read every window under this error model (default: the one each record names)",
    )
    a.add_argument(
        "--pool-except",
        nargs="*",
        default=None,
        metavar="FILE",
        help="also pool each kind's trials over every file but these (the fit's), one table",
    )
    a.add_argument(
        "--pool-plot",
        type=Path,
        default=None,
        help="with --pool-except: every pooled trial's error and bound, per kind and cell, as a figure",
    )
    f = sub.add_parser("fit", help="the error model's state constants, from one board's fit kinds")
    f.add_argument("file", type=Path)
    f.add_argument("--kinds", type=_kinds, default=kinds_mod.FIT_KINDS)
    f.add_argument("--json", type=Path, help="write the fit here (check reads it with --constants)")
    c = sub.add_parser("check", help="issue 10's targets on another board's check kinds")
    c.add_argument("file", type=Path)
    c.add_argument("--constants", type=Path, help="a fit's JSON (else the current error model)")
    c.add_argument("--kinds", type=_kinds, default=kinds_mod.CHECK_KINDS)
    c.add_argument("--json", type=Path)
    for q in (a, f, c):  # read every window with another power lag than it was recorded with
        q.add_argument("--lag-s", type=float, help="the board profile's power_lag_s to read with, s")
        q.add_argument("--lag-err-s", type=float, help="its bound, s")
        q.add_argument(
            "--cap-probe",
            type=Path,
            action="append",
            default=[],
            help="a probe file with the cap-spread probe: its board's windows read with its cap spread "
            "(error model 10; repeatable, one a board)",
        )
        q.add_argument(
            "--level-probe",
            type=Path,
            action="append",
            default=[],
            help="a probe file with the run-level probe: its board's windows read with its run level "
            "(error model 13; repeatable, one a board)",
        )
        q.add_argument(
            "--cap-defaults",
            action="store_true",
            help="read the other boards' windows with their family's current cap-spread defaults, not "
            "those recorded (error model 10: what an unprobed board is told now)",
        )
    return p


def _profile_changes(args) -> None:
    from accuracy import analysis
    from nvmeter.probes.report import load_report

    for name, value in (("power_lag_s", args.lag_s), ("power_lag_err_s", args.lag_err_s)):
        if value is not None:
            analysis.PROFILE_CHANGES[name] = value
    for path in args.cap_probe:
        report = load_report(path)
        if "cap_spread" not in report.probes:
            raise errors.UsageError(f"{path} holds no cap-spread probe (nvmeter probe --cap-spread)")
        analysis.CAP_SPREADS[report.board.uuid] = report.profile().cap_spread
    for path in args.level_probe:
        report = load_report(path)
        if "run_levels" not in report.probes:
            raise errors.UsageError(f"{path} holds no run-level probe (nvmeter probe --run-levels)")
        analysis.RUN_LEVELS[report.board.uuid] = report.profile().run_level_rel
    analysis.CAP_DEFAULTS = args.cap_defaults


def _config(args):
    from accuracy.runner import Config

    return Config(
        kinds=args.kinds,
        budget_s=args.budget_s,
        block_s=args.block_s,
        ref_s=args.ref_s,
        idle_s=args.idle_s,
        lead_s=args.lead_s,
        seed=args.seed,
        zeus=not getattr(args, "no_zeus", False),
        verbose=not getattr(args, "quiet", False),
        only=args.only,
        measure_runs=args.measure_runs,
        target_rel_err=args.measure_target,
        measure_max_window_s=args.measure_max_s,
        measure_warmup_s=getattr(args, "measure_warmup_s", None),
        measure_min_windows=getattr(args, "measure_min_windows", None),
        warm_s=args.warm_s,
        exit=getattr(args, "exit", "wait"),
        enclose=getattr(args, "enclose", False),
        step_log=getattr(args, "step_log", False),
        single_runs=args.single_runs,
        singles=_singles(args),
        iso_idle=args.iso_idle,
    )


def _plan(args) -> None:
    from accuracy import plan
    from accuracy.runner import measure_s_guess

    for i, kind in enumerate(args.kinds):
        timing = plan.Timing(
            call_s=args.call_ms / 1e3,
            ref_s=args.ref_s,
            idle_s=args.idle_s,
            meter_s=args.meter_ms / 1e3,
            lead_s=args.lead_s,
            measure_s=measure_s_guess(args.measure_max_s, getattr(args, "measure_warmup_s", None)),
        )
        budget = args.budget_s / len(args.kinds)
        full, floor, _ = plan.limits(args.only, args.measure_runs, args.warm_s, args.single_runs)
        counts, est = plan.fit_counts(kind, budget, timing, args.block_s, args.seed, full, floor)
        trials = plan.units(kind, counts, args.seed, _singles(args))
        blocks = plan.blocks(kind, trials, timing, args.block_s, args.seed)
        print(f"{kind}: ~{est:.0f} s of {budget:.0f} s, {len(blocks)} blocks, {json.dumps(counts.to_dict())}")
        if i == 0:
            for b in blocks:
                print("  ", " ".join(u.id for u in b))


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit code."""
    args = _parser().parse_args(argv)
    if args.cmd == "run":
        from accuracy.runner import run
        from accuracy.store import RecordMismatch

        try:
            run(args.out, _config(args), simulate=args.simulate)
        except RecordMismatch as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        return 0
    if args.cmd == "plan":
        _plan(args)
        return 0
    try:
        _profile_changes(args)
    except (errors.NvmeterError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        _check_outputs(args)
    except errors.NvmeterError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    reads = {"analyze": _analyze, "fit": _fit}
    if args.cmd in reads:
        try:
            return reads[args.cmd](args)
        except (errors.NvmeterError, OSError, ValueError, KeyError) as exc:
            # a missing, unreadable or foreign file: one line, nothing written
            print(f"error: {_one_line(exc)}", file=sys.stderr)
            return 2
    from accuracy import analysis, fitcheck

    constants = json.loads(args.constants.read_text())["constants"] if args.constants else None
    result = fitcheck.check(args.file, constants, args.kinds)
    result["profile_changes"] = dict(analysis.PROFILE_CHANGES)
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")
    print(fitcheck.report(result))
    return 0 if result["all_hold"] else 1


def _check_outputs(args) -> None:
    """``--json`` and ``--markdown``: writable, and none of the files the command reads."""
    inputs = [getattr(args, "file", None), getattr(args, "constants", None)]
    inputs += list(getattr(args, "files", None) or []) + list(getattr(args, "pool_except", None) or [])
    check_outputs([getattr(args, "json", None), getattr(args, "markdown", None)], inputs)


def check_outputs(outputs: list, inputs: list) -> None:
    """Each of ``outputs`` (None: not asked for) writable, and none of ``inputs``, the files read.

    ``fit wa.json --json wa.json`` replaced the bench record with its constants (a breaker, 2026-12-07).

    Raises:
        UsageError: as :func:`nvmeter.records.check_writable` (a table or summary, not a record).
    """
    read = tuple(("input", Path(p)) for p in inputs if p is not None)
    for out in outputs:
        if out is not None:
            records.check_writable(out, read, record=False)


def _one_line(exc: Exception) -> str:
    """A file's failure to be read as a bench record, in one line."""
    if isinstance(exc, KeyError):  # a JSON file of another kind (a summary, say)
        return f"not a window-accuracy bench record (it has no {exc} field)"
    if isinstance(exc, OSError) and exc.strerror:
        return f"{exc.filename}: {exc.strerror}" if exc.filename else exc.strerror
    return str(exc)


def _fit(args) -> int:
    """``fit``: the constants as JSON, printed (and written to ``--json``)."""
    from accuracy import analysis, fitcheck

    legacy = _schema(args.file) == 1
    held = set(args.kinds) if legacy else set(analysis.load(args.file)["kinds"])
    if missing := [k for k in args.kinds if k not in held]:  # a dry run of one kind, say
        raise errors.UsageError(
            f"{args.file} holds no {', '.join(missing)} (it has {', '.join(sorted(held))}): give --kinds"
        )
    result = fit(args.file, args.kinds) if legacy else fitcheck.fit_v2(args.file, args.kinds)
    result["profile_changes"] = dict(analysis.PROFILE_CHANGES)
    text = json.dumps(result, indent=1)
    if args.json:
        args.json.write_text(text + "\n")
    print(text)
    return 0


def _check_pool(files: list[Path], excepted: list[str]) -> None:
    """Raise UsageError unless the pool is well-formed: excepted files among FILES, some left, no copies."""
    names = [Path(p).name for p in files]
    if len(set(names)) != len(names):
        raise errors.UsageError("two FILES share a name; --pool-except names files by name")
    unknown = sorted({Path(p).name for p in excepted} - set(names))
    if unknown:
        raise errors.UsageError(f"--pool-except {', '.join(unknown)}: not among FILES")
    if len({Path(p).name for p in excepted}) == len(names):
        raise errors.UsageError("--pool-except names every file: nothing is left to pool")
    seen: dict[str, Path] = {}
    for p in files:
        digest = hashlib.sha256(Path(p).read_bytes()).hexdigest()
        if digest in seen:
            raise errors.UsageError(f"{p} is a copy of {seen[digest]}: its trials would count twice")
        seen[digest] = Path(p)


def _check_figure(path: Path | None, option: str) -> None:
    """Raise UsageError unless a figure can be written at ``path``: checked before anything is written.

    Its suffix names the format: matplotlib writes a name without one to NAME.png, and refuses
    an unknown one only once the summary and tables are written.
    """
    if path is None:
        return
    from matplotlib.figure import Figure

    from nvmeter import records

    formats = Figure().canvas.get_supported_filetypes()
    if path.suffix.lower().lstrip(".") not in formats:
        raise errors.UsageError(
            f"{option} {path}: the name's suffix gives the figure's format ({', '.join(sorted(formats))})"
        )
    records.check_writable(path, record=False)


def _analyze(args) -> int:
    if args.pool_plot is not None and args.pool_except is None:
        raise errors.UsageError(
            "--pool-plot draws the pool: give --pool-except too (with no FILE to pool all)"
        )
    _check_figure(args.plot, "--plot")
    _check_figure(args.pool_plot, "--pool-plot")
    if all(_schema(p) == 1 for p in args.files):
        if args.pool_except is not None:  # was silently ignored, the figure not drawn
            raise errors.UsageError(
                "--pool-except and --pool-plot pool schema-2 records; FILES are all schema 1"
            )
        for p in args.files:
            summary = analyze(p, args.plot)
            print(json.dumps(summary, indent=1))
            if args.json:
                args.json.write_text(json.dumps(summary, indent=1) + "\n")
        return 0
    from accuracy import analysis

    if args.pool_except is not None:
        _check_pool(args.files, args.pool_except)
    summary = analysis.analyze(args.files, args.model)
    text = analysis.markdown(summary)
    if args.pool_except is not None:
        fit = tuple(Path(p).name for p in args.pool_except)
        summary["pooled"] = {"except": list(fit), "kinds": analysis.pooled(summary, fit)}
        left = [Path(p).name for p in summary["files"] if Path(p).name not in fit]
        text = (
            f"### Pooled over {', '.join(left)}\n\n"
            + analysis.pooled_markdown(summary["pooled"]["kinds"])
            + "\n\n"
            + text
        )
    # the figures first: one that has nothing to draw is refused before any file is written
    if args.pool_plot:
        from accuracy.plot import pooled_plot

        pooled_plot(summary["pooled"]["kinds"], args.pool_plot)
    if args.plot:
        from accuracy.plot import plot

        plot(summary, args.plot)
    if args.json:
        args.json.write_text(json.dumps(summary, indent=1, default=str) + "\n")
    if args.markdown:
        args.markdown.write_text(text + "\n")
    print(text)
    return 0
