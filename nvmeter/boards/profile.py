"""`BoardProfile`: the telemetry properties of one board that the meter's edges and bound use.

Every figure here is one that ``nvmeter probe`` measures. A profile names where it came
from (``source``): a family's defaults, or a probe file of that very board. The meter reads
these figures only from a profile, never from module constants, so a board that differs
from the one our defaults were measured on gets its own figures once it is probed.
"""

from __future__ import annotations

import contextlib
import functools
import math
import os
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path

from nvmeter import errors, files, records
from nvmeter.boards.protocol import BoardIdentity

# What each figure may be, (lowest, highest): beyond these it is a damaged file, not a board. The
# counter steps every ~0.1 s on every board we know of (docs/facts.md); a sample buffer ~20 ms.
_LIMITS = {
    "counter_period_s": (0.01, 2.0),
    "edge_timeout_s": (0.05, 5.0),
    "polling_artefact_w": (0.0, 500.0),
    "tail_s": (0.0, 2.0),
    "sample_spacing_s": (0.001, 1.0),
    "sample_lead_s": (0.0, 1.0),
    "samples_vs_counter": (0.0, 0.5),
    "sample_every_s": (0.05, 10.0),
    "power_lag_s": (0.0, 0.5),
    "power_lag_err_s": (0.0, 0.5),
    "counter_coverage": (0.01, 1.0),
    "run_level_rel": (0.0, 0.5),
}
# The largest run level a profile holds: a board whose runs differ more is not at a level but broken.
RUN_LEVEL_MAX = _LIMITS["run_level_rel"][1]
# The slowest counter and the longest edge wait a profile holds: a probe whose counter showed no
# period takes these (nvmeter.probes.profile), the widest figures a profile can say.
COUNTER_PERIOD_MAX_S = _LIMITS["counter_period_s"][1]
EDGE_TIMEOUT_MAX_S = _LIMITS["edge_timeout_s"][1]
# The longest tail and lag bound a profile holds: a probe's step response widens them up to these.
TAIL_MAX_S = _LIMITS["tail_s"][1]
POWER_LAG_ERR_MAX_S = _LIMITS["power_lag_err_s"][1]
# A cap-spread entry: (window length s, relative SD); lengths from a counter period to a minute.
_SPREAD_WINDOW_S = (0.05, 60.0)
_SPREAD_REL = (0.0, 0.5)


# Figures a profile written by an older nvmeter lacks: the cap spread (before nvmeter 0.3: not
# known), the counter's coverage (1, as the meter assumed) and the run level (not known).
OPTIONAL = ("cap_spread", "counter_coverage", "run_level_rel")


