"""Every kind of JSON record nvmeter writes, its versions, and how each earlier version is read.

A record carries ``kind`` and ``schema_version``. The version changes whenever a field is
added, removed, renamed or changes meaning. It is not the version of the error model
that derived a record's figures: that one is stored apart, with the figures
(:mod:`nvmeter.meter.errormodel`).

Reading a record (:func:`nvmeter.records.read_json`) upgrades it one version at a time
through the functions below, so every loader reads the current shape only and never
guesses a missing field. Each upgrade says what the older version lacked and what
stands in for it; fields an older version did not keep become None (not recorded). The
same history, one line a version: docs/formats.md (a test keeps the two in step).

To change a record's format: add a :class:`Version` at the end of its kind's list, with
the function that turns the previous version into it, and a line in docs/formats.md.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass

from nvmeter import errors

Upgrade = Callable[[dict], dict]


@dataclass(frozen=True)
class Version:
    """One version of a kind of record.

    Attributes:
        number: 1, 2, … in order.
        note: What changed, one line (docs/formats.md says the same).
        upgrade: Turns a record of the previous version into this one (it gets a private
            copy and may change it in place); None for version 1 only. It reads the
            previous version's fields strictly: a missing one is a damaged record.

    """

    number: int
    note: str
    upgrade: Upgrade | None = None


@dataclass(frozen=True)
class Format:
    """A kind of record and its versions.

    Attributes:
        kind: The record's ``kind``.
        versions: Its versions, 1 first.
        unlabelled: For kinds first written without ``kind``: says whether an unlabelled
            record is this kind's version 1.
        verifier: ``"module:function"`` that refuses a record of this kind whose stored figures
            differ from its raw readings (``function(path)`` raises RecordError), or None. Named,
            not imported: a wing below the kind's owner (the meter reading a probe file's idle)
            has the owner check it through :func:`nvmeter.records.verify` without importing it.

    """

    kind: str
    versions: tuple[Version, ...]
    unlabelled: Callable[[dict], bool] | None = None
    verifier: str | None = None

    def __post_init__(self) -> None:
        numbers = [v.number for v in self.versions]
        if numbers != list(range(1, len(numbers) + 1)):
            raise ValueError(f"{self.kind}: versions must be numbered 1, 2, …, not {numbers}")
        if any((v.upgrade is None) != (v.number == 1) for v in self.versions):
            raise ValueError(f"{self.kind}: every version after 1 needs an upgrade, and 1 none")

    @property
    def current(self) -> int:
        """The version this nvmeter writes."""
        return self.versions[-1].number

    def header(self) -> dict:
        """``kind`` and ``schema_version`` of a record written now."""
        return {"kind": self.kind, "schema_version": self.current}

    def upgrade(self, data: dict, where: str) -> dict:
        """``data`` (a record of this kind, any version) in the current version, as a new dict.

        Raises:
            RecordError: another kind, a version this nvmeter does not know (a newer one),
                or a record that lacks a field its version has.

        """
        if isinstance(data, dict) and "kind" not in data and self.unlabelled and self.unlabelled(data):
            data = {**data, "kind": self.kind, "schema_version": 1}
        if not isinstance(data, dict) or data.get("kind") != self.kind:
            raise errors.RecordError(f"{where}: not an nvmeter {self.kind} record ({found_kind(data)})")
        version = data.get("schema_version")
        known = [v.number for v in self.versions]
        # an int, not a bool or a float (5.0 == 5, but it is not a version nvmeter writes)
        if not isinstance(version, int) or isinstance(version, bool) or version not in known:
            newer = isinstance(version, int) and not isinstance(version, bool) and version > known[-1]
            raise (errors.NewerRecord if newer else errors.RecordError)(
                f"{where}: {self.kind} schema_version {version!r} is not one this nvmeter reads "
                f"(an integer: {', '.join(map(str, known))})"
                + ("; a newer nvmeter wrote it: upgrade nvmeter to read it" if newer else "")
            )
        data = copy.deepcopy(data)
        for step in self.versions[version:]:
            try:
                data = step.upgrade(data)
            except (KeyError, TypeError, AttributeError, ValueError, IndexError) as exc:
                raise errors.RecordError(
                    f"{where}: damaged {self.kind} record (schema_version {version}): a field its "
                    f"version has is missing or malformed ({_what(exc)}); edited, or cut short?"
                ) from exc
            data["schema_version"] = step.number
        return data


def _what(exc: Exception) -> str:
    """An upgrade's failure in a user's words: the field it missed, else the error itself."""
    if isinstance(exc, KeyError):
        return f"no field {exc.args[0]!r}" if exc.args else "a missing field"
    return f"{type(exc).__name__}: {exc}"


def found_kind(data) -> str:
    """What a record that is not of the kind asked for holds instead, for its one-line error."""
    if not isinstance(data, dict):
        names = {type(None): "null", bool: "true or false", str: "string", list: "array"}
        return f"a JSON {names.get(type(data), 'number')}, not an object"
    if "kind" not in data:
        return "it has no `kind` field"
    # where it is another kind nvmeter writes: the one command that reads every kind (a new user's trial)
    shown = isinstance(data["kind"], str) and data["kind"] in SHOWN_KINDS
    return f"kind {data['kind']!r}" + ("; `nvmeter show` reads it" if shown else "")


# -- shared pieces ---------------------------------------------------------------------------
def _provenance(
    *,
    host=None,
    platform=None,
    python=None,
    argv=None,
    nvmeter=None,
    nvmeter_commit=None,
    packages=None,
    board=None,
) -> dict:
    """A provenance block (nvmeter.provenance) from what an older version kept; the rest None.

    ``packages`` holds only the distributions the older version named.
    """
    return {
        "host": host,
        "platform": platform,
        "python": python,
        "argv": argv,
        "nvmeter": nvmeter,
        "nvmeter_commit": nvmeter_commit,
        "packages": dict(packages or {}),
        "board": board,
    }


def unchanged(data: dict) -> dict:
    """An upgrade for a version whose own fields did not change (a nested record upgrades itself)."""
    return data


# -- probe: `nvmeter probe` (nvmeter.probes.report) ----------------------------------------------
def _probe_v2(d: dict) -> dict:
    """v1's ``host`` (nvmeter, python, platform; torch and nvidia-ml-py where found) -> provenance."""
    host = d.pop("host")
    d["provenance"] = _provenance(
        platform=host["platform"],
        python=host["python"],
        nvmeter=host["nvmeter"],
        packages={k: host[k] for k in ("torch", "nvidia-ml-py") if k in host},  # v1 kept them if found
    )
    return d


