"""nvmeter's exceptions: each carries one line a user can act on.

The CLI prints ``str(error)`` on one line and exits with ``error.exit_code``;
nothing below a :class:`NvmeterError` ever reaches the user as a traceback.
"""

from __future__ import annotations


class NvmeterError(Exception):
    """Base of every error nvmeter raises on purpose.

    Attributes:
        exit_code: The CLI's exit status for this error (the README lists them).

    """

    exit_code = 2


class UsageError(NvmeterError):
    """Bad input from the caller: an argument, a file, a path."""

    exit_code = 2


class RecordError(UsageError):
    """A JSON record is unreadable, of an unknown schema, or of another board."""


class NewerRecord(RecordError):
    """A JSON record of a version a newer nvmeter wrote: kept, never replaced by this one's."""


class RecordKept(UsageError):
    """A record was not written at its path, which another process wrote at meanwhile; it is kept beside.

    Attributes:
        kept: Where the record is (``PATH.PID.conflict``).
    """

    def __init__(self, message: str, kept) -> None:
        super().__init__(message)
        self.kept = kept


class MissingPackage(NvmeterError):
    """An optional package this feature needs is not installed; the line names the pip command.

    Not bad input (exit 2): the same arguments work once the package is there.
    """

    exit_code = 5


class CommandNotFound(UsageError):
    """``nvmeter run`` was given a command that does not exist (exit 127, as a shell and env(1))."""

    exit_code = 127


class CommandNotExecutable(UsageError):
    """``nvmeter run`` was given a file it may not execute (exit 126, as a shell and env(1))."""

    exit_code = 126


class TelemetryError(NvmeterError):
    """NVML could not give what was asked; the subclasses say why."""

    exit_code = 3


class NvmlUnavailable(TelemetryError):
    """No NVIDIA driver or NVML library on this machine."""


class NoGpu(TelemetryError):
    """NVML works but sees no GPU."""


class DeviceNotFound(TelemetryError):
    """The index or UUID names no GPU that NVML (or CUDA_VISIBLE_DEVICES) exposes."""


class NotSupported(TelemetryError):
    """The board lacks this signal (pre-Volta, a MIG instance, a vGPU)."""


class NotReady(TelemetryError):
    """NVML kept answering NOT_READY (a board that just started): try again in a moment.

    Not :class:`NotSupported`: the board has the signal, it is not ready yet.
    """


class GpuLost(TelemetryError):
    """The GPU fell off the bus or needs a reset; nothing it reports can be trusted."""


class PermissionDenied(TelemetryError):
    """NVML refused the query for lack of privilege."""


class CounterFault(TelemetryError):
    """The energy counter went backwards or reset inside a measurement."""


class WorkerError(NvmeterError):
    """The GPU worker process failed, timed out or died."""

    exit_code = 4


class DistributedError(NvmeterError):
    """A rank of a distributed window could not meter its boards, or did not arrive in time."""

    exit_code = 4


class NvmeterWarning(UserWarning):
    """Something a user should know that does not stop the command (a check left unknown).

    The CLI prints each as one line, ``nvmeter: warning: …``, on stderr.
    """