@dataclass(frozen=True)
class BoardProfile:
    """What the meter needs to know of a board's telemetry.

    Attributes:
        source: Where the figures come from, e.g. ``"defaults:H200"`` or a probe file's path.
        counter_period_s: Energy-counter update period, s. Plain edges are known to a period.
        edge_timeout_s: Longest wait for a counter step at an aligned edge, s.
        polling_artefact_w: Extra board power while the counter is polled back to back, W.
        tail_s: Wait after the work before the end edge, s (the counter's step delay plus
            the samples' fall to idle).
        sample_spacing_s: Spacing of the driver's power samples, s.
        sample_lead_s: Samples taken before the work's start when integrating it, s.
        samples_vs_counter: Relative disagreement of the sample buffer's integral with the
            counter over seconds (a bound, not a correction).
        sample_every_s: Read the sample buffer at least this often, s (its history is longer).
        power_lag_s: How long the board's power (as its sensors report it) trails the work,
            s: a window that starts inside a run of calls still holds this much of the
            previous calls' power, which the meter takes off.
        power_lag_err_s: The bound on that lag, s.
        cap_spread: At the power cap, how far the per-call energy of windows of a given length
            moves about its steady value: ``(window_s, rel_sd)`` pairs, shortest first, each an
            upper confidence limit of the relative SD (``nvmeter.probes.capspread``). Error model
            10 widens a limited window's state part to ``2 x`` this at its length
            (:meth:`cap_spread_rel`). Empty: not known (a profile from before it).
        counter_coverage: Share of each counter period the energy counter senses (1: all of it,
            as measured on Hopper). Under a share, work whose power moves within a period reads
            wherever the sensed part falls, so error model 11 adds the window's disagreement
            between the counter and the power samples to the bound. A profile from before it
            reads 1, the meter's assumption then.
        run_level_rel: How far one run's per-call energy may sit from the same calls' steady
            value for the whole run, share of the energy above idle: some boards settle into
            one of two power levels after each start, at the same clocks and temperature, and
            a run's own windows cannot see which (``nvmeter.probes.runlevels``: a probe's figure
            is kept only where wider than the family's). Error model 13 holds every window's
            state part to at least this. None: not known (a profile from before it; the meter
            takes the family's).

    """

    source: str
    counter_period_s: float
    edge_timeout_s: float
    polling_artefact_w: float
    tail_s: float
    sample_spacing_s: float
    sample_lead_s: float
    samples_vs_counter: float
    sample_every_s: float
    power_lag_s: float
    power_lag_err_s: float
    cap_spread: tuple[tuple[float, float], ...] = field(default=())
    counter_coverage: float = 1.0
    run_level_rel: float | None = None

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "source":
                if not isinstance(value, str):
                    raise errors.RecordError(f"a board profile's source must be text, not {value!r}")
                continue
            if f.name == "cap_spread":
                object.__setattr__(self, f.name, self._checked_spread(value))
                continue
            if value is None and f.name == "run_level_rel":
                continue
            low, high = _LIMITS[f.name]
            if isinstance(value, bool) or not (isinstance(value, (int, float)) and low <= value <= high):
                raise errors.RecordError(
                    f"board profile {self.source}: {f.name} = {value!r} is not in [{low:g}, {high:g}]"
                )
            object.__setattr__(self, f.name, float(value))  # numpy scalars print and store as plain floats

    def _checked_spread(self, value) -> tuple[tuple[float, float], ...]:
        """``value`` as ``((window_s, rel_sd), ...)`` of plain floats, or RecordError naming the fault."""
        try:
            pairs = tuple((w, r) for w, r in value)
            if any(isinstance(x, bool) or not isinstance(x, (int, float)) for pair in pairs for x in pair):
                raise TypeError("not numbers")
            pairs = tuple((float(w), float(r)) for w, r in pairs)
        except (TypeError, ValueError) as exc:
            raise errors.RecordError(
                f"board profile {self.source}: cap_spread must be [window_s, rel_sd] pairs, not {value!r}"
            ) from exc
        lengths = [w for w, _ in pairs]
        fine = all(
            _SPREAD_WINDOW_S[0] <= w <= _SPREAD_WINDOW_S[1] and _SPREAD_REL[0] <= r <= _SPREAD_REL[1]
            for w, r in pairs
        )
        if not fine or lengths != sorted(set(lengths)):
            raise errors.RecordError(
                f"board profile {self.source}: cap_spread = {value!r} is not (window_s in "
                f"[{_SPREAD_WINDOW_S[0]:g}, {_SPREAD_WINDOW_S[1]:g}], rel_sd in [0, {_SPREAD_REL[1]:g}]) "
                "pairs in rising window_s"
            )
        return pairs

    def cap_spread_rel(self, window_s: float) -> float | None:
        """The relative SD of a ``window_s`` window's per-call energy at the power cap (None: unknown).

        Between the lengths measured, linear in log length, from the envelope that never falls
        with a shorter window (at the cap the spread need not fall monotonically: a limiter that
        swings with a period P spreads windows of 1.5 P more than windows of P); below the
        shortest, the shortest's grown as the square root of the lengths' ratio (the spread of a
        mean of independent parts: wider than a swing's, which levels off); above the longest,
        the longest's (a spread falls with length).
        """
        if not self.cap_spread or not window_s > 0:
            return None
        lengths = [w for w, _ in self.cap_spread]
        envelope = [max(r for _, r in self.cap_spread[i:]) for i in range(len(lengths))]
        if window_s <= lengths[0]:
            return min(_SPREAD_REL[1], envelope[0] * math.sqrt(lengths[0] / window_s))
        if window_s >= lengths[-1]:
            return envelope[-1]
        i = next(k for k in range(1, len(lengths)) if window_s <= lengths[k])
        share = math.log(window_s / lengths[i - 1]) / math.log(lengths[i] / lengths[i - 1])
        return envelope[i - 1] + share * (envelope[i] - envelope[i - 1])

    def run_level_or(self, board_name: str) -> float:
        """:attr:`run_level_rel`, or where this profile has none the family's of ``board_name``."""
        if self.run_level_rel is not None:
            return self.run_level_rel
        return default_profile(board_name).run_level_rel or 0.0

    def to_dict(self) -> dict:
        """Plain dict for JSON."""
        return {**asdict(self), "cap_spread": [list(pair) for pair in self.cap_spread]}

    @classmethod
    def from_dict(cls, data: dict) -> BoardProfile:
        """Inverse of :meth:`to_dict`.

        Raises:
            RecordError: a field is missing or not a figure.

        """
        try:
            names = [f.name for f in fields(cls) if f.name not in OPTIONAL or f.name in data]
            return cls(**{name: data[name] for name in names})
        except (KeyError, TypeError) as exc:
            raise errors.RecordError(f"a board profile lacks {exc}") from exc

    def with_(self, **changes) -> BoardProfile:
        """A copy with some figures changed."""
        return replace(self, **changes)


