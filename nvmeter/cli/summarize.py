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
    error (exit 2).
    """
    import json

    from nvmeter.score import summarize as summ

    if fmt not in ("md", "json"):
        raise errors.UsageError(f"--format must be md or json, not {fmt!r}")
    if plot_path is not None:
        summ.check_plot_path(plot_path, paths)

    def skipped(folder: Path, below: list[Path]) -> None:
        # a folder of a session's runs kept one level down read as a fault (a new user's trial)
        hint = f" (its subfolders hold runs: give {folder}/* to read them)" if below else ""
        say_line(f"skipped {folder}: no run-*.json or run-*.json.gz in it{hint}")

    loaded = summ.load_records(paths, on_empty=skipped)
    summaries = summ.summarize([r for _, r in loaded])
    if plot_path is not None:
        summ.plot(summaries, plot_path)
    if fmt == "json":
        print(json.dumps(summ.to_json(summaries), indent=1, allow_nan=False), file=console.STDOUT)
    else:
        print(summ.to_markdown(summaries), file=console.STDOUT)
    for line in summ.disagreement_lines(summaries):
        say_line(line)
    if plot_path is not None:
        say_line(f"wrote {plot_path}")