def _probe_v3(d: dict) -> dict:
    """v2 kept no profile: it is derived (nvmeter.probes.profile) from the raw series."""
    d["profile"] = None
    return d


def _probe_v4(d: dict) -> dict:
    """v3's idle probe waited the same ``settle_s`` before each of its spans: that wait, per level."""
    idle = d["probes"].get("idle")
    if idle is not None:
        raw = idle["raw"]
        raw["settle_s"] = {level: raw["settle_s"] for level in raw["spans"]}
    return d


def _probe_v5(d: dict) -> dict:
    """v4's step response was derived dropping the intervals that a slow read blurs: derivation 1."""
    step = d["probes"].get("step")
    if step is not None:
        step["raw"]["derivation"] = 1
    return d


def _probe_v6(d: dict) -> dict:
    """v5's profile had no cap spread: the family's defaults, which its profile derives to today."""
    from nvmeter.boards.profile import default_profile

    if isinstance(d.get("profile"), dict) and isinstance(d.get("board"), dict):
        spread = default_profile(str(d["board"].get("name", ""))).cap_spread
        d["profile"]["cap_spread"] = [list(pair) for pair in spread]
    return d


def _probe_v7(d: dict) -> dict:
    """v6's cap-spread probe made one run: its counter and job become the one-element lists of v7."""
    cap = d["probes"].get("cap_spread")
    if cap is not None:
        raw = cap["raw"]
        raw["counters"], raw["runs"] = [raw.pop("counter")], [raw.pop("run")]
        cap["derived"]["runs"] = 1
    return d


def _probe_v10(d: dict) -> dict:
    """v9's run-level figure took the range over all runs: derivation 1, derived as it was."""
    levels = d["probes"].get("run_levels")
    if levels is not None:
        levels["raw"]["derivation"] = 1
    return d