# The H200 figures nvmeter 0.1 used as module constants, from results/probe-h200.json
# (H200 GPU-2e139fc3): counter period 100.0 ms median; longest gap 116 ms seen, 0.35 s
# also covers a late update and a slow read; polling artefact +2.8 W; the counter follows a
# load within 10-11 ms and samples after a burst fall to idle within ~60 ms; samples
# 20.0 ms apart; samples vs counter +0.07% idle, +0.04% load (0.1% bound); the buffer holds
# 2.36 s, read once a second. Records of score schema 1 were derived with these.
H200_V1 = BoardProfile(
    source="defaults:H200 (results/probe-h200.json)",
    counter_period_s=0.100,
    edge_timeout_s=0.35,
    polling_artefact_w=2.8,
    tail_s=0.06,
    sample_spacing_s=0.020,
    sample_lead_s=0.02,
    samples_vs_counter=0.001,
    sample_every_s=1.0,
    # (never used by version-1 records: their edges were polled before the work)
    power_lag_s=0.010,
    power_lag_err_s=0.003,
)


# Family defaults: wider than any board of the family that we measured, so an unprobed board's
# bound errs wide. Hopper (H200, H100): our H200s read a counter period of 100.0 ms (longest gap
# 116 ms), a polling artefact of +2.8 W, samples 20.0 ms apart (9.6-28.2 ms) agreeing with the
# counter to 0.07% (results/probe-h200.json, docs/facts.md). Ampere (A100): the public probe in
# docs/facts.md (counter 100.5 ms, 95-106 ms; ~23-30 W polled vs sparse). Any other board: wider still.
HOPPER = BoardProfile(
    source="defaults:Hopper (wider than results/probe-h200.json)",
    counter_period_s=0.12,
    edge_timeout_s=0.35,
    polling_artefact_w=5.0,
    tail_s=0.06,
    sample_spacing_s=0.03,
    sample_lead_s=0.02,
    samples_vs_counter=0.002,
    sample_every_s=1.0,
    # fitted on the fit kinds of one H200 (results/window-accuracy-v2/run1-a.json.gz, FP32 and bf16
    # matmuls): the lag that zeroes their warm 0.25 s and 0.5 s windows' median error was 5.4-14 ms
    # (median 7.5); the counter's own step delays, 10-11 ms (results/probe-h200.json), bound it above.
    # A board's step response widens the bound to reach its own counter's delay (nvmeter.probes.profile)
    power_lag_s=0.0075,
    power_lag_err_s=0.005,
    # The largest 95% limit (each profile's envelope) of the cap-spread probes of seven H100s,
    # raised by at least 30% and rounded up: 4.04% at 0.3 s, 2.43% at 0.5 s, 1.87% at 0.8-1.5 s,
    # 0.98% at 2 s (results/enclose/call4[6-9]-*-cap*probe*.json, call5[0-4]-*-cap*probe*.json).
    # A fifth had not been enough (a board's probe passed the largest of the boards before it by
    # up to 23%), nor had 30% over three boards: the seventh (call54-2268ad1-h100q) passed those
    # defaults at 1-1.5 s by 13% (1.87% against 1.65%), the fourth to sixth had stayed within 85%.
    # (At 0.5 s, the largest relative SD of measure() runs' 0.5 s blocks over four H100s and four
    # H200s, 2.39% in results/enclose/cap-spread.txt, "calls", had set 3.0% before.)
    cap_spread=((0.3, 0.053), (0.5, 0.032), (1.0, 0.025), (1.5, 0.025), (2.0, 0.013)),
    # 10 ms bursts at every place in the counter's period, on two H100s and an H200: none went
    # unseen, the lowest read 0.77 of their mean (bench/counter_coverage.py;
    # results/enclose/call38-*-coverage-*, call39-*-coverage-*, call40-*-unpolled-*)
    counter_coverage=1.0,
    # The largest distance of a whole run's per-call energy from its references' on any Hopper
    # board, rounded up to a whole percent: FP32 4096² measure() runs read +2.59% on an H100
    # (GPU-5dca4f99, call 79) and +2.4% on an H200 (GPU-0e2e6fe6, call 67), each run at a second
    # power level (results/enclose/call79-*-levels.txt, call67-*-levels.txt). The bound's other
    # parts (the sub-windows' interval, the idle's, the edges') come on top: those runs' bounds
    # held 1.6-2.0% without it.
    run_level_rel=0.03,
)
# An H200 takes Hopper's too. Its own defaults had been narrower (its limiter swings far less than
# an H100's on four boards: 1.02%, 0.46%, 0.44% at 0.5, 1, 2 s, raised by a fifth or more), until a
# fifth H200's cap-spread probe passed them by 61% at 0.3 s and 48% at 1.5 s (2.30% against 1.43%,
# 0.85% against 0.57%; results/enclose/call64-38a4472-h200k-cap-probe.json): as the H100s' had, a
# few boards' envelope did not hold the next board. Hopper's (set from seven H100 probes, and holding
# every H100 probed since) hold it at every length (at most 43%, at 0.3 s).
# no board of these families was measured at the cap: Hopper's spread, half as wide again
_WIDER_SPREAD = tuple((w, 1.5 * r) for w, r in HOPPER.cap_spread)
_WIDER_LEVEL = 1.5 * HOPPER.run_level_rel
# SC24 (Yang, Adamek, Armour; docs/facts.md): an A100's power sensor samples ~25 ms of each ~100 ms;
# no Ampere board was measured here, and a family none was measured on is held to that too
PARTIAL_COVERAGE = 0.25
AMPERE = HOPPER.with_(
    source="defaults:Ampere (wider than the public A100 probe, docs/facts.md)",
    polling_artefact_w=35.0,
    samples_vs_counter=0.005,
    cap_spread=_WIDER_SPREAD,
    counter_coverage=PARTIAL_COVERAGE,
    run_level_rel=_WIDER_LEVEL,
)
GENERIC = HOPPER.with_(
    source="defaults:any NVIDIA board (no board of its family measured)",
    counter_period_s=0.15,
    edge_timeout_s=0.5,
    polling_artefact_w=40.0,
    tail_s=0.1,
    sample_spacing_s=0.05,
    samples_vs_counter=0.01,
    # a board's full probe widens it to reach its counter's delay (nvmeter.probes.profile); a change
    # here would leave every probe file of such a board unverifiable (a review, 2026-12-07)
    power_lag_err_s=0.0075,
    cap_spread=_WIDER_SPREAD,
    counter_coverage=PARTIAL_COVERAGE,
    run_level_rel=_WIDER_LEVEL,
)
# first match wins: "GH200" before "H200", which its name holds too
_FAMILIES = (("GH200", HOPPER), ("H200", HOPPER), ("H100", HOPPER), ("A100", AMPERE))
KIND = "profile"


