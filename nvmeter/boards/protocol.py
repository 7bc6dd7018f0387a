"""The `Board` protocol: every query nvmeter makes of a GPU's telemetry.

Two implementations exist: :class:`nvmeter.boards.nvml.NvmlBoard` (a real GPU, the only
code that imports ``pynvml``) and :class:`nvmeter.boards.simulated.SimulatedBoard` (a model
of one on a virtual clock, for tests and ``--simulate``). Probes, windows and the
scorer see only this protocol.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from nvmeter import errors
from nvmeter.clock import Clock


@dataclass(frozen=True)
class BoardIdentity:
    """Who the board is; recorded in every JSON record nvmeter writes.

    Attributes:
        name: Marketing name as NVML reports it, e.g. ``"NVIDIA H200"``.
        uuid: ``GPU-…`` UUID; the key that ties records and CUDA devices to a board.
        pci_bus_id: PCI bus id, e.g. ``"00000000:00:05.0"``.
        driver: Driver version string.
        vbios: VBIOS version string (``""`` where the board hides it).
        power_limit_w: Enforced power limit, W.
        memory_total_mib: Device memory, MiB.
        simulated: True for the simulated board.

    """

    name: str
    uuid: str
    pci_bus_id: str
    driver: str
    vbios: str
    power_limit_w: float
    memory_total_mib: float
    simulated: bool = False

    @property
    def energy_scope(self) -> str:
        """What the energy counter covers: ``"module"`` or ``"board"``.

        ``"module"`` on Grace Hopper (a name with ``GH200``): there the counter covers the
        whole module, the Grace CPU and the memory as well as the GPU (docs/facts.md), so
        energy "above idle" includes what the CPU and memory drew. ``"board"`` elsewhere.
        """
        return "module" if "GH200" in self.name.upper() else "board"

    @property
    def scope_note(self) -> str:
        """``"module-wide: GPU, CPU and memory"`` for a module-scope counter, else ``""``."""
        return "module-wide: GPU, CPU and memory" if self.energy_scope == "module" else ""

    @property
    def short(self) -> str:
        """``"H200 GPU-a6f4…"``: the name without the vendor, an abbreviated UUID, a module-wide scope."""
        text = f"{self.name.removeprefix('NVIDIA ')} {self.uuid[:8]}…"
        return f"{text}, energy {self.scope_note}" if self.scope_note else text

    def made_elsewhere(self, path: object, uuid: object, remedy: str) -> errors.RecordError:
        """The error for a record at ``path`` made on board ``uuid``, not on this one.

        ``remedy`` says what to give instead on a real board; a simulated board's hint says how
        to keep one UUID, since each ``SimulatedBoard()`` of a process takes the next (a new
        user's trial, 2026-12-06: a probe made on one instance was refused on the next).
        """
        if self.simulated:  # the CLI's way first: SimConfig is Python's only
            remedy = (
                "make one on the simulated board (`nvmeter probe --simulate --out probe.json`), or in "
                f"Python give the board that UUID with SimConfig(uuid={uuid!r})"
            )
        return errors.RecordError(f"{path} was made on {uuid}, not on this board {self.uuid}: {remedy}")

    def to_dict(self) -> dict:
        """Plain dict for JSON, with the energy scope (derived from the name; not read back)."""
        return {**self.__dict__, "energy_scope": self.energy_scope}

    @classmethod
    def from_dict(cls, data: dict) -> BoardIdentity:
        """Inverse of :meth:`to_dict`; every field is required (older records are upgraded first)."""
        return cls(**{k: data[k] for k in cls.__dataclass_fields__})


@dataclass(frozen=True)
class PowerSample:
    """One entry of the driver's power-sample buffer.

    Attributes:
        t_s: When the driver took it, s, on the board's clock (the same timebase as
            ``board.clock.now()``).
        power_w: Board power, W.

    """

    t_s: float
    power_w: float


@dataclass(frozen=True)
class ClockSample:
    """One entry of the driver's SM-clock sample buffer (``NVML_PROCESSOR_CLK_SAMPLES``).

    An optional signal: boards that have it offer ``clock_samples(since_s)`` beside the
    :class:`Board` protocol (the bench reads it to see the clocks inside a window, not only
    at its edges).

    Attributes:
        t_s: When the driver took it, s, on the board's clock.
        sm_clock_mhz: SM (processor) clock, MHz.
    """

    t_s: float
    sm_clock_mhz: float


@dataclass(frozen=True)
class Utilization:
    """Utilisation over the driver's last sample period, percent (0-100)."""

    gpu_pct: float
    memory_pct: float


