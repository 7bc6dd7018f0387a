"""The one module that talks to NVML.

Everything NVML can do wrong becomes an :mod:`nvmeter.errors` exception here, raised
``from`` the original, with a one-line cause. CUDA device indices are mapped to
NVML handles by UUID through ``CUDA_VISIBLE_DEVICES``, since NVML enumerates in PCI
order and ignores that variable (docs/facts.md; NVML API reference).
"""

from __future__ import annotations

import functools
import os
import sys
import time
import warnings
from collections.abc import Callable
from typing import TypeVar

from nvmeter import errors
from nvmeter.boards.protocol import BoardIdentity, BoardState, PowerSample, Utilization
from nvmeter.clock import Clock, RealClock

T = TypeVar("T")

_NO_DRIVER_HINT = (
    "no NVIDIA driver or GPU found on this machine; try --simulate to run on the simulated board"
)


@functools.cache
def _pynvml():
    """Import ``pynvml`` once, refusing the deprecated PyPI package of that name."""
    try:
        import pynvml
    except ImportError as exc:
        raise errors.NvmlUnavailable(
            "the nvidia-ml-py package is not installed (pip install nvidia-ml-py)"
        ) from exc
    _warn_if_shadowed(pynvml)
    return pynvml


def _warn_if_shadowed(module) -> None:
    """Warn loudly when ``pynvml`` comes from the deprecated ``pynvml`` distribution.

    nvidia-ml-py is NVIDIA's binding; the PyPI package ``pynvml`` is deprecated and
    its older releases ship a ``pynvml.py`` of their own that shadows it.
    """
    from importlib import metadata

    try:
        files = metadata.files("nvidia-ml-py") or []
    except metadata.PackageNotFoundError:
        files = []
    ours = {os.path.realpath(str(f.locate())) for f in files if str(f).endswith("pynvml.py")}
    if os.path.realpath(module.__file__ or "") not in ours:
        message = (
            f"nvmeter: module pynvml at {module.__file__} does not come from nvidia-ml-py; "
            "the deprecated 'pynvml' package shadows it: pip uninstall pynvml && "
            "pip install --force-reinstall nvidia-ml-py"
        )
        warnings.warn(message, RuntimeWarning, stacklevel=3)
        print(message, file=sys.stderr)


def _translate(exc: Exception, what: str) -> errors.TelemetryError:
    """Map an NVMLError to nvmeter's exception for it."""
    nv = _pynvml()
    code = getattr(exc, "value", None)
    table: dict[int, tuple[type[errors.TelemetryError], str]] = {
        nv.NVML_ERROR_LIBRARY_NOT_FOUND: (errors.NvmlUnavailable, _NO_DRIVER_HINT),
        nv.NVML_ERROR_DRIVER_NOT_LOADED: (errors.NvmlUnavailable, _NO_DRIVER_HINT),
        nv.NVML_ERROR_NOT_SUPPORTED: (
            errors.NotSupported,
            f"{what} is not supported on this board (pre-Volta, a MIG instance or a vGPU)",
        ),
        nv.NVML_ERROR_GPU_IS_LOST: (errors.GpuLost, f"the GPU was lost while reading {what}"),
        nv.NVML_ERROR_NO_PERMISSION: (
            errors.PermissionDenied,
            f"NVML refused {what}: no permission (run as a user allowed to query the GPU)",
        ),
        nv.NVML_ERROR_NOT_FOUND: (errors.DeviceNotFound, f"{what}: not found"),
        nv.NVML_ERROR_INVALID_ARGUMENT: (errors.DeviceNotFound, f"{what}: invalid device"),
    }
    cls, message = table.get(code, (errors.TelemetryError, f"NVML failed on {what}: {exc}"))
    return cls(message)


def _call(what: str, fn: Callable[..., T], *args) -> T:
    """Call an NVML function, translating its errors."""
    nv = _pynvml()
    try:
        return fn(*args)
    except nv.NVMLError as exc:
        raise _translate(exc, what) from exc


@functools.cache
def _init() -> None:
    """``nvmlInit`` once per process; NVML keeps its own reference count."""
    nv = _pynvml()
    _call("NVML initialisation", nv.nvmlInit)


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def visible_uuids() -> list[str]:
    """UUIDs of the GPUs CUDA would see, in CUDA index order.

    Returns:
        One ``GPU-…`` UUID per CUDA device index.

    Raises:
        NvmlUnavailable: no driver. NoGpu: NVML sees no GPU.
        DeviceNotFound: ``CUDA_VISIBLE_DEVICES`` names a GPU that does not exist.

    """
    _init()
    nv = _pynvml()
    count = _call("the device count", nv.nvmlDeviceGetCount)
    if count == 0:
        raise errors.NoGpu("NVML sees no GPU on this machine; try --simulate")
    all_uuids = [
        _text(_call("a UUID", nv.nvmlDeviceGetUUID, _call("a handle", nv.nvmlDeviceGetHandleByIndex, i)))
        for i in range(count)
    ]
    spec = os.environ.get("CUDA_VISIBLE_DEVICES")
    if spec is None:
        return all_uuids
    return [_match_visible(entry.strip(), all_uuids) for entry in _visible_entries(spec)]


