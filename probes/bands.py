"""The J/TFLOP reference bands a board family's telemetry must fall in.

The reference is 4096^2 FP32 products, TF32 off, constant operands 2^-6, measured
above the idle either side (:mod:`nvmeter.probes.reference`). A board whose figures
fall outside its family's band has telemetry (or clocks, or power capping) that
should not be trusted for benchmarks until explained.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Band:
    """Accepted ranges for one board family.

    Attributes:
        family: Substring matched in the board's NVML name, e.g. ``"A100"``.
        j_per_tflop: (low, high) energy above idle per TFLOP, J.
        tflops: (low, high) achieved rate, TFLOP/s.
        provisional: True while the band rests on too few boards.
        source: Where the numbers come from.
        uuids: The boards a band of our own readings rests on (empty for a public band).

    """

    family: str
    j_per_tflop: tuple[float, float]
    tflops: tuple[float, float]
    provisional: bool
    source: str
    uuids: tuple[str, ...] = ()

    def contains(self, j_per_tflop: float, tflops: float) -> bool:
        """True if both figures lie inside the band (edges included)."""
        return not self.outside(j_per_tflop, tflops)

    def outside(self, j_per_tflop: float, tflops: float) -> list[str]:
        """Each figure outside the band, and on which side, in words (empty: inside).

        ``"5.77 J/TFLOP is below it"``: four significant digits, so a figure just outside an
        edge never prints as the edge; a figure that is not a number is outside, said so.
        """
        out = []
        for value, (low, high), unit in (
            (j_per_tflop, self.j_per_tflop, "J/TFLOP"),
            (tflops, self.tflops, "TFLOP/s"),
        ):
            if low <= value <= high:
                continue
            side = (
                "is not a number" if math.isnan(value) else ("is below it" if value < low else "is above it")
            )
            out.append(f"{value:.4g} {unit} {side}")
        return out

    def describe(self) -> str:
        """``"A100: 6-11 J/TFLOP, 15-23 TFLOP/s"`` plus a provisional note."""
        text = (
            f"{self.family}: {self.j_per_tflop[0]:g}-{self.j_per_tflop[1]:g} J/TFLOP, "
            f"{self.tflops[0]:g}-{self.tflops[1]:g} TFLOP/s"
        )
        if self.provisional:
            text += f" (provisional: {len(self.uuids)} board(s), {self.source})"
        return text


BANDS: dict[str, Band] = {
    "A100": Band(
        family="A100",
        j_per_tflop=(6.0, 11.0),
        tflops=(15.0, 23.0),
        provisional=False,
        # Public: 15 boards read 7.2-9.2 J/TFLOP (docs/facts.md).
        source="public A100 band (15 boards, 7.2-9.2 J/TFLOP)",
    ),
    # From five boards' readings (docs/probe.md says how): bench/h200_band.py takes each
    # H200 board's median constant-operand reference in results/ (23 readings, 5.47-5.77
    # J/TFLOP, 50.9-51.2 TFLOP/s across the boards) and applies the A100 band's margins
    # around its 15 boards (x0.83 below the lowest, x1.2 above the highest: 6/7.2, 11/9.2),
    # rounded outward (results/h200-band/derivation.json). Before: 4.8-6.9 J/TFLOP and
    # 42-61 TFLOP/s, provisional, around one board.
    # Score records quote the band in their reference_in_band and band_provisional checks:
    # a change here must re-derive them (bench/rederive_score.py) in the same commit, or
    # nvmeter summarize and bench/h200_band.py refuse them as altered.
    # H100: no band. Our H100s' references were printed by `nvmeter check` in the GPU tests' logs, but
    # results/ keeps the raw record of one board only (probe-h100-quick-546291fd.json: 5.58 J/TFLOP,
    # 50.9 TFLOP/s), and a band takes five boards' (bench/h200_band.py's rule): the device script's
    # `reference` step (bench/device/cap_spread.sh) keeps one a call.
    "H200": Band(
        family="H200",
        j_per_tflop=(4.5, 7.0),
        tflops=(42.0, 62.0),
        provisional=False,
        source="results/h200-band/derivation.json (5 boards, 5.47-5.77 J/TFLOP)",
        uuids=(
            "GPU-2e139fc3-2fea-95c7-6892-95ba9be5b34c",
            "GPU-378cf0ca-f772-11e8-9d6a-53f4ef0e318d",
            "GPU-84564389-4c9c-497d-b2c4-ff7d3cc51bd7",
            "GPU-c83a1f99-ae1b-ae9c-4a22-216732f69369",
            "GPU-d9c32883-e7b1-f855-ce77-51cf5a528306",
        ),
    ),
}


def band_for(board_name: str) -> Band | None:
    """The band whose family appears in ``board_name`` as a word (None if no band is known).

    As a word: ``"NVIDIA H200 NVL"`` is an H200, ``"NVIDIA GH200 480GB"`` is not. A GH200's
    counter covers its whole module (CPU and memory too, docs/facts.md), so the H200's
    band, which rests on a board-only counter, must not judge it.
    """
    for band in BANDS.values():
        if re.search(rf"(?<![A-Za-z0-9]){re.escape(band.family)}(?![A-Za-z0-9])", board_name, re.IGNORECASE):
            return band
    return None
