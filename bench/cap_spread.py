"""Does a per-board spread at the power cap, measured like a probe, bound single windows there?

The plan under test: the probe runs work at the cap in consecutive sub-windows, the board's
profile carries the relative SD ``s(L)`` of their per-call energy at window length ``L``, and
a single window on a limited board gets a state part of ``max(state_rel, 2·s(L))`` of its
energy above idle instead of the constant ``state_rel``. From committed records only:

1. per board, ``s(L)`` at ~0.5, ~1 and ~2 s from its bf16cap ``measure()`` runs (consecutive,
   non-overlapping blocks of sub-windows; SD about each run's own mean, pooled over runs);
2. per board, its bf16cap warm and stall single windows under model 8 as replayed, and with the
   state part widened: bounds held and median bound, per window length;
3. ``s(0.5)`` against the SD of the same board's warm 0.5 s windows' errors.

    .venv-test/bin/python bench/cap_spread.py results/enclose/call[0-9]-*.json* \\
        results/enclose/call[1-3][0-9]-*.json* results/enclose/call4[0-4]-*.json* \\
        > results/enclose/cap-spread.txt

(calls 1-44: the boards the family defaults were set from, nvmeter.boards.profile; with no files it
reads every record, later ones too)

Nothing here is part of the meter.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np
from accuracy import analysis

from nvmeter import errors
from nvmeter.boards import profile as profiles
from nvmeter.meter import spread

KIND = "bf16cap"
MODEL = 8
BLOCK_S = (0.25, 0.5, 1.0, 2.0)
SLACK_S = 0.05  # a block ends at the first step at least BLOCK_S - SLACK_S after its start


@dataclass
class Board:
    """One board's bf16cap measure() runs and single-window trials, across records."""

    uuid: str
    name: str
    runs: list = field(default_factory=list)  # Measurements of measure() trials
    windows: list = field(default_factory=list)  # analysis.Trial of warm/stall windows
    capped: list = field(default_factory=list)  # (mode, at the cap at an edge) of every trial

    @property
    def family(self) -> str:
        """``H100``, ``H200`` or the board's name."""
        return next((f for f in ("H100", "H200") if f in self.name), self.name)


def records(paths: list[Path]):
    """(path, record) of each window-accuracy record among ``paths`` (others skipped)."""
    for path in paths:
        try:
            rec = analysis.load(path)
        except errors.RecordError:
            continue
        if "kinds" in rec:
            yield path, rec


def at_cap(m) -> bool:
    """True when any edge state of ``m`` reported the software power cap (bit 0x4)."""
    return any(s.power_capped for s in m.states)


def gather(paths: list[Path]) -> dict[str, Board]:
    """Boards by UUID, with their bf16cap measure() runs and warm/stall windows (model 8)."""
    boards: dict[str, Board] = {}
    for _, rec in records(paths):
        if KIND not in rec["kinds"]:
            continue
        uuid = rec["board"]["uuid"]
        board = boards.setdefault(uuid, Board(uuid, rec["board"].get("name", "?")))
        for t in analysis.kind_data(rec, KIND, MODEL).trials:
            if t.m is None:
                continue
            board.capped.append((t.mode, at_cap(t.m)))
            if t.mode == "measure":
                board.runs.append(t.m)
            elif t.mode in ("warm", "stall") and t.ref_ok and math.isfinite(t.expected_mj):
                board.windows.append(t)
    return boards


def cuts_of(m, length_s: float) -> list[tuple[float, float, float]]:
    """The run's in-work counter steps (:func:`spread.boundaries`) that cut it into ~``length_s`` blocks.

    A block ends at the first step at least ``length_s - SLACK_S`` after its start; a remainder
    shorter than a block is dropped.
    """
    return spread.cut_at(spread.boundaries(m), length_s - SLACK_S)


def block_mj(m, length_s: float, by_calls: bool) -> list[float]:
    """Per-call energy above idle less the control, mJ, of consecutive ~``length_s`` blocks of a run.

    ``by_calls`` False: the block's power above idle times the run's mean time a call, as
    :func:`spread.subwindow_mj` gives it. True: the block's energy above idle over the calls
    that ran in it (fractional, from the run's call ends), so a block whose calls ran slower
    is charged for fewer of them.
    """
    cuts = cuts_of(m, length_s)
    if len(cuts) < 2 or not m.calls or not m.work_s > 0:
        return []
    if not by_calls:
        return list(spread.subwindow_mj(m, cuts))
    ends = np.asarray(m.call_ends_s, dtype=float)
    if len(ends) != m.calls:
        return []
    done = np.interp([c[0] for c in cuts], np.concatenate([[m.work_t0_s], ends]), np.arange(m.calls + 1))
    return [
        ((e_b - e_a) - m.idle_w * (t_b - t_a) * 1e3) / (n_b - n_a) - m.control_mj
        for (t_a, e_a, _), (t_b, e_b, _), n_a, n_b in zip(cuts, cuts[1:], done, done[1:], strict=False)
        if n_b > n_a
    ]


