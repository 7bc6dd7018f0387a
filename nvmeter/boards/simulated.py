"""A simulated GPU board on a virtual clock, with the same protocol as the NVML one.

The model (every default's source is in :class:`SimConfig`):

* True power follows a target (idle level + load) through a short delay and a
  first-order lag, on a 0.5 ms grid. Each energy-counter read adds a little power
  while it runs (the tight-polling artefact).
* The energy counter updates every ``counter_period_s`` (with jitter). Each update
  adds ``mean power over the last sensor_window_s x time since the last update``:
  with a window shorter than the period, the sensor sees only part of the runtime,
  as SC24 found on A100/H100.
* The power-sample buffer holds the mean power of each ~20 ms interval.
* Reads cost virtual time (the counter ~3 ms, fields ~2 us).
* Faults can be injected at a virtual time.

A one-minute probe runs in well under a second of host time.
"""

from __future__ import annotations

import bisect
import enum
import functools
import itertools
import math
import os
import threading
from collections import deque
from dataclasses import dataclass, field, replace

import numpy as np

from nvmeter import errors
from nvmeter.arguments import finite
from nvmeter.boards.protocol import (
    BoardIdentity,
    BoardState,
    ClockSample,
    PowerSample,
    Utilization,
    checked_pids,
)
from nvmeter.clock import VirtualClock

# The shortest history a board may keep: over the longest look-back of its own model and of any
# replay (the 1 s average, the sample buffer's ~2.4 s, an edge's 0.35 s time-out), with margin
MIN_HISTORY_S = 10.0
_GRID_S = 0.0005  # simulation step: fine against the ~20 ms bursts the probes resolve
# What the faults name; NOT_SUPPORTED and NOT_READY hit the power reads only
_PROCESSES = "the compute processes"
_POWER_READS = ("the energy counter", "power", "the power-sample buffer")


