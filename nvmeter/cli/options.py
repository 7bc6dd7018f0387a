"""How the commands' options and arguments are parsed and shown, and what the shared ones mean.

Paths (:func:`parse_path`, :func:`parse_out_path`), flags without typer's ``<bool>`` (:func:`bool_flag`,
:class:`Command`, :class:`Group`), ``--device`` (:func:`parse_device`, :func:`parse_devices`,
:func:`open_rig`), ``--band`` (:func:`pick_band`) and the probe names ``--only`` takes.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer
import typer.core

from nvmeter import errors

# The probes `--only` takes (probes.BY_NAME; tests/test_cli.py holds the two equal): named here so
# that the help does not import the probes.
PROBE_NAMES = (
    "read_cost",
    "polling",
    "idle",
    "samples",
    "step",
    "bursts",
    "reference",
    "cadence",
    "cap_spread",
    "run_levels",
    "coverage",
)


# here, not beside the app (root.py): the data sub-app (data.py) is made of them too
class _HelpWithoutValue:
    """A command whose -h/--help shows no ``<bool>``: it takes no value (typer renders one)."""

    def get_help_option(self, ctx):
        option = super().get_help_option(ctx)
        if option is not None:
            option.metavar = ""
        return option


class Command(_HelpWithoutValue, typer.core.TyperCommand):
    """A command whose help shows a flag without typer's ``<bool>``."""


class Group(_HelpWithoutValue, typer.core.TyperGroup):
    """A group whose help shows a flag without typer's ``<bool>``."""


def parse_path(value: str | Path) -> Path:
    """A path option's or argument's value; an empty one is refused (it would mean the current folder).

    Only the empty text, and text that starts as an option does: a name of spaces is a legal
    file name, and ``./-name`` still names a file that starts with a dash. Typer passes an
    option's default through the parser too, as the default's own type (``probe``'s
    ``Path("probe.json")``: a plain ``nvmeter probe`` failed on it, a new user's trial).
    """
    text = os.fspath(value)
    if text == "":
        raise typer.BadParameter("is empty; give a path")
    if text.startswith("-"):
        # `nvmeter run --json -- CMD` (the FILE forgotten) wrote a record named `--` (an adversarial review)
        raise typer.BadParameter(f"takes a file name, not {text!r} (for a file so named, write ./{text})")
    return Path(text)


def parse_out_path(text: str | Path) -> Path:
    """A path to write (``--out``, ``--json``, ``--plot``): as :func:`parse_path`, and not a folder's name.

    ``--json x.json/`` wrote ``x.json`` without a word: the trailing slash names a folder (a
    breaker's trial, 2026-12-07).
    """
    from nvmeter.records import folder_name

    path = parse_path(text)
    if why := folder_name(os.fspath(text)):
        raise typer.BadParameter(why)
    return path


def bool_flag(*names: str, **kwargs):
    """A typer option for an on/off flag, without typer's ``<bool>`` (which reads as if it took a value)."""
    return typer.Option(*names, metavar="", **kwargs)


DeviceOpt = Annotated[
    str | None,
    typer.Option("--device", "-d", help="CUDA index (CUDA_VISIBLE_DEVICES respected) or GPU-… UUID."),
]
ProbeDeviceOpt = Annotated[
    str | None,
    typer.Option(
        "--device",
        "-d",
        help="CUDA index (CUDA_VISIBLE_DEVICES respected), GPU-… UUID, or all: every visible board "
        "in turn, one file each (OUT's name with the board's UUID added: probe-GPU-….json).",
    ),
]
SimulateOpt = Annotated[
    bool, bool_flag("--simulate", help="Use the simulated board (virtual time; no GPU needed).")
]


def known_bands():
    """The J/TFLOP bands by family (imported when asked: the probes' package is not light)."""
    from nvmeter.probes.bands import BANDS

    return BANDS


def pick_band(name: str | None, known) -> str | None:
    """A band's name as BANDS spells it (h200 is H200); UsageError for one not known."""
    if name is None:
        return None
    spelled = {b.casefold(): b for b in known}
    if name.casefold() not in spelled:
        raise errors.UsageError(f"unknown band {name!r}; known: {', '.join(known)}")
    return spelled[name.casefold()]


def parse_device(spec: str | None) -> int | str | None:
    """``--device`` as one board: a CUDA index, a UUID, or None; UsageError for ``all`` or a bad one."""
    from nvmeter.boards.protocol import device_spec, names_all

    if names_all(spec):
        raise errors.UsageError(
            "--device all is for nvmeter probe; here give one board (a CUDA index or a GPU-… UUID)"
        )
    return device_spec(spec, "--device")


def open_rig(device: str | None, simulate: bool):
    """The board and GPU worker (``Rig``) that ``--device`` and ``--simulate`` name."""
    from nvmeter.worker.rig import Rig

    return Rig.open(parse_device(device), simulate=simulate)


def parse_devices(spec: str | None) -> list[int | str | None]:
    """The boards ``--device`` names: one for now (``all`` comes with several-board windows)."""
    from nvmeter.boards.protocol import names_all

    if names_all(spec):
        raise errors.UsageError(
            "--device all: nvmeter run meters one board; give one CUDA index or GPU-… UUID "
            "(for several boards, nvmeter.JobWindow(devices='all') in Python)"
        )
    return [parse_device(spec)]