def _probe_v11(d: dict) -> dict:
    """v10's cadence took the longest gap alone: derivation 1. Its step response keeps its own (1 or 2)."""
    cadence = d["probes"].get("cadence")
    if cadence is not None:
        cadence["raw"]["derivation"] = 1
    return d


def _probe_v12(d: dict) -> dict:
    """v11 had no coverage probe: its records read as they were."""
    return d


def _family_default(name: str, before: str):
    """An upgrade that fills ``profile.<name>`` with the record's board family's default, as it derives today.

    ``before``: the versions that had no such figure (the upgrade's docstring).
    """

    def upgrade(d: dict) -> dict:
        from nvmeter.boards.profile import default_profile

        if isinstance(d.get("profile"), dict) and isinstance(d.get("board"), dict):
            family = default_profile(str(d["board"].get("name", "")))
            d["profile"].setdefault(name, getattr(family, name))
        return d

    upgrade.__doc__ = f"{before} had no {name}: their board family's default, as they derive today."
    return upgrade


# probe v7 and profile v2 had no counter coverage (error model 11); probe v8 and profile v3 no run level (13)
_family_coverage = _family_default("counter_coverage", "Probe v7 and profile v2")
_family_run_level = _family_default("run_level_rel", "Probe v8 and profile v3")


PROBE = Format(
    "probe",
    (
        Version(1, "board identity, host versions, every probe's raw series and derived figures"),
        Version(2, "`host` replaced by `provenance`", _probe_v2),
        Version(
            3,
            "`profile`: the board's BoardProfile derived from the probes (null when read from v2)",
            _probe_v3,
        ),
        Version(
            4,
            "idle `settle_s`: the wait before each span, per level (v3 waited the same before each); "
            "the probes share spans (docs/probe.md)",
            _probe_v4,
        ),
        Version(
            5,
            "step `raw.derivation`: 2 measures across a counter step that a slow read blurs instead of "
            "dropping its intervals (earlier records: 1, derived as they were)",
            _probe_v5,
        ),
        Version(
            6,
            "the cap-spread probe (`probes.cap_spread`, opt-in: `nvmeter probe --cap-spread`); "
            "`profile.cap_spread`: (window s, 95% upper limit of the relative SD) pairs, the family's "
            "defaults when upgraded",
            _probe_v6,
        ),
        Version(
            7,
            "the cap-spread probe makes several runs, each after a pause (`raw.counters`, `raw.runs`, "
            "`derived.runs`); a v6 record's one run becomes one-element lists",
            _probe_v7,
        ),
        Version(
            8,
            "`profile.counter_coverage`: the share of each counter period the counter senses (error "
            "model 11); the family's default when upgraded",
            _family_coverage,
        ),
        Version(
            9,
            "the run-level probe (`probes.run_levels`, opt-in: `nvmeter probe --run-levels`); "
            "`profile.run_level_rel`: how far one run's per-call energy may sit from the same calls' "
            "other runs (error model 13); the family's default when upgraded",
            _family_run_level,
        ),
        Version(
            10,
            "run levels `raw.derivation`: 2 takes the board's warming out of the runs' range where "
            "they span over 2 °C (`derived.warming_mj_per_c`, the Theil-Sen slope of figure on "
            "temperature), each run's temperature in `derived.run_temperature_c` (earlier records: 1, "
            "the range of the runs as they are, derived as they were)",
            _probe_v10,
        ),
        Version(
            11,
            "step `raw.derivation`: 3 has the profile's power-lag bound reach the counter's delays after "
            "a load change where they reach further than the family's (earlier records: 1 or 2, their "
            "profile's bound the family's, as made); cadence `raw.derivation`: 2 takes the period from "
            "the longest gap or still stretch, the longest a profile holds where no phase saw two steps, "
            "and an edge wait of three periods (earlier records: 1, as made)",
            _probe_v11,
        ),
        Version(
            12,
            "the coverage probe (`probes.coverage`, opt-in: `nvmeter probe --coverage`): bursts at phases "
            "over the counter's period; `profile.counter_coverage` from it where under the family's",
            _probe_v12,
        ),
    ),
    verifier="nvmeter.probes.report:load_report",
)