def default_profile(board_name: str) -> BoardProfile:
    """The defaults of the board's family, by its NVML name (any other board: ``GENERIC``)."""
    return next((p for key, p in _FAMILIES if key in board_name), GENERIC)


def cache_dir() -> Path:
    """Where ``nvmeter probe`` keeps each board's probe record: ``NVMETER_CACHE_DIR``, else the user cache."""
    if os.environ.get("NVMETER_CACHE_DIR"):
        return Path(os.environ["NVMETER_CACHE_DIR"])
    return files.user_cache_dir("profiles")


def _cache_path(uuid: str) -> Path:
    return cache_dir() / f"{uuid}.json"


def cache_path(board: BoardIdentity) -> Path | None:
    """The probe record the cache keeps for ``board`` (None: none kept; a simulated board's never is)."""
    path = _cache_path(board.uuid)
    return None if board.simulated or not path.is_file() else path


def profile_record(profile: BoardProfile, board: BoardIdentity) -> dict:
    """The JSON record of a board's profile (kind ``profile``)."""
    return {
        **records.header(KIND),
        "board": board.to_dict(),
        "profile": profile.to_dict(),
    }


def check_cache_writable(board: BoardIdentity) -> Path:
    """Fail early, before a probe runs, if the cache cannot take ``board``'s profile.

    Raises:
        UsageError: the cache folder cannot be made or written.
    """
    path = _cache_path(board.uuid)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise errors.UsageError(
            f"cannot keep the probe record in {path.parent} ({exc.strerror}): set NVMETER_CACHE_DIR to a "
            "folder, or pass --no-cache"
        ) from exc
    records.check_writable(path, record=False)  # the cache's own file: a damaged one is replaced
    return path


