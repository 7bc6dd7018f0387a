"""Run the plan on one board: for each kind of work, idle spans, references and trials.

One process per board (``CUDA_VISIBLE_DEVICES`` picks it). For each kind, in order:

1. its buffers and a few timed calls (GPU kinds calibrate their counts here);
2. a quiescent idle span (``idle_s``, context open) unless a resumed record has one;
3. the plan (:mod:`accuracy.plan`) sized to the kind's share of the budget;
4. per block: a reference (``ref_s`` of calls after ``lead_s`` of them, one
   EnergyWindow), then the block's trials; a closing reference after the last;
5. a second idle span. The analysis takes the trials' idle from both spans.

Every window records its calls' ms, the gap before entry (previous call's end to
entry), nvmeter's own time at entry and at exit, the board state before and after
(``board.state()``) and the Measurement's raw dict. The record is saved at every point
where the work pauses anyway (before a pause, measure(), an idle span, a reference whose
lead is broken) and at each kind's end, so a cut call keeps all but the warm stream in
flight; SIGTERM (``timeout``) saves before exiting. A re-run with the same ``--out``
resumes: finished kinds are skipped, a cut kind continues with a fresh reference.
"""

from __future__ import annotations

import inspect
import itertools
import math
import os
import platform
import signal
import statistics
import sys
import time
import traceback
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from types import SimpleNamespace

from accuracy import kinds as kinds_mod
from accuracy import plan as plan_mod
from accuracy.store import Store, compact
from accuracy.stream import LEAD_S, MAX_GAP_S, CallStream

# measure()'s sub-window in the bench, s (its own default: 0.5 s)
MEASURE_SUBWINDOW_S = 0.5


@dataclass(frozen=True)
class Config:
    """A run's settings.

    Attributes:
        kinds: Kinds of work, in order.
        budget_s: Wall time for all kinds together, s (each kind gets its share; time a
            kind leaves passes on to the next).
        block_s: Trials between two references, s (estimated).
        ref_s: A reference window, s (issue 10: >= 10 s).
        idle_s: Each quiescent idle span, s (issue 10: 2 s).
        lead_s: Calls without a gap before a warm trial or a reference, s.
        target_rel_err: measure()'s target.
        measure_max_window_s: measure()'s longest window, s.
        measure_warmup_s: measure()'s warm-up, s (None: its own, ``WARMUP_S``).
        measure_min_windows: measure()'s fewest sub-windows (None: its own, 3): more hold a
            run for longer whatever its target.
        seed: Seeds the plan's pauses and order.
        zeus: Interleave ZeusMonitor windows (when the import works).
        verbose: Log every trial.
        only: Trial types to run (plan.TYPES), or None for all.
        measure_runs: measure() trials a kind, or None for the plan's own.
        warm_s: Warm window lengths to run (plan.WARM_S), or None for all.
        exit: The trials' ``EnergyWindow(exit=...)``: ``"wait"`` (the exit idles the board for
            its end edge) or ``"return"`` (the end edge is found in the calls that follow);
            references always wait.
        enclose: Each block's warm stream runs inside its reference (one unbroken run of calls:
            the reference's edges around the trials), and each block's single calls get a
            reference of their own: isolated single calls with the same pauses, in one window.
        step_log: Every other warm trial logs the counter's steps inside its window, polled
            sparsely (:mod:`accuracy.steplog`; a diagnostic for the next error model).
        single_runs: Single-call trials a kind, or None for the plan's own.
        singles: How the single calls' windows differ from the meter's defaults
            (:class:`accuracy.plan.Singles`: delays, dither, tails).
        iso_idle: Each isolated reference gets quiescent idle spans of its own, right before
            and after it (the analysis reads it and its block's single calls with them).
    """

    kinds: tuple[str, ...] = kinds_mod.FIT_KINDS
    budget_s: float = 420.0
    block_s: float = 45.0
    ref_s: float = 10.0
    idle_s: float = 2.0
    lead_s: float = LEAD_S
    target_rel_err: float = 0.01
    measure_max_window_s: float = 4.0
    measure_warmup_s: float | None = None
    measure_min_windows: int | None = None
    seed: int = 20261201
    zeus: bool = True
    verbose: bool = True
    only: tuple[str, ...] | None = None
    measure_runs: int | None = None
    warm_s: tuple[float, ...] | None = None
    exit: str = "wait"
    enclose: bool = False
    step_log: bool = False
    single_runs: int | None = None
    singles: plan_mod.Singles = field(default_factory=plan_mod.Singles)
    iso_idle: bool = False