def pooled_spread(runs: list, length_s: float, by_calls: bool) -> tuple[float, int, int]:
    """(relative SD, blocks, runs with >= 2 blocks) of blocks about their own run's mean, pooled
    (:func:`nvmeter.meter.spread.pooled_rel_sd`, as the cap-spread probe pools its runs)."""
    per_run = [block_mj(m, length_s, by_calls) for m in runs]
    rel_sd, _ = spread.pooled_rel_sd(per_run)
    return rel_sd, sum(map(len, per_run)), sum(len(values) >= 2 for values in per_run)


def interp_log(table: dict[float, float], length_s: float) -> float:
    """``table``'s spread at ``length_s`` as the meter reads a profile's (``BoardProfile.cap_spread_rel``:
    log-linear on an envelope that never falls with a shorter window, grown as sqrt below the shortest)."""
    known = tuple(sorted((k, v) for k, v in table.items() if math.isfinite(v)))
    if not known:
        return math.nan
    return profiles.HOPPER.with_(cap_spread=known).cap_spread_rel(length_s)


def widened(t, s: float) -> float:
    """The trial's per-call bound with the state part max(state_rel, 2 s) of its energy, mJ."""
    rel = t.m.model.state_rel
    return t.per_call_mj_err + (max(rel, 2 * s) - rel) * abs(t.per_call_mj)


def spread_table(boards: list[Board]) -> dict[str, dict[str, dict[float, float]]]:
    """Print step 1 and return s(L) by variant (``power``, ``calls``) and board UUID."""
    print(
        f"\n1. probe-like spread s(L) of {KIND} measure() runs: rel. SD of ~L s blocks about each run's mean"
    )
    print("   power: block's power above idle x run's mean call time (spread.subwindow_mj's figure)")
    print("   calls: block's energy above idle / calls that ran in it (from the run's call ends)")
    head = " ".join(f"{'s(' + str(L) + ')':>7} {'blk':>4}" for L in BLOCK_S)
    print(f"{'board':14} {'type':5} {'runs':>4} {'variant':7} {head}")
    table: dict[str, dict[str, dict[float, float]]] = {"power": {}, "calls": {}}
    for b in boards:
        for variant in table:
            row, cells = {}, []
            for length in BLOCK_S:
                s, blocks, used = pooled_spread(b.runs, length, variant == "calls")
                row[length] = s
                cells.append(f"{100 * s:6.2f}% {blocks:4d}" + ("" if used == len(b.runs) else f"({used}r)"))
            table[variant][b.uuid] = row
            print(f"{b.uuid[:14]:14} {b.family:5} {len(b.runs):4d} {variant:7} " + " ".join(cells))
    print("   blk: blocks the figure rests on; (Nr): only N runs had >= 2 blocks at that length")
    return table


def bound_table(boards: list[Board], s_by: dict[str, dict[str, dict[float, float]]]) -> None:
    """Print step 2: bounds held and median bound, model 8 as replayed and widened by each variant."""
    print(f"\n2. {KIND} warm/stall single windows: model 8 bound b; b' with state part max(0.7%, 2 s(L))")
    print(
        f"{'board':14} {'type':5} {'mode':5} {'L s':>4} {'n':>3} {'variant':7} {'s(L)':>6} "
        f"{'held b':>6} {'held b2':>7} {'med b':>6} {'med b2':>6} {'max|e|':>6}"
    )
    totals: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0, 0])
    for b in boards:
        groups = defaultdict(list)
        for t in b.windows:
            groups[(t.mode, t.unit.get("window_s"))].append(t)
        for (mode, length), trials in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1] or 0)):
            ref = [abs(t.expected_mj) for t in trials]
            err = [abs(t.per_call_mj - t.expected_mj) for t in trials]
            old = [t.per_call_mj_err for t in trials]
            worst = 100 * max(e / r for e, r in zip(err, ref, strict=True))
            for variant, by_board in s_by.items():
                s = interp_log(by_board[b.uuid], statistics.median(t.m.work_s for t in trials))
                new = [widened(t, s) for t in trials]
                held_old = sum(e <= x for e, x in zip(err, old, strict=True))
                held_new = sum(e <= x for e, x in zip(err, new, strict=True))
                tot = totals[(b.family, variant)]
                tot[0], tot[1], tot[2] = tot[0] + len(trials), tot[1] + held_old, tot[2] + held_new
                print(
                    f"{b.uuid[:14]:14} {b.family:5} {mode:5} {length:4} {len(trials):3d} {variant:7} "
                    f"{100 * s:5.2f}% {held_old:3d}/{len(trials):<3d} {held_new:3d}/{len(trials):<3d} "
                    f"{share(old, ref):5.2f}% {share(new, ref):5.2f}% {worst:5.2f}%"
                )
    for (family, variant), (n, held_old, held_new) in sorted(totals.items()):
        print(f"   {family} {variant}: held {held_old}/{n} as replayed, {held_new}/{n} widened")
    print(
        "   med b, med b2: median bound; max|e|: largest error; all shares of the reference's per-call energy"
    )