def _visible_entries(spec: str) -> list[str]:
    # CUDA stops at the first invalid entry; "-1" or "" hides every GPU.
    entries = []
    for entry in spec.split(","):
        entry = entry.strip()
        if not entry or entry.startswith("-"):
            break
        entries.append(entry)
    return entries


def _match_visible(entry: str, all_uuids: list[str]) -> str:
    if entry.isdigit():
        index = int(entry)
        if index >= len(all_uuids):
            raise errors.DeviceNotFound(
                f"CUDA_VISIBLE_DEVICES names GPU {index} but this machine has {len(all_uuids)}"
            )
        return all_uuids[index]
    if entry.startswith("MIG-"):
        raise errors.NotSupported(
            f"{entry} is a MIG instance: MIG instances have no energy counter of their own"
        )
    hits = [u for u in all_uuids if u.startswith(entry if entry.startswith("GPU-") else f"GPU-{entry}")]
    if len(hits) != 1:
        raise errors.DeviceNotFound(f"CUDA_VISIBLE_DEVICES entry {entry!r} matches {len(hits)} GPUs")
    return hits[0]


def resolve_uuid(device: int | str | None) -> str:
    """The UUID of a device named by CUDA index, UUID (or unique prefix), or None (index 0).

    Raises:
        DeviceNotFound: no such index or UUID. UsageError: a malformed spec.

    """
    uuids = visible_uuids()
    if device is None:
        device = 0
    if isinstance(device, str) and device.strip().isdigit():
        device = int(device)
    if isinstance(device, int):
        if not 0 <= device < len(uuids):
            raise errors.DeviceNotFound(
                f"no GPU with CUDA index {device}: {len(uuids)} visible (indices 0-{len(uuids) - 1})"
            )
        return uuids[device]
    if not isinstance(device, str) or not device.startswith(("GPU-", "MIG-")):
        raise errors.UsageError(f"--device must be a CUDA index or a GPU-… UUID, not {device!r}")
    if device.startswith("MIG-"):
        raise errors.NotSupported(f"{device} is a MIG instance: it has no energy counter of its own")
    hits = [u for u in uuids if u.startswith(device)]
    if len(hits) != 1:
        raise errors.DeviceNotFound(f"{device} matches {len(hits)} visible GPUs")
    return hits[0]