@dataclass(frozen=True)
class SimConfig:
    """Parameters of the simulated board.

    Defaults model the H200 GPU-2e139fc3 as results/probe-h200.json measured it
    ("H200 probe" below); docs/facts.md where the probe does not measure it.

    Attributes:
        counter_period_s: Counter update period (H200 probe: median 100.0 ms).
        counter_jitter_s: SD of the gap between updates (H200 probe, cadence: SD 1.9 ms
            with a context, 1.6 ms under load).
        sensor_window_s: Part of each period the power sensor sees. SC24 found ~25 ms
            of ~100 ms on A100/H100; on the H200 isolated-burst readings with a tail
            were unimodal (H200 probe, bursts), as full coverage predicts, so the
            default covers the whole period.
        read_latency_s: Minimum cost of a counter read (H200 probe: 2.62 ms).
        read_latency_tail_s: Mean extra cost above the minimum (H200 probe: median 3.11 ms).
        read_spike_s, read_spike_p: Slow reads (H200 probe, cadence: 4.0% of 3,270 reads
            over 8 ms, their median 14.9 ms).
        field_read_s: Cost of a power field read (H200 probe: 4.5-7.7 us).
        samples_read_s: Cost of a sample-buffer read (H200 probe: 0.49 ms).
        sample_period_s, sample_jitter_s: Sample-buffer spacing, uniform within +-jitter
            (H200 probe: median 20.0 ms, SD 1.77 ms, i.e. +-3.1 ms; extremes 9.6-28.2).
        sample_buffer_len: Samples the driver keeps (H200 probe: 119).
        idle_no_context_w, idle_context_w, idle_frozen_w: Idle levels (H200 probe:
            78.7, 121.2, 121.2 W).
        polling_extra_w: Extra draw while a counter read runs (H200 probe: +2.8 W at
            255 reads/s).
        step_delay_s, tau_s: Delay and time constant of power after a load change: together
            the 7.5 ms lag fitted on the H200 window bench (nvmeter.boards.profile.HOPPER); the
            counter's own step delay is 10-11 ms (H200 probe).
        noise_w: SD of sensor noise on each reading, W (H200 probe: idle samples' SD 0.30 W).
        tflops_per_matmul_s: Matmul rate by operands, TFLOP/s (H200 probe: 51.1 both); ``bf16``:
            the cap-spread probe's bfloat16 products, a model (500), not a measurement.
        load_above_idle_w: 4096^2 FP32 matmul power above context idle by operands
            (H200 probe: 295 and 553 W); ``bf16``: 640 W, a demand above the 700 W limit, as
            bf16 products at the cap draw (results/enclose/: 700 W, power-cap reason set).
        power_limit_w: Board power limit (H200 probe: 700 W).
        overshoot_rel: Right after a pause, the limiter lets power run this share above the
            limit, decaying with ``overshoot_tau_s`` (H200 lead, docs/facts.md: per-call energy
            ~3% above steady in the first ~0.5 s after any pause). 0 by default.
        overshoot_tau_s: Decay time of the overshoot, s.
        cap_swing_rel, cap_swing_period_s: While the limit binds, it swings by this share
            either way with this period (an H100's bf16 products at the cap: per-call energy
            spread 2.1% over 0.5 s blocks, 0.4% over 1 s, neighbouring 0.5 s windows' errors
            correlated -0.71, results/enclose/cap-spread.txt, docs/window-log.md: a swing of about
            a second). 0 by default.
        pause_s: A load pause at least this long restarts the overshoot and the drift
            (docs/facts.md: a 100 ms pause is enough on the H200).
        drift_rel_per_s: Load power above idle rises by this share per second of continuous
            load (leakage as the board warms), up to ``drift_max_rel``. 0 by default.
        drift_max_rel: The drift's ceiling, share of the load.
        second_level_rel, second_level_p: At each start after a pause, with chance
            ``second_level_p``, the run's load power above idle is this share higher until the
            next pause (an H100 and an H200 ran FP32 products 2.2-2.6% above their references'
            level for whole runs, results/enclose/call79-*-levels.txt; error model 13). 0 by
            default; drawn from a generator of its own, so other seeds' boards are unchanged.
        sm_idle_mhz, sm_boost_mhz, memory_mhz: Clocks read idle and under load (KINDS.md of
            this workplace, H200: SM 345 MHz idle, 1,980 MHz after products; memory 3,201 MHz).
        ambient_c, c_per_w, thermal_tau_s: First-order temperature model: ambient plus
            ``c_per_w`` per W, relaxing with ``thermal_tau_s`` (H200 lead, docs/facts.md: 56 -> 60 °C
            over 20 s at ~690 W; these give 2.6 °C). A model to test the drift detector, not a fit.
        history_s: Virtual seconds of the past kept for replays and the test oracle
            (:meth:`SimulatedBoard.true_energy_j`); older is forgotten, so that a long simulated
            run keeps bounded memory (traced by tracemalloc: unbounded it grew 63 KiB a virtual
            second, the 0.5 ms power grid; with 600 s kept, 3,000 virtual seconds held 69 MiB).
            600 s is over any window a replay reaches back to (a counter period, the sample
            buffer's ~2.4 s) and any test's span; at least :data:`MIN_HISTORY_S` (10 s), finite
            (the model's own 1 s average reads back into it: at 0 and 0.05 s the counter read
            19% low, in an adversarial review).
        seed: RNG seed.
        name, uuid: The identity it reports (another name models another family, e.g. a
            GH200 whose counter covers the module; another UUID a second board). With no
            UUID, each board takes the next of this process's (:func:`next_uuid`), so two
            boards never share one: a process's first is always the same, as every record of
            a simulated board has shown it.
    """

    counter_period_s: float = 0.100
    counter_jitter_s: float = 0.002
    sensor_window_s: float = 0.100
    read_latency_s: float = 0.0026
    read_latency_tail_s: float = 0.0005
    read_spike_s: float = 0.015
    read_spike_p: float = 0.04
    field_read_s: float = 6e-6
    samples_read_s: float = 0.0005
    sample_period_s: float = 0.020
    sample_jitter_s: float = 0.003
    sample_buffer_len: int = 119
    idle_no_context_w: float = 78.7
    idle_context_w: float = 121.2
    idle_frozen_w: float = 121.2
    polling_extra_w: float = 2.8
    step_delay_s: float = 0.002
    tau_s: float = 0.0055
    noise_w: float = 0.3
    tflops_per_matmul_s: dict = field(
        default_factory=lambda: {"constant": 51.1, "random": 51.1, "bf16": 500.0}
    )
    load_above_idle_w: dict = field(
        default_factory=lambda: {"constant": 295.0, "random": 553.0, "bf16": 640.0}
    )
    power_limit_w: float = 700.0
    overshoot_rel: float = 0.0
    overshoot_tau_s: float = 0.25
    cap_swing_rel: float = 0.0
    cap_swing_period_s: float = 1.0
    pause_s: float = 0.05
    drift_rel_per_s: float = 0.0
    drift_max_rel: float = 0.05
    second_level_rel: float = 0.0
    second_level_p: float = 0.0
    sm_idle_mhz: float = 345.0
    sm_boost_mhz: float = 1980.0
    memory_mhz: float = 3201.0
    ambient_c: float = 30.0
    c_per_w: float = 0.05
    thermal_tau_s: float = 60.0
    history_s: float = 600.0
    seed: int = 0
    name: str = "Simulated H200"
    uuid: str | None = None

    def __post_init__(self) -> None:
        # the swing divides by its period; a time constant of 0 by the decay's
        for name in ("cap_swing_period_s", "overshoot_tau_s"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                raise errors.UsageError(f"SimConfig {name} must be positive seconds, not {value!r}")

    def with_(self, **changes) -> SimConfig:
        """A copy with some fields changed."""
        return replace(self, **changes)


# The simulated boards' UUIDs: the first is the one every simulated board had before each took its own
_UUID_STEM = "GPU-5157a7ed-0000-4000-8000-"
FIRST_UUID = (
    f"{_UUID_STEM}{0:012x}"  # a process's first simulated board: as `nvmeter … --simulate` records it
)
_UUIDS = itertools.count()
_UUIDS_LOCK = threading.Lock()


def next_uuid() -> str:
    """This process's next simulated UUID: ``GPU-5157a7ed-0000-4000-8000-`` and 0, 1, … in hexadecimal."""
    with _UUIDS_LOCK:
        return f"{_UUID_STEM}{next(_UUIDS):012x}"


class Fault(enum.Enum):
    """Faults the simulated board can be told to show from a virtual time on."""

    COUNTER_BACKWARDS = "counter_backwards"  # the counter drops by 5 J once
    COUNTER_RESET = "counter_reset"  # the counter restarts from 0 (a driver reload)
    NOT_SUPPORTED = "not_supported"  # energy and power reads raise NotSupported
    GPU_LOST = "gpu_lost"  # every read raises GpuLost (the board fell off the bus)
    # energy and power reads raise NotReady (NVML_ERROR_NOT_READY after nvmeter's retries:
    # a board just started); give inject() an end to make it pass
    NOT_READY = "not_ready"
    # the driver lacks the process-listing function (NVML_ERROR_FUNCTION_NOT_FOUND)
    NO_PROCESS_LIST = "no_process_list"


class _Trace:
    """True board power on a fixed grid, with its running integral."""

    def __init__(self, t0_s: float, power_w: float) -> None:
        self.t0_s = t0_s
        self.n = 1
        self.power_w = np.full(1 << 16, power_w)
        self.cum_j = np.zeros(1 << 16)  # energy from t0 to each grid point

    @property
    def end_s(self) -> float:
        return self.t0_s + (self.n - 1) * _GRID_S

    def extend(self, t_s: float, target_w: float, tau_s: float) -> None:
        """Grow the trace to ``t_s`` with power relaxing towards ``target_w``."""
        steps = int((t_s - self.end_s) / _GRID_S)
        if steps <= 0:
            return
        while self.n + steps > len(self.power_w):
            self.power_w = np.concatenate([self.power_w, np.empty_like(self.power_w)])
            self.cum_j = np.concatenate([self.cum_j, np.empty_like(self.cum_j)])
        last = self.power_w[self.n - 1]
        k = np.arange(1, steps + 1)
        new = target_w + (last - target_w) * np.exp(-k * _GRID_S / tau_s)
        prev = np.concatenate([[last], new[:-1]])
        inc = np.cumsum((prev + new) * 0.5 * _GRID_S)
        self.power_w[self.n : self.n + steps] = new
        self.cum_j[self.n : self.n + steps] = self.cum_j[self.n - 1] + inc
        self.n += steps

    def energy_j(self, t_s: float) -> float:
        """Energy from the trace's start to ``t_s`` (clamped to the trace)."""
        x = min(max((t_s - self.t0_s) / _GRID_S, 0.0), self.n - 1.0)
        i = min(int(x), self.n - 2) if self.n > 1 else 0
        if self.n == 1:
            return 0.0
        frac = x - i
        return float(self.cum_j[i] * (1 - frac) + self.cum_j[i + 1] * frac)

    def mean_w(self, a_s: float, b_s: float) -> float:
        return (self.energy_j(b_s) - self.energy_j(a_s)) / max(b_s - a_s, _GRID_S)

    def forget(self, before_s: float) -> None:
        """Drop the grid before ``before_s``; the integral keeps its values, so differences hold.

        Copies only once half the grid can go, so each point is copied O(1) times on average,
        into arrays sized for what is kept (a power of two, as :meth:`extend` grows them).
        """
        drop = int((before_s - self.t0_s) / _GRID_S)
        if drop < self.n // 2 or drop >= self.n - 1:
            return
        keep = self.n - drop
        size = max(1 << 16, 1 << (2 * keep - 1).bit_length())
        self.power_w = np.concatenate([self.power_w[drop : self.n], np.empty(size - keep)])
        self.cum_j = np.concatenate([self.cum_j[drop : self.n], np.empty(size - keep)])
        self.n, self.t0_s = keep, self.t0_s + drop * _GRID_S


def finite_load_w(value: float, name: str = "load_w") -> float:
    """``value`` as a load a board can draw: a finite number of watts, at least 0.

    A nan load made every figure of the window nan, an infinite one a board drawing without
    limit, a negative one a board giving energy back.

    Raises:
        ValueError: naming ``name`` and its unit.
    """
    return finite(value, name, kind="number of watts", minimum=0)


def _locked(method):
    """One caller at a time: a window's poller thread, or windows in several threads, share the model."""

    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        with self._lock:
            return method(self, *args, **kwargs)

    return wrapper


class SimulatedBoard:
    """A model of an NVML board. Implements :class:`nvmeter.boards.protocol.Board`.

    Args:
        config: The model's parameters (default: an H200 as measured).
        clock: A virtual clock; one is made if not given.

    The worker side (:class:`nvmeter.worker.SimWorker`) drives it through
    :meth:`set_context`, :meth:`set_frozen` and :meth:`set_load`.

    """

    def __init__(self, config: SimConfig | None = None, clock: VirtualClock | None = None) -> None:
        self._lock = threading.RLock()
        self.config = config or SimConfig()
        history_s = self.config.history_s
        if not (isinstance(history_s, (int, float)) and MIN_HISTORY_S <= history_s < math.inf):
            least = f"a finite number of seconds >= {MIN_HISTORY_S:g}"
            raise errors.UsageError(f"SimConfig.history_s must be {least}, not {history_s!r}")
        if self.config.uuid is None:  # boards are told apart by UUID (open_boards, records, profiles)
            self.config = self.config.with_(uuid=next_uuid())
        self.clock = clock or VirtualClock()
        self._rng = np.random.default_rng(self.config.seed)
        self._level_rng = np.random.default_rng([self.config.seed, 1])
        self._run_level = 1.0
        now = self.clock.now()
        self._context = False
        self._context_pid = 0
        self.context_log: list[tuple[float, bool]] = []  # (virtual time, opened) of each change
        # processes of others holding a context (tests add some to fail the scorer's check)
        self.other_pids: list[int] = []
        self._frozen = False
        self._load_w = 0.0
        self._extra_w = 0.0
        self._idle_shift_w = 0.0
        self._pending: list[tuple[float, float, float]] = []  # (effective time, idle W, load W)
        self._scheduled: list[tuple[float, float]] = []  # (time, load W) set ahead
        self._target_w = self.config.idle_no_context_w
        # the level in effect (after the step delay), and when the load last came on / went off
        self._level_idle_w, self._level_load_w = self._target_w, 0.0
        self._load_on_s, self._load_off_s = now, -math.inf
        self._temperature_c, self._temperature_at_s = self._steady_c(self._target_w), now
        self._counter_log: list[tuple[float, float]] = []  # (update time, counter mJ), set below
        self._forgotten_s = -math.inf  # the history before this is gone (SimConfig.history_s)
        self._fault_log: list[tuple[float, Fault]] = []
        # history before 'now' so the sample buffer starts full, as on a real board
        self._trace = _Trace(now - 3.0, self._target_w)
        self._counter_mj = 1_000_000_000.0
        self._counter_offset_mj = 0.0
        self._last_update_s = now - self._rng.uniform(0, self.config.counter_period_s)
        self._next_update_s = self._last_update_s + self.config.counter_period_s
        self._counter_log.append((self._last_update_s, self._counter_mj))  # the value before any update
        self._instant_w = self._target_w
        self._average_w = self._target_w
        self._samples: deque[PowerSample] = deque(maxlen=self.config.sample_buffer_len)
        self._sample_log: list[PowerSample] = []  # every sample, for replays of past buffer reads
        self._next_sample_s = now - 2.9 + self._rng.uniform(0, self.config.sample_period_s)
        self._faults: list[tuple[float, Fault]] = []
        self._fault_ends: dict[Fault, float] = {}
        self.energy_reads = 0

    def __repr__(self) -> str:
        # the model moves only when read, and moving it here would change a seeded run by a print:
        # say when its figure is from (a repr in a traceback read 78.7 W after 5 s at 421 W)
        return (
            f"SimulatedBoard(t={self.clock.now():.3f} s; as of its last read at {self._trace.end_s:.3f} s: "
            f"target {self._target_w:.1f} W)"
        )

    # -- the worker's side -------------------------------------------------
    @property
    def context_open(self) -> bool:
        """True while a simulated CUDA context is open (:meth:`set_context`)."""
        return self._context

    @_locked
    def set_context(self, open_: bool, pid: int | None = None) -> None:
        """A CUDA context opens (held by ``pid``, default this process) or closes (``context_log``)."""
        if open_ != self._context:
            self.context_log.append((self.clock.now(), open_))
        self._context = open_
        self._context_pid = os.getpid() if pid is None else pid
        self._retarget()

    @_locked
    def shift_idle(self, shift_w: float) -> None:
        """Move every idle level by ``shift_w`` W from now.

        An H200's idle moved by up to 2.4 W within ~15 s
        (results/enclose/call27-25b7f91-tail-enclose.json.gz).

        Raises:
            ValueError: ``shift_w`` not a finite number of watts.
        """
        self._idle_shift_w = finite(shift_w, "shift_w", kind="number of watts")
        self._retarget()

    @_locked
    def set_frozen(self, frozen: bool) -> None:
        """The context's process is stopped (SIGSTOP) or resumed."""
        self._frozen = frozen
        self._retarget()

    @_locked
    def set_load(self, above_idle_w: float, at_s: float | None = None) -> None:
        """Load power above context idle, W (0 for none), from ``at_s`` (default: now).

        Raises:
            ValueError: ``above_idle_w`` not a finite number of watts >= 0 (:func:`finite_load_w`), or
                ``at_s`` not a finite time.
        """
        above_idle_w = finite_load_w(above_idle_w, "above_idle_w")
        if at_s is not None:
            finite(at_s, "at_s", kind="virtual time in seconds")
        if at_s is None or at_s <= self.clock.now():
            self._load_w = above_idle_w
            self._retarget()
        else:
            self._scheduled.append((at_s, above_idle_w))
            self._scheduled.sort(key=lambda change: change[0])

    @_locked
    def cancel_load_change(self, at_s: float) -> None:
        """Drop the load change :meth:`set_load` scheduled for ``at_s`` (a job stopped early)."""
        self._scheduled = [(t, w) for t, w in self._scheduled if t != at_s]

    @_locked
    def inject(self, fault: Fault, at_s: float | None = None, until_s: float | None = None) -> None:
        """Show ``fault`` from virtual time ``at_s`` (default: now) until ``until_s`` (default: for good)."""
        at_s = self.clock.now() if at_s is None else at_s
        self._faults.append((at_s, fault))
        self._fault_log.append((at_s, fault))
        if until_s is not None:
            self._fault_ends[fault] = until_s

    @_locked
    def true_energy_j(self, a_s: float, b_s: float) -> float:
        """The model's exact energy between two virtual times, J (test oracle).

        Raises:
            ValueError: a time more than ``history_s`` before the latest one modelled.
        """
        self._advance(max(a_s, b_s))
        self._check_kept(min(a_s, b_s))
        return self._trace.energy_j(b_s) - self._trace.energy_j(a_s)

    def _check_kept(self, t_s: float) -> None:
        if t_s < self._forgotten_s:
            raise ValueError(
                f"virtual time {t_s:.3f} s is before the {self.config.history_s:g} s of history this "
                f"simulated board keeps (SimConfig.history_s)"
            )

    @_locked
    def replay_counter_reads(
        self, t0_s: float, timeout_s: float, wait: bool = True
    ) -> tuple[tuple, tuple, tuple]:
        """The counter reads a second thread polling back to back from ``t0_s`` would have made.

        A virtual clock moves only with its caller, so a simulated board cannot be polled
        from a thread while the caller works; the meter asks for the reads afterwards
        instead. Reads stop at the first changed value or after ``timeout_s``; the clock is
        moved past the last read, as if the caller had waited for the poller. With ``wait``
        False no one waits for it (a diagnostic's poller, ``t0_s`` in the past): the clock stays,
        and the reads also stop before one that would start after it (the last may end after it).

        Returns:
            (read starts, read ends, values mJ), each a tuple.

        Raises:
            GpuLost, NotSupported: a fault injected before the read.
        """
        t_s, t0s, t1s, values = t0_s, [], [], []
        while True:
            # never model ahead of the clock: the caller may still change the load
            self.clock.advance_to(t_s)
            self._advance(self.clock.now())
            values.append(self._replayed_mj(t_s))
            cost = self._read_cost_s()
            t0s.append(t_s)
            t1s.append(t_s + cost)
            t_s += cost
            if values[-1] != values[0] or t_s >= t0_s + timeout_s or (not wait and t_s > self.clock.now()):
                break
        if wait:
            self.clock.advance_to(t_s)
        return tuple(t0s), tuple(t1s), tuple(values)

    def _replayed_mj(self, t_s: float) -> int:
        """The counter as a read at ``t_s`` sees it, with the faults injected by then."""
        self._check_kept(t_s)
        i = bisect.bisect_right(self._counter_log, (t_s, math.inf)) - 1
        value = self._counter_log[i][1] if i >= 0 else self._counter_mj
        offset = 0.0
        for at_s, fault in self._fault_log:
            if at_s > t_s:
                continue
            if at_s <= t_s < self._fault_ends.get(fault, math.inf) and fault in (
                Fault.GPU_LOST,
                Fault.NOT_SUPPORTED,
                Fault.NOT_READY,
            ):
                self._raise_at(fault, at_s)  # the same errors, naming the board, as a live read
            if fault is Fault.COUNTER_BACKWARDS:
                offset -= 5000.0
            if fault is Fault.COUNTER_RESET:
                offset = -value
        return int(value + offset)

    def _idle_w(self) -> float:
        c = self.config
        if not self._context:
            return c.idle_no_context_w + self._idle_shift_w
        return (c.idle_frozen_w if self._frozen else c.idle_context_w) + self._idle_shift_w

    def _retarget(self, at_s: float | None = None) -> None:
        at_s = self.clock.now() if at_s is None else at_s
        self._advance(at_s)
        change = (at_s + self.config.step_delay_s, self._idle_w(), self._load_w)
        # by time alone, after its equals: changes made at one instant apply in the order made
        # (sorting the tuples put a closed context's lower idle before the load change made just
        # before it, which then restored the open context's idle: the board idled at 121 W after
        # the context closed). Inserted, not re-sorted: 2 us calls keep thousands pending.
        bisect.insort(self._pending, change, key=lambda c: c[0])

    def _set_level(self, at_s: float, idle_w: float, load_w: float) -> None:
        """The load change reaches the board: a pause long enough restarts overshoot and drift."""
        if load_w > 0 >= self._level_load_w and at_s - self._load_off_s >= self.config.pause_s:
            self._load_on_s = at_s
            if self.config.second_level_p > 0:
                upper = self._level_rng.random() < self.config.second_level_p
                self._run_level = 1 + self.config.second_level_rel if upper else 1.0
        if load_w <= 0 < self._level_load_w:
            self._load_off_s = at_s
        self._level_idle_w, self._level_load_w = idle_w, load_w
        self._target_w = self._level_w(at_s)

    def _level_w(self, t_s: float) -> float:
        """Target power at ``t_s``: idle plus the drifting load, under the overshooting limit."""
        c = self.config
        load_w, on_s = self._level_load_w, t_s - self._load_on_s
        if load_w <= 0:
            return min(self._level_idle_w, c.power_limit_w)
        load_w *= (1 + min(c.drift_max_rel, c.drift_rel_per_s * on_s)) * self._run_level
        cap_w = c.power_limit_w * (1 + c.overshoot_rel * math.exp(-on_s / c.overshoot_tau_s))
        cap_w *= 1 + c.cap_swing_rel * math.sin(2 * math.pi * on_s / c.cap_swing_period_s)
        return min(self._level_idle_w + load_w, cap_w)

    def _extend(self, t_s: float) -> None:
        """Grow the trace to ``t_s``; a drifting or overshooting level in 5 ms steps."""
        c = self.config
        dynamic = self._level_load_w > 0 and (c.drift_rel_per_s or c.overshoot_rel or c.cap_swing_rel)
        while dynamic and self._trace.end_s + _GRID_S < t_s:
            t_next = min(t_s, self._trace.end_s + 0.005)
            self._target_w = self._level_w(t_next)
            self._trace.extend(t_next, self._target_w + self._extra_w, c.tau_s)
        self._trace.extend(t_s, self._target_w + self._extra_w, c.tau_s)

    # -- the model ---------------------------------------------------------
    def _advance(self, t_s: float) -> None:
        """Bring trace, counter and sample buffer up to ``t_s``."""
        while self._scheduled and self._scheduled[0][0] <= t_s:
            at_s, self._load_w = self._scheduled.pop(0)
            self._retarget(at_s)
        while self._pending and self._pending[0][0] <= t_s:
            at_s, idle_w, load_w = self._pending.pop(0)
            self._extend(at_s)
            self._set_level(at_s, idle_w, load_w)
        self._extend(t_s)
        while self._next_update_s <= self._trace.end_s:
            self._update_counter(self._next_update_s)
        while self._next_sample_s <= self._trace.end_s:
            self._take_sample(self._next_sample_s)
        self._forget(self._trace.end_s - self.config.history_s)

    def _forget(self, before_s: float) -> None:
        """Drop the past before ``before_s`` from the trace and the logs (``history_s``)."""
        if before_s <= self._forgotten_s + self.config.history_s / 2:
            return  # at most every half history: the lists' deletions stay cheap
        self._trace.forget(before_s)
        # keep the last counter value before the horizon: a read just after it needs it
        first = max(0, bisect.bisect_right(self._counter_log, (before_s, math.inf)) - 1)
        del self._counter_log[:first]
        del self._sample_log[: bisect.bisect_left(self._sample_log, before_s, key=lambda s: s.t_s)]
        self._forgotten_s = before_s

    def _noise(self) -> float:
        return float(self._rng.normal(0.0, self.config.noise_w))

    def _update_counter(self, u_s: float) -> None:
        c = self.config
        # a window as long as the period means full coverage: the whole interval since
        # the last update, whatever its jitter
        full = c.sensor_window_s >= c.counter_period_s
        start_s = self._last_update_s if full else u_s - c.sensor_window_s
        sensed_w = self._trace.mean_w(start_s, u_s) + self._noise()
        self._counter_mj += sensed_w * (u_s - self._last_update_s) * 1e3
        self._instant_w = sensed_w
        self._average_w = self._trace.mean_w(u_s - 1.0, u_s)
        self._last_update_s = u_s
        self._counter_log.append((u_s, self._counter_mj))
        gap = c.counter_period_s + self._rng.normal(0.0, c.counter_jitter_s)
        self._next_update_s = u_s + max(gap, 0.5 * c.counter_period_s)

    def _take_sample(self, s_s: float) -> None:
        c = self.config
        mean_w = self._trace.mean_w(s_s - c.sample_period_s, s_s) + self._noise()
        sample = PowerSample(s_s, round(mean_w * 1e3) / 1e3)
        self._samples.append(sample)
        self._sample_log.append(sample)
        gap = c.sample_period_s + self._rng.uniform(-c.sample_jitter_s, c.sample_jitter_s)
        self._next_sample_s = s_s + gap

    def _check_faults(self, energy: bool, what: str | None = None) -> None:
        now = self.clock.now()
        what = what or ("the energy counter" if energy else "a board query")
        power = what in _POWER_READS
        uuid = self.config.uuid
        for at_s, fault in list(self._faults):
            if at_s > now or now >= self._fault_ends.get(fault, math.inf):
                continue
            if fault is Fault.GPU_LOST:
                raise errors.GpuLost(f"the GPU was lost while reading {what} of {uuid} (simulated)")
            if fault is Fault.NOT_SUPPORTED and power:
                raise errors.NotSupported(f"{what} of {uuid} is not supported on this board (simulated)")
            if fault is Fault.NOT_READY and power:
                raise errors.NotReady(f"{what} of {uuid}: counter not ready (simulated)")
            if fault is Fault.NO_PROCESS_LIST and what == _PROCESSES:
                raise errors.NotSupported(f"the driver lacks the function that lists {what} (simulated)")
            if fault is Fault.COUNTER_BACKWARDS:
                self._counter_offset_mj -= 5000.0
                self._faults.remove((at_s, fault))
            if fault is Fault.COUNTER_RESET:
                self._counter_offset_mj = -self._counter_mj
                self._faults.remove((at_s, fault))

    def _raise_at(self, fault: Fault, at_s: float) -> None:
        """Raise ``fault``'s error as a live energy read at its time would."""
        faults, self._faults = self._faults, [(at_s, fault)]
        try:
            self._check_faults(energy=True)
        finally:
            self._faults = faults

    def _read_cost_s(self) -> float:
        c = self.config
        if self._rng.random() < c.read_spike_p:
            return c.read_spike_s
        return c.read_latency_s + float(self._rng.exponential(c.read_latency_tail_s))

    # -- the Board protocol --------------------------------------------------
    def identity(self) -> BoardIdentity:
        """A fixed identity with ``simulated=True``."""
        return BoardIdentity(
            name=self.config.name,
            uuid=self.config.uuid,
            pci_bus_id="00000000:00:00.0",
            driver="simulated",
            vbios="",
            power_limit_w=self.config.power_limit_w,
            memory_total_mib=143771.0,
            simulated=True,
        )

    @_locked
    def energy_mj(self) -> int:
        """Counter value, mJ; the value is the one at the start of the read's latency."""
        self._advance(self.clock.now())
        self._check_faults(energy=True)
        value = int(self._counter_mj + self._counter_offset_mj)
        self.energy_reads += 1
        cost = self._read_cost_s()
        self._extra_w += self.config.polling_extra_w
        self.clock.sleep(cost)
        self._advance(self.clock.now())
        self._extra_w -= self.config.polling_extra_w
        return value

    def _field(self, name: str) -> float:
        # advanced before the field is read: its value is the last update's as of now, not as of
        # the board's previous read (a helper's first read after 5 s at 421 W said 78.7 W)
        self._advance(self.clock.now())
        self._check_faults(energy=False, what="power")
        value_w = getattr(self, name)
        self.clock.sleep(self.config.field_read_s)
        return round(value_w * 1e3) / 1e3

    @_locked
    def power_instant_w(self) -> float:
        """Sensed power of the last counter update, W."""
        return self._field("_instant_w")

    @_locked
    def power_average_w(self) -> float:
        """~1 s average as of the last counter update, W."""
        return self._field("_average_w")

    @_locked
    def power_samples(self, since_s: float | None = None) -> tuple[PowerSample, ...]:
        """The sample buffer, oldest first."""
        self._advance(self.clock.now())
        self._check_faults(energy=False, what="the power-sample buffer")
        self.clock.sleep(self.config.samples_read_s)
        return tuple(s for s in self._samples if since_s is None or s.t_s > since_s)

    @_locked
    def clock_samples(self, since_s: float | None = None) -> tuple[ClockSample, ...]:
        """SM-clock samples at the power samples' times, oldest first.

        Boost where a sample drew more than 10 W above the context's idle, the idle clock
        otherwise: no model of the clocks at the power cap.
        """
        c = self.config
        busy_w = c.idle_context_w + 10.0
        return tuple(
            ClockSample(s.t_s, c.sm_boost_mhz if s.power_w > busy_w else c.sm_idle_mhz)
            for s in self.power_samples(since_s)
        )

    @_locked
    def replay_power_samples(self, at_s: float) -> tuple[PowerSample, ...]:
        """The sample buffer as a read at ``at_s`` would have returned it, oldest first.

        The twin of :meth:`replay_counter_reads` for the buffer: a poller thread reads it
        at ``at_s`` while the caller works on; a virtual clock lets the meter ask only later,
        when the buffer may have moved on (it holds ``sample_buffer_len`` samples, ~2.4 s).
        A time not yet reached is read as :meth:`power_samples` reads now.
        """
        if at_s >= self.clock.now():
            return self.power_samples()
        self._check_kept(at_s)
        self._check_faults(energy=False, what="the power-sample buffer")
        end = bisect.bisect_right(self._sample_log, at_s, key=lambda s: s.t_s)
        return tuple(self._sample_log[max(0, end - self.config.sample_buffer_len) : end])

    @_locked
    def utilization(self) -> Utilization:
        """100% under load, 0 otherwise."""
        self._advance(self.clock.now())
        self._check_faults(energy=False, what="utilisation")
        busy = 100.0 if self._load_w > 0 and not self._frozen else 0.0
        return Utilization(busy, busy / 2)

    @_locked
    def compute_process_count(self) -> int:
        """1 while a context is open, plus :attr:`other_pids`."""
        return len(self.compute_pids())

    @_locked
    def compute_pids(self) -> tuple[int, ...]:
        """The context's holder (the pid given to :meth:`set_context`) and :attr:`other_pids`."""
        self._check_faults(energy=False, what=_PROCESSES)
        return checked_pids(((self._context_pid,) if self._context else ()) + tuple(self.other_pids))

    @_locked
    def state(self) -> BoardState:
        """Clocks, temperature and reasons from the model (power cap when the limit binds)."""
        self._advance(self.clock.now())
        c, now = self.config, self.clock.now()
        busy = self._level_load_w > 0 and not self._frozen
        # the run's level is demand too: a limit that clips only the upper level binds (a breaker's trial)
        demand_w = self._level_idle_w + self._level_load_w * self._run_level
        capped = busy and demand_w > self._target_w + 1e-9
        # power goes roughly as the cube of the clock at the cap (voltage follows frequency)
        sm_mhz = c.sm_boost_mhz * (self._target_w / demand_w) ** (1 / 3) if capped else c.sm_boost_mhz
        reasons = 0x4 if capped else (0 if busy else 0x1)
        return BoardState(
            now, sm_mhz if busy else c.sm_idle_mhz, c.memory_mhz, self._temperature(now), reasons
        )

    def _steady_c(self, power_w: float) -> float:
        return self.config.ambient_c + self.config.c_per_w * power_w

    def _temperature(self, now_s: float) -> float:
        """First-order thermal response to the mean power since the last reading, °C."""
        dt_s = now_s - self._temperature_at_s
        if dt_s > 0:
            steady = self._steady_c(self._trace.mean_w(self._temperature_at_s, now_s))
            self._temperature_c += (steady - self._temperature_c) * (
                1 - math.exp(-dt_s / self.config.thermal_tau_s)
            )
            self._temperature_at_s = now_s
        return round(self._temperature_c)
