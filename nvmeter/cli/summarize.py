"""``nvmeter summarize``: the tables (and a plot) of score records, recomputed from their readings."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from nvmeter import errors
from nvmeter.cli import console
from nvmeter.cli.console import say_line
from nvmeter.cli.guard import guarded
from nvmeter.cli.options import parse_out_path, parse_path


@guarded
def summarize(
    paths: Annotated[
        list[Path],
        typer.Argument(help="Folders of score records (or record files).", parser=parse_path, metavar="PATH"),
    ],
    fmt: Annotated[str, typer.Option("--format", help="md (two markdown tables) or json.")] = "md",
    model: Annotated[
        str,
        typer.Option(
            "--model",
            help="The error model the bounds are read under: current (this nvmeter's, the default), "
            "recorded (each run's own, as published), or a version number.",
        ),
    ] = "current",
    plot_path: Annotated[
        Path | None,
        typer.Option(
            "--plot",
            help="Also draw energy per call against time per call (.png, .svg, .pdf).",
            parser=parse_out_path,
        ),
    ] = None,
) -> None:
    """The tables of score records, every figure recomputed from the raw readings.

    Per method: medians over passing runs (ms/call, mJ/call above idle ± bound, W above idle,
    MNIST accuracy); and every run. A stored figure that disagrees with its recomputation is an
    error (exit 2). Every run's bound is re-read from its raw windows under this nvmeter's error
    model, as a window made today would be read: older models' bounds are known to be narrower
    (1.3-3.6 times on the H200 records, docs/results.md). ``--model recorded`` reads each run under
    the model it names, as it was published; the tables say which.
    """
    import json

    from nvmeter.score import summarize as summ

    if fmt not in ("md", "json"):
        raise errors.UsageError(f"--format must be md or json, not {fmt!r}")
    version = _model_version(model)
    if plot_path is not None:
        summ.check_plot_path(plot_path, paths)

    def skipped(folder: Path, below: list[Path]) -> None:
        # a folder of a session's runs kept one level down read as a fault (a new user's trial)
        # the slash: a shell's {folder}/* also names the session's notes and logs, which are not runs
        hint = f" (its subfolders hold runs: give {folder}/*/ to read them)" if below else ""
        say_line(f"skipped {folder}: no run-*.json or run-*.json.gz in it{hint}")

    loaded = summ.load_records(paths, on_empty=skipped)
    runs = [r if version is None else summ.under_model(r, version) for _, r in loaded]
    summaries = summ.summarize(runs)
    if plot_path is not None:
        summ.plot(summaries, plot_path)
    if fmt == "json":
        print(json.dumps(summ.to_json(summaries, version), indent=1, allow_nan=False), file=console.STDOUT)
    else:
        print(summ.to_markdown(summaries, version), file=console.STDOUT)
    for line in summ.disagreement_lines(summaries):
        say_line(line)
    if plot_path is not None:
        say_line(f"wrote {plot_path}")


def _model_version(text: str) -> int | None:
    """``--model``'s error model: None for each run's own (recorded)."""
    from nvmeter.meter import errormodel

    if text == "recorded":
        return None
    if text == "current":
        return errormodel.CURRENT
    known = ", ".join(map(str, errormodel.MODELS))
    # ASCII only: str.isdigit() takes '²' (int() then raises) and int() takes full-width '１３'
    if not (text.isascii() and text.isdigit()) or int(text) not in errormodel.MODELS:
        raise errors.UsageError(
            f"--model takes recorded, current or an error model's version ({known}), not {text!r}"
        )
    return int(text)