# Calls inside an enclosing reference before its first trial and after its last, s: its start
# edge is found in the first (a counter period, ~0.1 s), and its end is not the last trial's.
ENCLOSE_PAD_S = 0.5
# Least time a kind is started with, s: its idle spans, two references and a few trials.
MIN_KIND_S = 40.0
# A board-state read longer than this would eat into a warm stream's 10 ms gap budget.
SLOW_STATE_S = 0.002
# SM-clock samples kept around a trial's window, s on each side; none for windows longer than
# the longest trial's (references: the ~2.4 s buffer holds only their end).
CLOCK_MARGIN_S = 0.1
CLOCK_MAX_WINDOW_S = max(plan_mod.WARM_S) + 0.5
# Windows of work whose SM-clock buffer came back empty before it stops being read (H200,
# driver 580.159.04: the read succeeds and the buffer stays empty; results/enclose/call7-*).
CLOCK_EMPTY_READS = 3


class _Stop(Exception):
    """SIGTERM arrived: save and leave."""


def _log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def read_state(board) -> dict:
    """The board's state now (``board.state()``; {} on a board without it), or the error that read raised.

    Every board nvmeter makes has ``state()`` (NVML's reads stay in nvmeter.boards.nvml); an
    earlier fallback here read NVML itself, through the board's private handle.
    """
    fn = getattr(board, "state", None)
    if not callable(fn):
        return {}
    try:
        s = fn()
        return s.to_dict() if hasattr(s, "to_dict") else dict(s)
    except Exception as exc:
        return {"error": repr(exc)}


def _zeus(enabled: bool, simulate: bool = False):
    """(ZeusMonitor on CUDA device 0, version) or (None, why not)."""
    if simulate:
        return None, "absent: ZeusMonitor reads a real GPU, not the simulated board"
    if not enabled:
        return None, "absent: not asked for"
    try:
        import zeus
        from zeus.monitor import ZeusMonitor

        return ZeusMonitor(gpu_indices=[0], cpu_indices=[]), zeus.__version__
    except Exception as exc:
        return None, f"absent: {exc!r}"


def measure_s_guess(max_window_s: float, warmup_s: float | None = None) -> float:
    """One measure() trial before any has run, s: its warm-up and its longest window.

    The bench asks 1%, which no H200 run reached before ``measure_max_window_s``: 68 of 68
    ran to the 4 s, 6.6-6.9 s each with the warm-up (results/enclose/call12-*, call13-*),
    where the former guess (4.5 s: a 2.5 s warm-up and half the window) left 5-8 of 20 out.
    """
    from nvmeter.meter.adaptive import WARMUP_S

    return (WARMUP_S if warmup_s is None else warmup_s) + max_window_s + 0.3


def run(out: Path, config: Config, *, simulate: bool = False, board=None) -> Store:
    """Run ``config`` on board 0 (or ``board``), recording into ``out``.

    Args:
        out: The record (resumed when it exists for this board).
        config: The run's settings.
        simulate: Use the simulated board and the kinds' simulated twins.
        board: A board to use (tests pass a SimulatedBoard; implies the twins).

    Returns:
        The store, saved.

    Raises:
        RecordMismatch: ``out`` is another board's or another record's.
    """
    if board is None:
        if simulate:
            from nvmeter.boards.simulated import FIRST_UUID, SimConfig, SimulatedBoard

            # the simulated run checks the plumbing: a thermally steady board keeps every
            # trial's reference within ±1 °C; one UUID, so that a resumed run finds its board
            board = SimulatedBoard(SimConfig(seed=config.seed % 2**32, c_per_w=0.0, uuid=FIRST_UUID))
        else:
            import torch

            torch.cuda.init()
            from nvmeter import open_board

            board = open_board(0)
    simulate = simulate or getattr(board.identity(), "simulated", False)
    if simulate and hasattr(board, "set_context"):
        board.set_context(True, os.getpid())
    monitor, zeus_version = _zeus(config.zeus, simulate)
    info = {
        "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "config": asdict(config),
        "zeus": zeus_version,
        "host": platform.node(),
        "python": sys.version.split()[0],
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "nvmeter_commit": os.environ.get("NVMETER_COMMIT"),
    }
    store = Store.open(out, board.identity().to_dict(), info)
    store.save()
    _log(
        f"board {board.identity().short}; kinds {', '.join(config.kinds)}; "
        f"budget {config.budget_s:.0f} s; zeus {zeus_version}"
    )

    def on_term(signum, frame):
        raise _Stop(f"signal {signum}")

    try:
        previous = signal.signal(signal.SIGTERM, on_term)
    except ValueError:  # not the main thread: no handler (the record is still saved as it goes)
        previous = None
    clock = board.clock
    start = clock.now()
    try:
        for i, name in enumerate(config.kinds):
            deadline = start + config.budget_s * (i + 1) / len(config.kinds)
            part = store.kind(name)
            if part["done"]:
                _log(f"{name}: done in an earlier run; skipped")
                continue
            if deadline - clock.now() < MIN_KIND_S:
                # an idle span, two references and a few trials need this much; a later run resumes it
                _log(f"{name}: {deadline - clock.now():.0f} s left of its share; not started")
                continue
            try:
                KindRun(board, name, config, store, monitor, simulate).run(deadline)
            except _Stop:
                raise
            except Exception as exc:  # one kind failing must not cost the others
                part["errors"].append(
                    {
                        "id": None,
                        "type": "kind",
                        "error": repr(exc),
                        "traceback": traceback.format_exc()[-3000:],
                    }
                )
                _log(f"{name}: FAILED {exc!r}\n{traceback.format_exc()}")
            store.save()
    except (_Stop, KeyboardInterrupt) as exc:
        _log(f"stopped ({exc!r}); saving what ran")
    finally:
        store.save()
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    size_mb = Path(out).stat().st_size / 1e6
    over = "; over the 3 MB a board file should keep to" if size_mb > 3 else ""
    _log(f"saved {out} ({size_mb:.2f} MB{over})")
    return store