# -- score: one run of `nvmeter score` (nvmeter.score.record) ------------------------------------
def _score_v2(d: dict) -> dict:
    """v1's ``host``, ``argv`` and ``software`` -> provenance; ``rederived`` always present."""
    software = d.pop("software")
    d["provenance"] = _provenance(
        host=d.pop("host"),
        argv=d.pop("argv"),
        python=software["python"],
        nvmeter=software["nvmeter"],
        nvmeter_commit=software["nvmeter_commit"],
        packages={
            "torch": software["torch"],
            "nvidia-ml-py": software["nvidia_ml_py"],
            "numpy": software["numpy"],
        },
    )
    # v1 had it only on records bench/rederive_score.py rewrote
    d["rederived"] = d.pop("rederived") if "rederived" in d else []
    return d


def _score_v4(d: dict) -> dict:
    d["target"] = {**d["target"], "sources": None}
    return d


def _score_v5(d: dict) -> dict:
    """v4's sources were hashed with tokenize's type numbers (nvmeter.workloads.versions scheme 1)."""
    d["target"] = {**d["target"], "sources_scheme": None if d["target"]["sources"] is None else 1}
    return d


# The energy windows inside a score record are Measurement dicts (nvmeter.meter.measurement), each
# with its own schema_version, which Measurement.from_dict reads in every earlier version: a change
# there bumps this kind only where the record around the windows changes too (v3 said the windows
# became version 2; Measurement versions 3-7 left this kind as it was, as they did run, job and
# pytest-energy records).
SCORE = Format(
    "score",
    (
        Version(
            1,
            "target, board, config, draw plan, timed calls, energy readings (Measurement dicts), "
            "error, derived figures; host, argv, software",
        ),
        Version(
            2,
            "`host`, `argv`, `software` replaced by `provenance`; `rederived` (notes of re-derivations) "
            "always present",
            _score_v2,
        ),
        Version(
            3,
            "energy windows are Measurement dicts of their version 2 (board profile, error model, sub-window "
            "edges, board states; Measurement.from_dict reads both)",
            unchanged,
        ),
        Version(
            4,
            "target.sources: sha256 of the code (comments, docstrings and layout aside) of the method's file "
            "and of every nvmeter.workloads module it imports (null when upgraded: not recorded before)",
            _score_v4,
        ),
        Version(
            5,
            "target.sources_scheme: how target.sources was hashed (nvmeter.workloads.versions.SCHEMES): 2, "
            "the same on every Python, from v5; 1 (tokenize's type numbers, which differ between Python "
            "3.11, 3.12 and 3.13) for v4 records",
            _score_v5,
        ),
    ),
)


# -- workloads: python -m nvmeter.workloads.evaluate ---------------------------------------------
_V1_IDENTITY = (
    "name",
    "uuid",
    "pci_bus_id",
    "driver",
    "vbios",
    "power_limit_w",
    "memory_total_mib",
    "simulated",
)
# v1 wrote these per method only when they had a value
_V1_OPTIONAL = (
    "verdict",
    "mnist_accuracy",
    "holdout_accuracy",
    "ms_median",
    "ms_min",
    "ms_max",
    "kernels_per_call",
    "kernels_per_step",
)


def _workloads_v2(d: dict) -> dict:
    """v1's torch + NVML ``board`` split into ``board`` (identity) and ``device``; provenance; all keys."""
    software = d.pop("software")
    old = d.pop("board")
    d["provenance"] = _provenance(
        host=d.pop("host"),
        argv=d.pop("argv"),
        python=software["python"],
        nvmeter=software["nvmeter"],
        packages={"torch": software["torch"], "numpy": software["numpy"], "triton": software["triton"]},
    )
    dry_run = "dry_run" in old  # v1: {"name": "cpu", "uuid": None, "dry_run": True} on the CPU
    d["device"] = {
        "type": "cpu" if dry_run else "cuda",
        "index": None if dry_run else old["cuda_index"],
        "name": old["name"],
        "memory_mib": None if dry_run else old["memory_mib"],
        "cuda": software["cuda"],
        "cudnn": software["cudnn"],
    }
    if dry_run:
        d["board"], d["board_error"] = None, "dry run on the CPU"
    elif "nvml_error" in old:  # v1: NVML failed, only torch's uuid was kept
        d["board"], d["board_error"] = None, old["nvml_error"]
    else:
        d["board"], d["board_error"] = {k: old[k] for k in _V1_IDENTITY}, None
    for result in d["methods"].values():
        for key in _V1_OPTIONAL:
            result.setdefault(key, None)
    return d