def share(values: list[float], ref: list[float]) -> float:
    """Median of ``values`` as percent of ``ref``, pairwise."""
    return 100 * statistics.median(v / r for v, r in zip(values, ref, strict=True))


def predict_table(boards: list[Board], s_by: dict[str, dict[str, dict[float, float]]]) -> None:
    """Print step 3: s(0.5) against the SD of the same board's warm 0.5 s windows' errors."""
    print(f"\n3. s(0.5) from measure() against the SD of warm 0.5 s {KIND} windows' errors, same board")
    print(f"{'board':14} {'type':5} {'s power':>7} {'s calls':>7} {'SD err':>7} {'mean err':>8} {'n':>3}")
    for b in boards:
        errs = [t.err for t in b.windows if t.mode == "warm" and t.unit.get("window_s") == 0.5]
        sd = statistics.stdev(errs) if len(errs) >= 2 else math.nan
        mean = statistics.fmean(errs) if errs else math.nan
        print(
            f"{b.uuid[:14]:14} {b.family:5} {100 * s_by['power'][b.uuid][0.5]:6.2f}% "
            f"{100 * s_by['calls'][b.uuid][0.5]:6.2f}% {100 * sd:6.2f}% {100 * mean:+7.2f}% {len(errs):3d}"
        )


def skipped(boards: dict[str, Board]) -> None:
    """Print the boards with bf16cap windows but no bf16cap measure() runs."""
    print(f"\nBoards without {KIND} measure() runs (skipped):")
    for b in sorted(boards.values(), key=lambda b: (b.family, b.uuid)):
        if not b.runs:
            modes = defaultdict(int)
            for t in b.windows:
                modes[t.mode] += 1
            print(
                f"   {b.uuid[:14]} {b.family}: "
                + (", ".join(f"{k} {v}" for k, v in modes.items()) or "no windows")
            )


def stand_in(boards: dict[str, Board], s_by: dict[str, dict[str, dict[float, float]]]) -> None:
    """Step 2 for boards without measure() runs, with their family's median s(L) as a stand-in."""
    print(f"\n2b. boards without {KIND} measure() runs, with the median s(L) of their family's boards")
    print("    (a stand-in: no probe figure of their own; not the plan as proposed)")
    lacking = sorted(
        (b for b in boards.values() if not b.runs and b.windows), key=lambda b: (b.family, b.uuid)
    )
    for by_board in s_by.values():
        for b in lacking:
            same = [row for u, row in by_board.items() if boards[u].family == b.family and boards[u].runs]
            by_board[b.uuid] = {
                length: statistics.median([r[length] for r in same if math.isfinite(r[length])] or [math.nan])
                for length in BLOCK_S
            }
    bound_table(lacking, s_by)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default = sorted(Path("results/enclose").glob("call*.json*"))
    parser.add_argument("records", nargs="*", type=Path, default=default)
    args = parser.parse_args()
    boards = gather([p for p in args.records if "summary" not in p.name])
    for mode in ("measure", "warm", "stall", "single"):
        capped = [ok for b in boards.values() for m, ok in b.capped if m == mode]
        print(f"{KIND} {mode} trials at the software power cap (0x4) at an edge: {sum(capped)}/{len(capped)}")
    with_runs = sorted((b for b in boards.values() if b.runs), key=lambda b: (b.family, b.uuid))
    s_by = spread_table(with_runs)
    bound_table([b for b in with_runs if b.windows], s_by)
    predict_table([b for b in with_runs if b.windows], s_by)
    skipped(boards)
    stand_in(boards, s_by)


if __name__ == "__main__":
    main()