# The largest pid Linux gives (PID_MAX_LIMIT, include/linux/threads.h: 4 Mi on 64-bit). A list with a
# pid outside 1..this is no process list: nvidia-ml-py built for another driver reads its structs
# misaligned and lists 0 and 4294967295 (nvitop issue 75), which made os.kill raise out of a window,
# and nvmeter run name 4294967295 as another process (a breaker and a review, 2026-12-07).
PID_MAX_LIMIT = 4 * 1024 * 1024


def checked_pids(pids) -> tuple[int, ...]:
    """``pids`` as a board lists its compute processes, each one a process can have.

    Raises:
        NotSupported: a pid outside 1..:data:`PID_MAX_LIMIT` (the list is misread, not known).
    """
    pids = tuple(int(pid) for pid in pids)
    bad = [pid for pid in pids if not 0 < pid <= PID_MAX_LIMIT]
    if bad:
        raise errors.NotSupported(
            f"the driver listed compute processes with pids no process can have ({bad[0]}): the NVML "
            "bindings misread its list (nvidia-ml-py built for another driver?)"
        )
    return pids


# NVML's clock-event reasons (nvml.h, nvmlClocksEventReason*): bit -> name.
CLOCK_EVENT_REASONS = {
    0x1: "gpu_idle",
    0x2: "applications_clocks",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal",
    0x40: "hw_thermal",
    0x80: "hw_power_brake",
    0x100: "display_clocks",
}
# The software power cap: the limiter error model 10's spread was measured under.
SW_POWER_CAP = 0x4
# The reasons that mean the board is holding its clocks down for power or heat.
LIMITING_REASONS = SW_POWER_CAP | 0x8 | 0x20 | 0x40 | 0x80


@dataclass(frozen=True)
class BoardState:
    """The board's operating state at one moment: clocks, temperature, why clocks are held.

    Attributes:
        t_s: When it was read, s on the board's clock.
        sm_clock_mhz: Streaming-multiprocessor clock, MHz (nan where the board hides it).
        memory_clock_mhz: Memory clock, MHz (nan where hidden).
        temperature_c: GPU temperature, °C (nan where hidden).
        clock_event_reasons: NVML's clock-event reason bitmask (``CLOCK_EVENT_REASONS``;
            -1 where the board does not report it).

    """

    t_s: float
    sm_clock_mhz: float
    memory_clock_mhz: float
    temperature_c: float
    clock_event_reasons: int

    @property
    def reasons(self) -> tuple[str, ...]:
        """Names of the reasons set (empty when none or unknown)."""
        if self.clock_event_reasons < 0:
            return ()
        return tuple(name for bit, name in CLOCK_EVENT_REASONS.items() if self.clock_event_reasons & bit)

    @property
    def limited(self) -> bool:
        """True when power or heat holds the clocks down (power cap, thermal, slowdown, brake)."""
        return self._any_of(LIMITING_REASONS)

    @property
    def power_capped(self) -> bool:
        """True when the software power cap holds the clocks down (``SW_POWER_CAP``)."""
        return self._any_of(SW_POWER_CAP)

    def _any_of(self, reasons: int) -> bool:
        # a negative bitmask is no reading at all (a board that keeps no reasons), not every reason
        return self.clock_event_reasons > 0 and bool(self.clock_event_reasons & reasons)

    def to_dict(self) -> dict:
        """Plain dict for JSON."""
        return dict(self.__dict__)

    @classmethod
    def from_dict(cls, data: dict) -> BoardState:
        """Inverse of :meth:`to_dict` (JSON null -> nan); the ranges are checked by ``meter.sanity``."""
        nan = float("nan")
        return cls(
            float(data["t_s"]),
            nan if data["sm_clock_mhz"] is None else float(data["sm_clock_mhz"]),
            nan if data["memory_clock_mhz"] is None else float(data["memory_clock_mhz"]),
            nan if data["temperature_c"] is None else float(data["temperature_c"]),
            int(data["clock_event_reasons"]),
        )


