"""`BoardProfile`: the telemetry properties of one board that the meter's edges and bound use.

Every figure here is one that ``nvmeter probe`` measures. A profile names where it came
from (``source``): a family's defaults, or a probe file of that very board. The meter reads
these figures only from a profile, never from module constants, so a board that differs
from the one our defaults were measured on gets its own figures once it is probed.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import asdict, dataclass, fields, replace
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
}


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

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "source":
                if not isinstance(value, str):
                    raise errors.RecordError(f"a board profile's source must be text, not {value!r}")
                continue
            low, high = _LIMITS[f.name]
            if isinstance(value, bool) or not (isinstance(value, (int, float)) and low <= value <= high):
                raise errors.RecordError(
                    f"board profile {self.source}: {f.name} = {value!r} is not in [{low:g}, {high:g}]"
                )
            object.__setattr__(self, f.name, float(value))  # numpy scalars print and store as plain floats

    def to_dict(self) -> dict:
        """Plain dict for JSON."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> BoardProfile:
        """Inverse of :meth:`to_dict`.

        Raises:
            RecordError: a field is missing or not a figure.

        """
        try:
            return cls(**{f.name: data[f.name] for f in fields(cls)})
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
    # fitted on the fit kinds of one H200 (results/window-accuracy-v2/run1-a.json, FP32 and bf16
    # matmuls): the lag that zeroes their warm 0.25 s and 0.5 s windows' median error was 5.4-14 ms
    # (median 7.5); the counter's own step delays, 10-11 ms (results/probe-h200.json), bound it above
    power_lag_s=0.0075,
    power_lag_err_s=0.005,
)
AMPERE = HOPPER.with_(
    source="defaults:Ampere (wider than the public A100 probe, docs/facts.md)",
    polling_artefact_w=35.0,
    samples_vs_counter=0.005,
)
GENERIC = HOPPER.with_(
    source="defaults:any NVIDIA board (no board of its family measured)",
    counter_period_s=0.15,
    edge_timeout_s=0.5,
    polling_artefact_w=40.0,
    tail_s=0.1,
    sample_spacing_s=0.05,
    samples_vs_counter=0.01,
    power_lag_err_s=0.0075,
)
_FAMILIES = (("H200", HOPPER), ("H100", HOPPER), ("GH200", HOPPER), ("A100", AMPERE))
KIND = "profile"


def default_profile(board_name: str) -> BoardProfile:
    """The defaults of the board's family, by its NVML name (any other board: ``GENERIC``)."""
    return next((p for key, p in _FAMILIES if key in board_name), GENERIC)


def cache_dir() -> Path:
    """Where ``nvmeter probe`` keeps each board's profile: ``NVMETER_CACHE_DIR``, else the user cache."""
    if os.environ.get("NVMETER_CACHE_DIR"):
        return Path(os.environ["NVMETER_CACHE_DIR"])
    return files.user_cache_dir("profiles")


def _cache_path(uuid: str) -> Path:
    return cache_dir() / f"{uuid}.json"


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
            f"cannot keep the profile in {path.parent} ({exc.strerror}): set NVMETER_CACHE_DIR to a "
            "folder, or pass --no-cache"
        ) from exc
    records.check_writable(path)
    return path


def store_profile(profile: BoardProfile, board: BoardIdentity) -> Path:
    """Keep ``profile`` in the user cache for ``board`` (atomic write); returns the path.

    Raises:
        UsageError: the cache folder cannot be written.
    """
    path = check_cache_writable(board)
    records.write_json(path, profile_record(profile, board))
    return path


def load_profile(path: Path, board: BoardIdentity | None = None) -> BoardProfile:
    """A profile from a profile file or from the ``profile`` block of a probe file (verified).

    Raises:
        RecordError: unreadable, of another kind or board, without a profile, or a probe file
            whose figures differ from its raw series (:func:`nvmeter.records.verify`).
    """
    data = records.read_any(Path(path), (KIND, "probe"))
    block = data.get("profile")
    if not isinstance(block, dict) or not isinstance(data.get("board"), dict):
        raise errors.RecordError(
            f"{path} holds no board profile (a probe file from before nvmeter 0.2): pass "
            "nvmeter.load_report(path).profile() instead, or probe the board again"
        )
    uuid = (data.get("board") or {}).get("uuid")
    if board is not None and uuid != board.uuid:
        raise errors.RecordError(f"{path} was made on {uuid}, not on this board {board.uuid}")
    if data.get("kind") == "probe":  # its profile was derived from its raw series: checked as show does
        records.verify(path, "probe")
    profile = BoardProfile.from_dict(block)
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
    cached = _cache_path(board.uuid)
    if not board.simulated and cached.is_file():
        return load_profile(cached, board)
    return default_profile(board.name)