def _workloads_v3(d: dict) -> dict:
    """Each method names its board (v2 ran every method on the record's one board); no sources."""
    uuid = d["board"]["uuid"] if d["board"] else None
    for result in d["methods"].values():
        result["board_uuid"] = uuid
    d["resumed_from"] = []
    return d


def _workloads_v4(d: dict) -> dict:
    d["methods"] = {name: {**r, "sources": None} for name, r in d["methods"].items()}
    d["resumed_from"] = [
        {**src, "nvmeter_commit": None, "unversioned": list(src.get("methods", []))}
        for src in d.get("resumed_from") or []
    ]
    return d


def _workloads_v5(d: dict) -> dict:
    """v4's sources were hashed with tokenize's type numbers (nvmeter.workloads.versions scheme 1)."""
    d["methods"] = {
        name: {**r, "sources_scheme": None if r["sources"] is None else 1} for name, r in d["methods"].items()
    }
    return d


WORKLOADS = Format(
    "workloads",
    (
        Version(1, "timed calls per method on one GPU, judged; host, argv, software, board (torch + NVML)"),
        Version(
            2,
            "`provenance`; `board` is the NVML identity (or null: `board_error` says why), `device` "
            "torch's view; every method result has all its keys (null where not measured)",
            _workloads_v2,
        ),
        Version(
            3,
            "every method result names its board (`board_uuid`); `resumed_from` lists the records "
            "(file, creation time, board, methods) whose finished methods a resumed or merged run kept",
            _workloads_v3,
        ),
        Version(
            4,
            "every method result carries `sources`, its version (sha256 of its code and of the workloads "
            "modules it imports; null when upgraded); `resumed_from` entries add the record's commit and "
            "the kept methods of unknown version",
            _workloads_v4,
        ),
        Version(
            5,
            "every method result carries `sources_scheme`, how its `sources` were hashed: 2 from v5, 1 "
            "for v4 records (null where `sources` is null)",
            _workloads_v5,
        ),
    ),
)


# -- window-accuracy: bench/window_accuracy.py run -----------------------------------------------
def _window_accuracy_v2(d: dict) -> dict:
    """Provenance (v1 kept none); ``warmup_s`` present on the record and on every window trial.

    v1 files from before warm-ups existed (results/window-accuracy-h200.json, run 1) have no
    ``warmup_s``: every trial there started straight from idle, i.e. 0 s.
    """
    d["provenance"] = _provenance()
    if "warmup_s" not in d:
        d["warmup_s"] = 0.0
    for trial in d["trials"]:
        if "warmup_s" not in trial:
            trial["warmup_s"] = 0.0
    return d


WINDOW_ACCURACY = Format(
    "window-accuracy",
    (
        Version(1, "idle spans, 60 s references, window trials (nvmeter and Zeus), single calls, overhead"),
        Version(
            2, "`provenance`; `warmup_s` always present (0 where v1 had none: run 1)", _window_accuracy_v2
        ),
    ),
)


def _window_summary_v2(d: dict) -> dict:
    """Labelled; ``source`` (the record analysed) and provenance, which v1 did not keep."""
    d["source"] = None
    d["provenance"] = _provenance()
    return d


WINDOW_ACCURACY_SUMMARY = Format(
    "window-accuracy-summary",
    (
        Version(
            1, "unlabelled (no kind): per reader and window, error against the references; singles; overhead"
        ),
        Version(
            2, "`kind`, `schema_version`, `source` (the record analysed) and `provenance`", _window_summary_v2
        ),
    ),
    unlabelled=lambda d: "schema_version" not in d and {"reference_mj", "windows", "singles"} <= set(d),
)


# -- ladder-h200: bench/ladder_h200.py -----------------------------------------------------------
def _ladder_v2(d: dict) -> dict:
    """Labelled; v1's ``torch`` and ``triton`` versions -> provenance."""
    d["provenance"] = _provenance(packages={"torch": d.pop("torch"), "triton": d.pop("triton")})
    return d