@runtime_checkable
class Board(Protocol):
    """A GPU's telemetry, as nvmeter uses it.

    Every method may raise a :class:`nvmeter.errors.TelemetryError` subclass:
    ``NotSupported`` where the board lacks the signal, ``GpuLost`` when the GPU is
    gone, ``PermissionDenied`` where NVML refuses.
    """

    clock: Clock

    def identity(self) -> BoardIdentity:
        """Name, UUID, PCI bus id, driver, VBIOS, power limit and memory."""
        ...

    def energy_mj(self) -> int:
        """Total energy counter since the driver loaded, mJ (steps every ~100 ms)."""
        ...

    def power_instant_w(self) -> float:
        """Field ``NVML_FI_DEV_POWER_INSTANT``, W."""
        ...

    def power_average_w(self) -> float:
        """Field ``NVML_FI_DEV_POWER_AVERAGE`` (about a 1 s average), W."""
        ...

    def power_samples(self, since_s: float | None = None) -> tuple[PowerSample, ...]:
        """The driver's power-sample buffer, oldest first, newer than ``since_s``."""
        ...

    def utilization(self) -> Utilization:
        """GPU and memory utilisation, percent."""
        ...

    def compute_process_count(self) -> int:
        """Number of processes holding a compute context on this board."""
        ...

    def state(self) -> BoardState:
        """Clocks (MHz), temperature (°C) and clock-event reasons now; cheap reads only."""
        ...

    def compute_pids(self) -> tuple[int, ...]:
        """Process ids of the processes holding a compute context on this board.

        NVML reports them in the driver's view: inside a container with its own pid
        namespace they may not match ``os.getpid()`` of the processes there.
        """
        ...


def cuda_index(spec) -> int | None:
    """The CUDA index a device spec names (``2``, ``"2"``, ``" 2 "``), or None for anything else.

    ASCII digits only: ``str.isdigit`` takes other scripts' digits too (``"٠"``), which nobody
    types for a board on purpose. One reading for the CLI's ``--device``, NVML's and the
    simulated host's.
    """
    if isinstance(spec, int) and not isinstance(spec, bool):
        return spec
    if isinstance(spec, str) and spec.strip().isascii() and spec.strip().isdigit():
        return int(spec.strip())
    return None


def device_spec(spec, what: str = "a device") -> int | str | None:
    """A device spec in its one form: None (the default board), a CUDA index, or a ``GPU-``/``MIG-`` UUID.

    The CLI's ``--device``, NVML's lookup and the simulated host's each read it so (three
    copies had drifted: a review).

    ``what`` names the spec in the message (the CLI's ``"--device"``).

    Raises:
        UsageError: anything else (``"all"`` included: the callers that take it look first,
            :func:`names_all`), said before any board is asked.
    """
    if spec is None:
        return None
    index = cuda_index(spec)
    if index is not None and index >= 0:
        return index
    uuid = spec.strip() if index is None and isinstance(spec, str) else ""
    if uuid.startswith(("GPU-", "MIG-")) and len(uuid) > 4:
        return uuid
    raise errors.UsageError(f"{what} must be a CUDA index (0, 1, …) or a GPU-… UUID, not {spec!r}")


def names_all(spec) -> bool:
    """Whether a device spec asks for every board (``"all"``, in any case, spaces around it)."""
    return isinstance(spec, str) and spec.strip().casefold() == "all"