class NvmlBoard:
    """A real GPU through NVML. Implements :class:`nvmeter.boards.protocol.Board`.

    Args:
        device: CUDA index (``CUDA_VISIBLE_DEVICES`` respected), ``GPU-…`` UUID or
            unique prefix, or None for index 0.
        clock: The clock sample timestamps are mapped onto (default: real).

    Raises:
        NvmlUnavailable, NoGpu, DeviceNotFound, NotSupported, PermissionDenied.

    """

    def __init__(self, device: int | str | None = None, clock: Clock | None = None) -> None:
        self.clock = clock or RealClock()
        self.uuid = resolve_uuid(device)
        nv = _pynvml()
        self._handle = _call(f"GPU {self.uuid}", nv.nvmlDeviceGetHandleByUUID, self.uuid.encode())
        self._identity: BoardIdentity | None = None
        self._sample_offset_s: float | None = None

    def __repr__(self) -> str:
        return f"NvmlBoard({self.uuid})"

    def identity(self) -> BoardIdentity:
        """Name, UUID, PCI bus id, driver, VBIOS, power limit (W) and memory (MiB)."""
        if self._identity is None:
            nv, h = _pynvml(), self._handle
            try:
                vbios = _text(_call("the VBIOS version", nv.nvmlDeviceGetVbiosVersion, h))
            except errors.NotSupported:
                vbios = ""
            self._identity = BoardIdentity(
                name=_text(_call("the name", nv.nvmlDeviceGetName, h)),
                uuid=self.uuid,
                pci_bus_id=_text(_call("the PCI info", nv.nvmlDeviceGetPciInfo, h).busId),
                driver=_text(_call("the driver version", nv.nvmlSystemGetDriverVersion)),
                vbios=vbios,
                power_limit_w=_call("the power limit", nv.nvmlDeviceGetEnforcedPowerLimit, h) / 1e3,
                memory_total_mib=_call("the memory info", nv.nvmlDeviceGetMemoryInfo, h).total / 2**20,
            )
        return self._identity

    def energy_mj(self) -> int:
        """Total energy counter, mJ."""
        nv = _pynvml()
        return int(_call("the energy counter", nv.nvmlDeviceGetTotalEnergyConsumption, self._handle))

    def _field_w(self, field_id: int, what: str) -> float:
        nv = _pynvml()
        (value,) = _call(what, nv.nvmlDeviceGetFieldValues, self._handle, [field_id])
        if value.nvmlReturn != nv.NVML_SUCCESS:
            raise _translate(nv.NVMLError(value.nvmlReturn), what)
        return value.value.uiVal / 1e3

    def power_instant_w(self) -> float:
        """Field ``NVML_FI_DEV_POWER_INSTANT``, W."""
        return self._field_w(_pynvml().NVML_FI_DEV_POWER_INSTANT, "instant power")

    def power_average_w(self) -> float:
        """Field ``NVML_FI_DEV_POWER_AVERAGE``, W."""
        return self._field_w(_pynvml().NVML_FI_DEV_POWER_AVERAGE, "average power")

    def power_samples(self, since_s: float | None = None) -> tuple[PowerSample, ...]:
        """The driver's power-sample buffer (``NVML_TOTAL_POWER_SAMPLES``), oldest first.

        Timestamps come from NVML in microseconds of the host's wall clock; they are
        mapped onto ``self.clock``. An empty buffer gives an empty tuple.
        """
        nv = _pynvml()
        try:
            _, raw = nv.nvmlDeviceGetSamples(self._handle, nv.NVML_TOTAL_POWER_SAMPLES, 0)
        except nv.NVMLError as exc:
            if getattr(exc, "value", None) == nv.NVML_ERROR_NOT_FOUND:
                return ()
            raise _translate(exc, "the power-sample buffer") from exc
        offset = self._offset_s(raw[-1].timeStamp if raw else None)
        samples = sorted(
            (PowerSample(s.timeStamp * 1e-6 - offset, s.sampleValue.uiVal / 1e3) for s in raw),
            key=lambda s: s.t_s,
        )
        return tuple(s for s in samples if since_s is None or s.t_s > since_s)

    def _offset_s(self, latest_us: int | None) -> float:
        # NVML stamps samples with the host's wall clock (us); map them onto our
        # monotonic clock. Decide once, from the first stamp, which clock it is.
        if self._sample_offset_s is None and latest_us is not None:
            wall_minus_mono = time.time() - self.clock.now()
            stamp_s = latest_us * 1e-6
            near_wall = abs(stamp_s - time.time()) < 3600
            self._sample_offset_s = wall_minus_mono if near_wall else 0.0
        return self._sample_offset_s or 0.0

    def utilization(self) -> Utilization:
        """GPU and memory utilisation, percent."""
        nv = _pynvml()
        u = _call("utilisation", nv.nvmlDeviceGetUtilizationRates, self._handle)
        return Utilization(float(u.gpu), float(u.memory))

    def compute_process_count(self) -> int:
        """Processes holding a compute context on this board."""
        return len(self._compute_processes())

    def compute_pids(self) -> tuple[int, ...]:
        """Process ids of the processes holding a compute context (the driver's pid namespace)."""
        return tuple(int(p.pid) for p in self._compute_processes())

    def _compute_processes(self) -> list:
        nv = _pynvml()
        return _call("the compute processes", nv.nvmlDeviceGetComputeRunningProcesses, self._handle)

    def state(self) -> BoardState:
        """SM and memory clocks (MHz), GPU temperature (°C), clock-event reasons (bitmask).

        Each is one cheap NVML query (microseconds, no counter read); a query the board
        does not support reads nan (or -1 for the reasons) rather than failing the window.
        """
        nv, h = _pynvml(), self._handle
        t_s = self.clock.now()
        # the bindings renamed "throttle" to "clocks event" reasons (nvidia-ml-py 12.535+)
        reasons_fn = getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None)
        reasons_fn = reasons_fn or nv.nvmlDeviceGetCurrentClocksThrottleReasons
        return BoardState(
            t_s,
            self._optional("the SM clock", nv.nvmlDeviceGetClockInfo, h, nv.NVML_CLOCK_SM),
            self._optional("the memory clock", nv.nvmlDeviceGetClockInfo, h, nv.NVML_CLOCK_MEM),
            self._optional("the temperature", nv.nvmlDeviceGetTemperature, h, nv.NVML_TEMPERATURE_GPU),
            int(self._optional("the clock-event reasons", reasons_fn, h, default=-1)),
        )

    @staticmethod
    def _optional(what: str, fn, *args, default: float = float("nan")) -> float:
        try:
            return float(_call(what, fn, *args))
        except errors.NotSupported:
            return default