def store_probe(record: dict, board: BoardIdentity) -> Path:
    """Keep a probe record (kind ``probe``) in the user cache for ``board`` (atomic write); its path.

    The cache keeps the probes' raw series, not only the profile derived from them, so that a
    window checks the profile against them as ``nvmeter show`` checks a probe file: a profile kept
    alone was trusted as it stood, and one edited by hand (a power lag of 0.1 s) read 17,866 mJ a
    call for 22,000, marked reliable (an adversarial review, 2026-12-06).

    Raises:
        UsageError: the cache folder cannot be written.
    """
    path = check_cache_writable(board)
    records.write_json(path, record, own=True)
    return path


def load_profile(path: Path, board: BoardIdentity | None = None) -> BoardProfile:
    """A profile from a profile file (as it stands) or from the ``profile`` block of a probe file (verified).

    Args:
        path: A profile file (kind ``profile``) or a probe file.
        board: The board it must have been made on (None: any).

    Raises:
        RecordError: unreadable, of another kind or board, without a profile, or a probe file
            whose figures differ from its raw series (:func:`nvmeter.records.verify`).
    """
    data = records.read_any(Path(path), (KIND, "probe"))
    block = data.get("profile")
    derived = data.get("kind") == "probe" and block is None  # a block deleted: its probes give it
    if not (isinstance(block, dict) or derived) or not isinstance(data.get("board"), dict):
        raise errors.RecordError(
            f"{path} holds no board profile: probe the board again (`nvmeter probe --out probe.json`)"
        )
    uuid = (data.get("board") or {}).get("uuid")
    if not isinstance(uuid, str) or not uuid or not uuid.isprintable():
        raise errors.RecordError(f"{path}: damaged record: its board.uuid {uuid!r:.60} is not a board's UUID")
    if board is not None and uuid != board.uuid:
        raise board.made_elsewhere(path, uuid, "probe this board (`nvmeter probe --out probe.json`)")
    if derived:
        # as a kept record's is: one whose block was deleted had left its windows on the family's
        # defaults without a word (a breaker's trial, 2026-12-07)
        profile = records.load_verified("probe", Path(path), data, board=board).profile()
        return profile.with_(source=f"{path} ({profile.source})")
    if data.get("kind") == "probe":  # its profile was derived from its raw series: checked as show does
        records.verify(path, "probe")
    try:
        profile = BoardProfile.from_dict(block)
    except errors.RecordError as exc:  # name the file to mend or delete, not the source it claims
        raise errors.RecordError(f"{path}: {exc}") from exc
    if data.get("kind") == KIND:
        # a profile file keeps no probes to check it against: its own "probe ..." claim had been
        # shown as the figures' source, for one edited by hand too (an adversarial review)
        return profile.with_(source=f"{path} (a profile file, taken as it stands; it says: {profile.source})")
    return profile.with_(source=f"{path} ({profile.source})")