LADDER_H200 = Format(
    "ladder-h200",
    (
        Version(1, "no kind; torch, triton, gpu, and the parts (kernels, timing, profile, accuracy)"),
        Version(2, "`kind`; `torch` and `triton` replaced by `provenance`", _ladder_v2),
    ),
    unlabelled=lambda d: d.get("schema_version") == 1 and "parts" in d,
)


# -- ladder-step: bench/ladder_step.py ------------------------------------------------------------
LADDER_STEP = Format(
    "ladder-step",
    (
        Version(
            1,
            "the fast kernels' launch config and the parts (check, step, profile, layers, sweep), each saved "
            "as it goes",
        ),
    ),
)


# -- ladder-sm90: bench/ladder_sm90.py ------------------------------------------------------------
def _ladder_sm90_v2(d: dict) -> dict:
    d["kernels"] = {
        k: {**row, "spill_store_bytes": None, "spill_load_bytes": None} for k, row in d["kernels"].items()
    }
    return d


LADDER_SM90 = Format(
    "ladder-sm90",
    (
        Version(
            1,
            "per Ladder kernel compiled for sm_90 without a GPU: registers, stack, local (spills), shared, "
            "warps, grid, SASS opcode counts",
        ),
        Version(
            2,
            "spill_store_bytes and spill_load_bytes from ptxas -v (spills show in the stack, not in local; "
            "null when upgraded)",
            _ladder_sm90_v2,
        ),
    ),
)


# -- graph-mlp-step: bench/graph_mlp_step.py ------------------------------------------------------
GRAPH_MLP_STEP = Format(
    "graph-mlp-step",
    (Version(1, "per steps_per_graph variant of the graph MLP: host-timed calls and a kernel profile"),),
)


# -- profile: a board's BoardProfile in the user cache (nvmeter.boards.profile) --------------------
PROFILE = Format(
    "profile",
    (
        Version(1, "board identity and its BoardProfile, written by nvmeter probe"),
        Version(
            2,
            "`profile.cap_spread`: (window s, 95% upper limit of the relative SD) pairs from the "
            "cap-spread probe; read as empty (not known: the family's defaults serve) from v1",
            unchanged,
        ),
        Version(
            3,
            "`profile.counter_coverage` (error model 11); the family's default when upgraded",
            _family_coverage,
        ),
        Version(
            4,
            "`profile.run_level_rel` (error model 13); the family's default when upgraded",
            _family_run_level,
        ),
    ),
)


# -- job: one window over several boards and ranks (nvmeter.meter.jobmeasurement) -------------------
JOB = Format(
    "job",
    (
        Version(
            1,
            "every board's Measurement (in its own format), the ranks and which boards they shared, the host",
        ),
    ),
)


# -- run: `nvmeter run -- COMMAND` (nvmeter.command) ------------------------------------------------
def _run_v2(d: dict) -> dict:
    """v1 did not look for processes the command left running: none recorded."""
    d["left_running"] = []
    return d


def _run_v3(d: dict) -> dict:
    """v2's ``host`` (nvmeter, python, platform) -> provenance."""
    host = d.pop("host")
    d["provenance"] = _provenance(platform=host["platform"], python=host["python"], nvmeter=host["nvmeter"])
    return d


RUN = Format(
    "run",
    (
        Version(
            1,
            "the command, its exit and signals, and one Measurement (in its own format) per board"
            " around its life",
        ),
        Version(
            2,
            "`left_running`: processes of the command's session still running when it exited (their draw "
            "after it is not in the window; empty when upgraded)",
            _run_v2,
        ),
        Version(3, "`host` replaced by `provenance`", _run_v3),
    ),
)


# -- pytest-energy: the pytest plugin's --energy-json (nvmeter.budgets) -------------------------------
def _pytest_energy_v2(d: dict) -> dict:
    """v1 did not say how the session ended: its status is unknown (null)."""
    d["session_status"] = None
    return d


def _pytest_energy_v3(d: dict) -> dict:
    """v2 kept no provenance."""
    d["provenance"] = _provenance()
    return d