class KindRun:
    """One kind of work on one board: its idle spans, references and trials."""

    def __init__(self, board, name: str, config: Config, store: Store, monitor, simulate: bool) -> None:
        self.board = board
        self.clock = board.clock
        self.name = name
        self.config = config
        self.store = store
        self.part = store.kind(name)
        self.monitor = monitor
        self.simulate = simulate
        self.failures: dict[str, int] = {}
        # Trials inside an enclosing reference, their Measurements not built yet (None outside one)
        self._deferred: list[dict] | None = None
        self.meter_s: list[float] = []
        self.measure_s: list[float] = []
        self.refs_taken = sum(1 for u in self.part["units"] if u["type"] == "ref")
        self._state: tuple[dict | None, int] = (None, -1)
        self._slow_state = False
        self._clock_off: str | None = self.part.get("clock_samples_off")
        self._clock_empty = 0
        # warm trials that gave a record: a resumed run goes on alternating where it was cut
        self._warm_trials = sum(1 for u in self.part["units"] if u["type"] == "warm")

    # -- the kind ----------------------------------------------------------
    def run(self, deadline: float) -> None:
        """Everything for this kind, ending by ``deadline`` (board clock, s) as far as it can."""
        if self.simulate:
            work = kinds_mod.simulated(self.name, self.board)
        else:
            work = kinds_mod.build(self.name, self.part["work"], log=_log)
        self.part["work"] = work.params
        self.work = work
        try:
            self._run(deadline)
        finally:
            work.close()

    def _run(self, deadline: float) -> None:
        from nvmeter.meter.baseline import IdleBaseline
        from nvmeter.meter.span import AlignedSpan

        self.stream = CallStream(self.work.call, self.clock, MAX_GAP_S)
        if not self.part["idle_spans"]:
            self._idle_span("start")
        span = AlignedSpan.from_dict(self.part["idle_spans"][0]["span"])
        self.idle = IdleBaseline.from_spans([span], "quiescent")
        self.timing = self._timing()
        # with exit="wait" the opening reference also shows what a window costs (nvmeter's time
        # at entry and exit), which decides whether every warm trial needs a lead of its own
        self._reference("open")
        blocks = self._plan(deadline)
        k = 0
        while k < len(blocks):
            # re-size the rest with what the kind's calls, windows and measure() really took
            ref_s = 0.0 if k == 0 else self.timing.reference_s
            budget = deadline - self.clock.now() + self.timing.reference_s - ref_s
            rest = [u for b in blocks[k:] for u in b]
            kept, dropped = plan_mod.trim(
                rest, self.timing, budget, self.name, self.config.block_s, self.config.seed, self._have(),
                self._floors(),
            )  # fmt: skip
            self._skip(dropped, "time")
            blocks[k:] = kept
            if k >= len(blocks):
                break
            block = blocks[k]
            first = self.timing.unit_s(block[0])
            if self.clock.now() + ref_s + first + self.timing.closing_s() > deadline:
                self._skip([u for b in blocks[k:] for u in b], "deadline")
                break
            if self.config.enclose:
                stream = [u for u in block if u.type in ("warm", "zeus")]
                block = [u for u in block if u.type not in ("warm", "zeus")]
                self._reference(f"block-{k}", inside=stream, deadline=deadline)
                singles = [u for u in block if u.type == "single"]
                if singles and self._fits(self.timing.reference_s, deadline):
                    self._isolated_reference(f"block-{k}", [u.pause_s for u in singles])
            elif k:
                self._reference(f"block-{k}")
            k += 1
            self._run_units(block, deadline)
        self._reference("close")
        self._idle_span("end")
        self.part["free_call_ms"] = [round(x, 3) for x in self.stream.free_ms]
        self.part["long_calls"] = self.stream.long_calls
        self.part["done"] = True
        self.store.save()
        n = sum(1 for u in self.part["units"] if u["type"] != "ref")
        _log(
            f"{self.name}: done, {n} trials, {len(self.part['skipped'])} skipped, "
            f"{len(self.part['errors'])} errors, {self.stream.long_calls} calls that broke the run"
        )

    def _fits(self, seconds: float, deadline: float) -> bool:
        """True when ``seconds`` more still leave the kind's closing reference and idle span."""
        return self.clock.now() + seconds + self.timing.closing_s() <= deadline

    def _run_units(self, units: list, deadline: float) -> None:
        """The trials in order, skipping those past the deadline or of a type that failed twice."""
        late, broken = [], []
        for unit in units:
            if not self._fits(self.timing.unit_s(unit), deadline):
                late.append(unit)
            elif self.failures.get(unit.type, 0) >= 2:
                broken.append(unit)
            else:
                self._trial(unit)
        self._skip(late, "deadline")
        self._skip(broken, "its type failed twice")

    def _limits(self) -> tuple:
        """(full, floor, hard floor) counts of the types and runs this run keeps."""
        c = self.config
        return plan_mod.limits(c.only, c.measure_runs, c.warm_s, c.single_runs)

    def _floors(self) -> tuple:
        """The floors a cut plan goes down to: FLOOR, then HARD_FLOOR, of the types this run keeps."""
        return self._limits()[1:]

    def _plan(self, deadline: float) -> list[list]:
        """The kind's blocks of trials, sized to the time left (less the trials already recorded)."""
        budget = deadline - self.clock.now() + self.timing.reference_s  # the opening one is taken
        # without ZeusMonitor there are no Zeus windows to plan
        no_zeus = {} if self.monitor is not None else {"zeus": 0}
        full, floor, _ = self._limits()
        counts, est = plan_mod.fit_counts(
            self.name,
            budget,
            self.timing,
            self.config.block_s,
            self.config.seed,
            full=replace(full, **no_zeus),
            floor=replace(floor, **no_zeus),
        )
        done = self.store.done_ids(self.name)
        planned = plan_mod.units(self.name, counts, self.config.seed, self.config.singles)
        trials = [u for u in planned if u.id not in done]
        # below FLOOR when even that does not fit (the opening reference is taken)
        blocks, dropped = plan_mod.trim(
            trials, self.timing, budget, self.name, self.config.block_s, self.config.seed, self._have(),
            self._floors(),
        )  # fmt: skip
        est = plan_mod.estimate_s(blocks, self.timing) - self.timing.idle_span_s
        self._skip(dropped, "time")
        self.part["plan"] = {
            "counts": counts.to_dict(),
            "estimate_s": est,
            "budget_s": budget,
            "timing": asdict(self.timing),
            "blocks": [[u.id for u in b] for b in blocks],
        }
        _log(
            f"{self.name}: idle {self.idle}; call {self.timing.call_s * 1e3:.1f} ms, nvmeter "
            f"{self.timing.meter_s * 1e3:.1f} ms a window; plan {sum(map(len, blocks))} trials in "
            f"{len(blocks)} blocks, ~{est:.0f} s of {budget:.0f} s"
        )
        return blocks

    def _timing(self) -> plan_mod.Timing:
        """Estimates from a few timed calls (and the single call) before the plan is sized."""
        for _ in range(3):
            self.stream.call()
        call_s = statistics.median(self.stream.free_ms[-3:]) / 1e3
        t0 = self.clock.now()
        self.work.single()
        single_s = self.clock.now() - t0
        return plan_mod.Timing(
            call_s=call_s,
            single_s=single_s,
            ref_s=self.config.ref_s,
            lead_s=self.config.lead_s,
            idle_s=self.config.idle_s,
            measure_s=measure_s_guess(self.config.measure_max_window_s, self.config.measure_warmup_s),
        )

    def _have(self) -> dict:
        """Trials recorded so far, by (type, window_s or None)."""
        have: dict = {}
        for u in self.part["units"]:
            if u["type"] != "ref":
                key = (u["type"], u["window_s"] if u["type"] in ("warm", "transient") else None)
                have[key] = have.get(key, 0) + 1
        return have

    def _skip(self, units: list, why: str) -> None:
        for u in units:
            self.part["skipped"].append({"id": u.id, "why": why})
        if units:
            _log(f"{self.name}: skipped {len(units)} trials ({why})")

    # -- pieces --------------------------------------------------------------
    def _idle_span(self, tag: str) -> None:
        """A quiescent span of the kind's idle (its start and end)."""
        self.part["idle_spans"].append(self._quiescent(tag))

    def _quiescent(self, tag: str) -> dict:
        """A quiescent idle span after the work has settled, as its record."""
        from nvmeter.meter.baseline import measure_quiescent

        self.work.sync()
        self.store.save()
        self.clock.sleep(0.5)  # the power falls to idle within ~60 ms of the work (docs/window.md)
        state = read_state(self.board)
        span = measure_quiescent(self.board, self.config.idle_s)
        _log(f"{self.name}: idle span ({tag}) {span.power_w:.2f} W over {span.duration_s:.2f} s")
        return compact(
            {
                "tag": tag,
                "span": span.to_dict(),
                "power_w": span.power_w,
                "samples_power_w": span.samples_power_w,
                "duration_s": span.duration_s,
                "state_before": state,
                "state_after": read_state(self.board),
            }
        )

    def _timings(self, times: tuple, last_end: float | None, calls_ms: list[float], state_before) -> dict:
        """A window's timing fields: (before entry, entered, before exit, exited) host times, s."""
        t0, t1, t2, t3 = times
        return {
            "t0_s": t1,
            "t1_s": t2,
            "gap_before_entry_ms": None if last_end is None else (t0 - last_end) * 1e3,
            "enter_ms": (t1 - t0) * 1e3,
            "exit_ms": (t3 - t2) * 1e3,
            "calls": len(calls_ms),
            "call_ms": [round(x, 3) for x in calls_ms],
            "state_before": state_before,
            "state_after": self._state_now(),
        }

    def _window(self, body, exit: str = "wait", enclosing: bool = False, **window) -> dict:
        """One EnergyWindow around ``body(w, t_entry)``, with its timings, states and raw readings.

        With ``exit="return"`` the calls go on after the block until the window's end edge is
        in (as a caller's next calls would); they are the stream's, not the window's. An
        ``enclosing`` window counts every call of the stream while it is open, the trials'
        inside it too (``body`` then declares none itself). Inside an enclosing window a
        trial's Measurement is left for later (``"_pending"``: see :meth:`_finish_deferred`).
        ``window``: more of the EnergyWindow's arguments (``dither``, ``tail_s``).
        """
        w, rec = self._open_window(body, exit, enclosing, **window)
        if self._deferred is not None and not enclosing:
            return {**rec, "_pending": w}
        return {**rec, **self._measured(w)}

    def _open_window(self, body, exit: str, enclosing: bool, **window) -> tuple:
        """The window run to its end edge: (the EnergyWindow, its timing fields)."""
        from nvmeter.meter.window import EnergyWindow

        state_before = self._state_before()
        win = EnergyWindow(self.board, idle=self.idle, sync=self.work.sync, exit=exit, **window)
        last_end = self.stream.last_end_s
        calls_ms: list[float] = []
        try:
            t0 = self.clock.now()
            with win as w:
                if enclosing:
                    self.stream.outer, self.stream.outer_ms = w, calls_ms
                else:
                    self.stream.collect = calls_ms
                t1 = self.clock.now()
                body(w, t1)
                t2 = self.clock.now()
            t3 = self.clock.now()
        finally:
            if enclosing:
                self.stream.outer = None
            else:
                self.stream.collect = None
        while not w.end_found():
            self.stream.call()
        clocks = {} if enclosing or t2 - t1 > CLOCK_MAX_WINDOW_S else self._clock_trace(t1, t2)
        if exit == self.config.exit:  # references always wait: they tell the trials' cost only then
            self.meter_s.append((t1 - t0) + (t3 - t2))
            self.timing = self.timing.with_(meter_s=statistics.median(self.meter_s))
        timings = self._timings((t0, t1, t2, t3), last_end, calls_ms, state_before)
        parts = {k.removesuffix("_s") + "_ms": round(v * 1e3, 3) for k, v in w.entry_parts_s.items()}
        exit_parts = {k.removesuffix("_s") + "_ms": round(v * 1e3, 3) for k, v in w.exit_parts_s.items()}
        return w, {**timings, "exit": exit, "enter_parts_ms": parts, "exit_parts_ms": exit_parts, **clocks}

    def _clock_trace(self, t0_s: float, t1_s: float) -> dict:
        """``sm_clock_samples``: the board's SM-clock samples around ``t0_s``-``t1_s``, as [t_s, MHz].

        The clocks inside a window, not only at its edges (docs/window-log.md: what spreads the
        duty-cycled windows). Boards without the buffer, or whose reads fail or take over
        ``SLOW_STATE_S`` (the read sits in a warm stream's gap), or whose buffer stays empty
        through ``CLOCK_EMPTY_READS`` windows, stop being asked; the kind records why as
        ``clock_samples_off``.
        """
        from nvmeter import errors

        read = getattr(self.board, "clock_samples", None)
        if read is None or self._clock_off:
            return {}
        start = self.clock.now()
        try:
            samples = read(t0_s - CLOCK_MARGIN_S)
        except errors.TelemetryError as exc:
            return self._clocks_off(f"{type(exc).__name__}: {exc}")
        if self.clock.now() - start > SLOW_STATE_S:
            self._clocks_off(f"a read took {(self.clock.now() - start) * 1e3:.1f} ms")
        end = t1_s + CLOCK_MARGIN_S
        inside = [[s.t_s, s.sm_clock_mhz] for s in samples if s.t_s <= end]
        self._clock_empty = 0 if inside else self._clock_empty + 1
        if self._clock_empty >= CLOCK_EMPTY_READS:
            return self._clocks_off(f"the buffer stayed empty over {CLOCK_EMPTY_READS} windows of work")
        return {"sm_clock_samples": inside}

    def _clocks_off(self, why: str) -> dict:
        self._clock_off = self.part["clock_samples_off"] = why
        _log(f"{self.name}: SM-clock samples no longer read ({why})")
        return {}

    @staticmethod
    def _measured(w) -> dict:
        """A closed window's reading and its raw record."""
        m = w.result
        return {
            "per_call_mj": m.per_call_mj,
            "per_call_mj_err": m.per_call_mj_err,
            "reliable": m.reliable,
            "reason": m.reason,
            "transient": getattr(m, "transient", None),
            "raw": m.to_dict(),
        }

    def _calls_for(self, seconds: float):
        def body(w, t_entry):
            while True:
                self.stream.call()
                w.call()
                if self.clock.now() - t_entry >= seconds:
                    return

        return body

    def _lead(self) -> tuple[int, float]:
        """Calls until the run is ``lead_s`` long (saving first if it is broken anyway).

        When calls are needed, the board state is read before them and stands for the
        state at entry (nothing then sits between the lead's last call and the entry).
        """
        if self.stream.unbroken_s() >= self.config.lead_s:
            return 0, self.stream.unbroken_s()
        if self.stream.unbroken_s() == 0.0:
            self.store.save()
        state = self._state_now(force=True)
        made = self.stream.lead(self.config.lead_s)
        self._state = (state, self.stream.calls)
        return made, self.stream.unbroken_s()

    def _pause(self, pause_s: float) -> None:
        """No calls for ``pause_s`` since the last call ended; a save (if it fits) and a state read in it."""
        self.work.sync()
        last = self.stream.last_end_s if self.stream.last_end_s is not None else self.clock.now()
        if last + pause_s - self.clock.now() > 1.5 * self.store.save_s:
            self.store.save()
        self._state_now(force=True)
        self.clock.sleep_until(last + pause_s)

    def _state_now(self, force: bool = False) -> dict | None:
        """The board state now, kept as the latest; None between windows of a stream once reads prove slow.

        A read sits in the gap between two windows of a warm stream, so one that takes
        over ``SLOW_STATE_S`` would break the stream: from then on only reads where the
        work pauses anyway (``force``) are made.
        """
        if self._slow_state and not force:
            return None
        t0 = self.clock.now()
        state = read_state(self.board)
        if self.clock.now() - t0 > SLOW_STATE_S:
            self._slow_state = True
        self._state = (state, self.stream.calls)
        return state

    def _state_before(self) -> dict | None:
        """The latest state when no call ran since it was read; else a fresh one."""
        state, calls = self._state
        return state if calls == self.stream.calls else self._state_now()

    def _reference(self, tag: str, inside: list = (), deadline: float = math.inf) -> None:
        """A reference: ``ref_s`` of calls after a lead; with ``inside``, those trials run in it.

        An enclosing reference is one unbroken run of calls: ``ENCLOSE_PAD_S`` of calls, the
        trials (warm windows entered in the run, each found its end before the next), calls
        until ``ref_s`` has passed (at least the pad), then its own exit.
        """
        lead_calls, unbroken = self._lead()
        if inside:

            def body(w, t_entry):
                self.stream.run_for(ENCLOSE_PAD_S)
                self._run_units(list(inside), deadline)
                self.stream.run_for(max(ENCLOSE_PAD_S, t_entry + self.config.ref_s - self.clock.now()))

            # the trials' Measurements wait until the reference is out: building one (and the
            # save a gap would bring) between two trials breaks the run, and a board at its
            # power limit then starts its overshoot again (results/enclose/call1-fe66f43-*)
            self._deferred = []
            try:
                rec = self._window(body, enclosing=True)
            finally:
                self._finish_deferred()
        else:
            rec = self._window(self._calls_for(self.config.ref_s))
        extra = {"encloses": [u.id for u in inside]} if inside else {}
        self._add_reference(tag, {"lead_calls": lead_calls, "unbroken_s": unbroken, **extra, **rec})

    def _isolated_reference(self, tag: str, pauses_s: list[float]) -> None:
        """The single calls' own reference: isolated single calls with these pauses, one window.

        The same call after the same pauses as the single-call trials, repeated for ``ref_s``
        (pauses cycled): its energy above idle per call is what one isolated call costs, where
        the steady reference is what the call costs inside a run of calls. With
        ``iso_idle``, a quiescent span right before and right after it (``idle_spans``): ~95%
        of it is pauses, so the idle it is read with counts ~20x more than in a steady one.
        """
        local = [self._quiescent(f"isolated-{tag}-before")] if self.config.iso_idle else []
        self._pause(pauses_s[0])
        made: list[float] = []

        def body(w, t_entry):
            for pause_s in itertools.cycle(pauses_s):
                self.stream.call(self.work.single)
                w.call()
                made.append(pause_s)
                if self.clock.now() - t_entry >= self.config.ref_s:
                    return
                self.clock.sleep(pause_s)

        rec = self._window(body)
        if local:
            local.append(self._quiescent(f"isolated-{tag}-after"))
            rec["idle_spans"] = local
        self._add_reference(f"isolated-{tag}", {"isolated": True, "pauses_s": made[:-1], **rec})

    def _add_reference(self, tag: str, rec: dict) -> None:
        uid = f"ref-{self.refs_taken:02d}"
        self.refs_taken += 1
        self.store.add_unit(
            self.name, {"id": uid, "type": "ref", "tag": tag, "window_s": self.config.ref_s, **rec}
        )
        _log(
            f"{self.name}: reference {tag}: {rec['per_call_mj']:,.1f} ± "
            f"{rec['per_call_mj_err']:,.1f} mJ/call "
            f"({rec['calls']} calls, {_temp(rec)})"
        )

    def _trial(self, unit) -> None:
        t_start = self.clock.now()
        try:
            rec = getattr(self, f"_{unit.type}")(unit)
        except (_Stop, KeyboardInterrupt):
            raise
        except Exception as exc:
            self._failed(unit, exc)
            self.stream.collect = None
            return
        rec = {**unit.to_dict(), "wall_s": self.clock.now() - t_start, **rec}
        if "_pending" in rec:
            self._deferred.append(rec)
            return
        self._keep(rec)

    def _failed(self, unit, exc: Exception) -> None:
        self.failures[unit.type] = self.failures.get(unit.type, 0) + 1
        self.part["errors"].append(
            {
                "id": unit.id,
                "type": unit.type,
                "error": repr(exc),
                "traceback": traceback.format_exc()[-3000:],
            }
        )
        _log(f"{self.name}: {unit.id} FAILED {exc!r}")

    def _finish_deferred(self) -> None:
        """The Measurements of the trials an enclosing reference held, built now that it is out."""
        pending, self._deferred = self._deferred or [], None
        for rec in pending:
            w = rec.pop("_pending")
            try:
                rec.update(self._measured(w))
            except Exception as exc:
                self._failed(SimpleNamespace(id=rec["id"], type=rec["type"]), exc)
                continue
            self._keep(rec)

    def _keep(self, rec: dict) -> None:
        self.store.add_unit(self.name, rec)
        if not self.config.verbose:
            return
        pcm, err = rec.get("per_call_mj"), rec.get("per_call_mj_err")
        bound = f" ± {err:,.1f}" if isinstance(err, float) else ""
        gap = rec.get("gap_before_entry_ms")
        extra = f" gap {gap:.1f} ms" if gap is not None else ""
        _log(f"{self.name}: {rec['id']}: {pcm:,.1f}{bound} mJ/call, {rec.get('calls')} calls{extra}")

    # -- trials --------------------------------------------------------------
    def _warm(self, unit) -> dict:
        lead_calls, unbroken = self._lead()
        body, logged = self._calls_for(unit.window_s), {}
        if self.config.step_log and self._warm_trials % 2 == 0:  # the others tell the log's own cost
            body = self._logging_steps(body, logged)
        rec = self._window(body, self.config.exit)
        # counted once it has a record: a failed trial's turn goes to the next, so the recorded
        # ones alternate, in this run and in one resumed from its record
        self._warm_trials += 1
        return {"lead_calls": lead_calls, "unbroken_s": unbroken, **rec, **logged}

    def _logging_steps(self, body, logged: dict):
        """``body`` with the counter's steps logged while it runs (``logged["step_log"]``).

        Only a block that ran to its end keeps its log: one that raised leaves ``logged`` empty
        (its error is the trial's), where a log kept on the kind would go to its next window.
        """
        from accuracy import steplog

        def logging(w, t_entry):
            log = steplog.start(self.board, w, w.profile.counter_period_s)
            try:
                body(w, t_entry)
            except BaseException:
                log.cancel()
                raise
            logged["step_log"] = log.stop(self.clock.now())

        return logging

    def _stall(self, unit) -> dict:
        """A warm board, one call that waits ``unit.stall_s`` inside, ``unit.pause_s`` of calls, a window."""
        lead_calls, unbroken = self._lead()
        self.stream.call(stall_s=unit.stall_s)
        stall_end_s = self.stream.last_end_s
        after_calls = self.stream.run_for(unit.pause_s)
        rec = self._window(self._calls_for(unit.window_s), self.config.exit)
        return {
            "lead_calls": lead_calls,
            "unbroken_s": unbroken,
            "calls_after_stall": after_calls,
            "stall_end_before_entry_s": rec["t0_s"] - stall_end_s,
            **rec,
        }

    def _transient(self, unit) -> dict:
        self._pause(unit.pause_s)
        return self._window(self._calls_for(unit.window_s), self.config.exit)

    def _single(self, unit) -> dict:
        self._pause(unit.pause_s)

        def body(w, t_entry):
            if unit.delay_s:
                self.clock.sleep(unit.delay_s)
            self.stream.call(self.work.single)
            w.call()

        rec = self._window(body, self.config.exit, dither=unit.dither, tail_s=unit.tail_s)
        return {"single_share": self.work.single_share, **rec}

    def _zeus(self, unit) -> dict:
        if self.monitor is None:
            raise RuntimeError("ZeusMonitor is absent")
        lead_calls, unbroken = self._lead()
        last_end = self.stream.last_end_s
        state_before = self._state_before()
        calls_ms: list[float] = []
        self.stream.collect = calls_ms
        try:
            t0 = self.clock.now()
            self.monitor.begin_window(unit.id)
            t1 = self.clock.now()
            while self.clock.now() - t1 < unit.window_s or not calls_ms:
                self.stream.call()
            t2 = self.clock.now()
            m = self.monitor.end_window(unit.id)
            t3 = self.clock.now()
        finally:
            self.stream.collect = None
        gross_j = float(sum(m.gpu_energy.values()))
        return {
            "lead_calls": lead_calls,
            "unbroken_s": unbroken,
            **self._timings((t0, t1, t2, t3), last_end, calls_ms, state_before),
            "time_s": m.time,
            "gross_j": gross_j,
            "idle_w": self.idle.power_w,
            "per_call_mj": (gross_j - self.idle.power_w * m.time) * 1e3 / len(calls_ms),
        }

    def _measure(self, unit) -> dict:
        from nvmeter.meter.adaptive import measure

        self.work.sync()
        self.store.save()
        wanted = {
            "device": self.board,
            "idle": self.idle,
            "sync": self.work.sync,
            "target_rel_err": self.config.target_rel_err,
            "min_window_s": MEASURE_SUBWINDOW_S,
            "max_window_s": self.config.measure_max_window_s,
            "warmup_s": self.config.measure_warmup_s,
            "min_windows": self.config.measure_min_windows,
        }
        accepted = inspect.signature(measure).parameters  # an older nvmeter: what it takes
        kwargs = {k: v for k, v in wanted.items() if k in accepted and v is not None}
        state_before = read_state(self.board)
        calls_ms: list[float] = []
        self.stream.collect = calls_ms
        try:
            t0 = self.clock.now()
            m = measure(self.stream.call, **kwargs)
            t1 = self.clock.now()
        finally:
            self.stream.collect = None
        self.measure_s.append(t1 - t0)
        self.timing = self.timing.with_(measure_s=statistics.fmean(self.measure_s))
        return {
            "t0_s": t0,
            "t1_s": t1,
            "seconds": t1 - t0,
            "kwargs": sorted(kwargs),
            "calls": m.calls,
            "calls_made": len(calls_ms),
            "call_ms_median": statistics.median(calls_ms) if calls_ms else None,
            "state_before": state_before,
            "state_after": read_state(self.board),
            "per_call_mj": m.per_call_mj,
            "per_call_mj_err": m.per_call_mj_err,
            "reliable": m.reliable,
            "reason": m.reason,
            "raw": m.to_dict(),
        }


def _temp(rec: dict) -> str:
    temps = [s.get("temperature_c") for s in (rec.get("state_before") or {}, rec.get("state_after") or {})]
    temps = [t for t in temps if isinstance(t, (int, float))]
    return "-".join(f"{t:.0f}" for t in temps) + " °C" if temps else "temperature unknown"