def resolve_profile(spec, board: BoardIdentity, idle=None) -> BoardProfile:
    """The profile a window uses: given, from a file, cached for this board, or the family's defaults.

    With no ``spec``, a probe file given as the window's ``idle`` (a path other than
    ``"measure"``) is this board's own characterisation too, and comes before the cache.

    Raises:
        UsageError: ``spec`` is not a profile or a path. RecordError: as :func:`load_profile`.
    """
    if spec is None and isinstance(idle, (str, Path)) and idle != "measure":
        # the idle's own reader names a bad file; one without a profile (before 0.2) still gives the idle
        with contextlib.suppress(errors.RecordError):
            return load_profile(Path(idle), board)
    if isinstance(spec, BoardProfile):
        return spec
    if isinstance(spec, (str, Path)):
        return load_profile(Path(spec), board)
    if spec is not None:
        raise errors.UsageError(
            f"profile must be a BoardProfile, a probe or profile file, or None, not {spec!r}"
        )
    cached = cached_profile(board)
    return cached if cached is not None else default_profile(board.name)


def cached_profile(board: BoardIdentity) -> BoardProfile | None:
    """The profile ``nvmeter probe`` keeps for ``board`` (None: none kept; a simulated board's never is).

    Raises:
        RecordError: as :func:`cached_report`.
    """
    kept = _cached(board)
    return None if kept is None else kept[1]


def cached_report(board: BoardIdentity):
    """The probe record ``nvmeter probe`` keeps for ``board``, as a verified ``ProbeReport`` (or None).

    Its probes are checked against their raw series, as ``nvmeter show`` checks a probe file. The
    profile stored in it is not compared: it was derived with the family's defaults of its day for
    what its probes did not measure, and a change of the defaults (the Hopper ones changed four
    times on the day they were set, this file's history) would refuse every record kept.

    Raises:
        RecordError: damaged, another board's, or a profile kept without its probes (nvmeter 0.3
            and earlier), which cannot be checked.
    """
    kept = _cached(board)
    return None if kept is None else kept[0]


def _cached(board: BoardIdentity) -> tuple | None:
    path = cache_path(board)
    if path is None:
        return None
    stat = path.stat()
    try:
        return _rebuilt(str(path), stat.st_size, stat.st_mtime_ns, board)
    except errors.NewerRecord as exc:  # a newer nvmeter's figures: kept, not replaced by this one's
        raise errors.NewerRecord(
            f"{exc} (the probe record nvmeter keeps for this board; or probe with --no-cache)"
        ) from exc
    except errors.RecordError as exc:
        # every window on the board raised "not JSON" about a file the user never named (a breaker)
        raise errors.RecordError(
            f"{exc} (the probe record nvmeter keeps for this board: run nvmeter probe again to replace it, "
            "or delete it)"
        ) from exc


@functools.lru_cache(maxsize=16)
def _rebuilt(path: str, size: int, mtime_ns: int, board: BoardIdentity) -> tuple:
    """(report, profile) of the probe record at ``path``: once a process for each version of the file."""
    del size, mtime_ns  # the cache's key: a file changed since is read again
    data = records.parse_json(Path(path), "an nvmeter probe record", "probe")
    if isinstance(data, dict) and data.get("kind") == KIND:
        raise errors.RecordError(
            f"{path} keeps a profile without the probes it came from (nvmeter 0.3 or earlier), which "
            "cannot be checked"
        )
    if isinstance(data, dict):
        data = {**data, "profile": None}  # derived again below, not compared
    report = records.load_verified("probe", Path(path), data, board=board)
    profile = report.profile()
    return report, profile.with_(source=f"{path} ({profile.source})")