PYTEST_ENERGY = Format(
    "pytest-energy",
    (
        Version(1, "each metered test: its budget, verdict and windows"),
        Version(
            2,
            "`session_status`: pytest's exit status (2: interrupted, the windows are those metered "
            "before); null when upgraded",
            _pytest_energy_v2,
        ),
        Version(3, "`provenance` (null fields when upgraded)", _pytest_energy_v3),
    ),
)


# -- window: one Measurement as a file (Measurement.save) ------------------------------------------
WINDOW = Format(
    "window",
    (Version(1, "one window's Measurement (its own schema_version, 7 when written) and provenance"),),
    verifier="nvmeter.meter.windowrecord:load",
)


# -- score-summary: `nvmeter summarize --format json` ----------------------------------------------
def _score_summary_v3(d: dict) -> dict:
    """v2 kept the error model only inside each run's figures; its tables were as recorded."""
    for method in d["methods"]:
        method["models"] = None
    return {**d, "error_model": "recorded"}


def _score_summary_v2(d: dict) -> dict:
    """v1 did not keep the runs' range or whether they disagree: not known (null)."""
    for method in d["methods"]:
        method["mj_per_call_range"] = method["runs_disagree"] = None
    return d


SCORE_SUMMARY = Format(
    "score-summary",
    (
        Version(1, "per method (medians over passing runs) and every run's derived figures; provenance"),
        Version(
            2,
            "`methods[].mj_per_call_range`: the lowest and highest metered run's mJ per call above idle "
            "(null without a metered run, and when upgraded); `methods[].runs_disagree`: two runs differ "
            "beyond their bounds (null under two metered runs, and when upgraded)",
            _score_summary_v2,
        ),
        Version(
            3,
            "`error_model`: \"recorded\" (each run's bound under the model it names) or the model's version "
            "every run was re-read under (`nvmeter summarize --model`); `methods[].models`: the models of "
            "its metered runs (null when upgraded)",
            _score_summary_v3,
        ),
    ),
)


# -- h200-band, h200-band-check: bench/h200_band.py ------------------------------------------------
H200_BAND = Format(
    "h200-band",
    (
        Version(
            1,
            "the rule, every H200 constant-operand reading (board, file, date, J/TFLOP, TFLOP/s), those left "
            "out and why, per-board medians, their spread, the band (null below the rule's board count)",
        ),
    ),
)

H200_BAND_CHECK = Format(
    "h200-band-check",
    (
        Version(
            1,
            "the derivation and its band, every reading checked, each independent board's median inside or "
            "not, the boards refused as used for the derivation",
        ),
    ),
)


FORMATS: dict[str, Format] = {
    f.kind: f
    for f in (
        PROBE,
        SCORE,
        WORKLOADS,
        WINDOW_ACCURACY,
        WINDOW_ACCURACY_SUMMARY,
        LADDER_H200,
        LADDER_STEP,
        LADDER_SM90,
        GRAPH_MLP_STEP,
        SCORE_SUMMARY,
        PROFILE,
        JOB,
        WINDOW,
        RUN,
        PYTEST_ENERGY,
        H200_BAND,
        H200_BAND_CHECK,
    )
}
CURRENT: dict[str, int] = {kind: f.current for kind, f in FORMATS.items()}
# The kinds `nvmeter show` reads: its own dispatch, and other readers' pointer to it.
SHOWN_KINDS = ("probe", "run", "pytest-energy", "window", "job")


def _format(kind: str) -> Format:
    """The format of ``kind``.

    Raises:
        UsageError: no record has that kind (a caller's ``records.read_json(path, "measurement")``
            was a bare KeyError).
    """
    if kind not in FORMATS:
        raise errors.UsageError(
            f"no nvmeter record is of kind {kind!r} (kinds: {', '.join(sorted(FORMATS))})"
        )
    return FORMATS[kind]


def header(kind: str) -> dict:
    """``{"kind": kind, "schema_version": its current version}`` for a record written now."""
    return _format(kind).header()


def upgrade(data: dict, kind: str, where: str = "record") -> dict:
    """A record of ``kind``, any known version, in the current one (see :meth:`Format.upgrade`)."""
    return _format(kind).upgrade(data, where)
