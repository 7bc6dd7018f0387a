"""What the measuring side asks of the process that holds the CUDA context.

:class:`Worker` is the interface; :class:`MatmulRun` is what a matrix-product job reports.
Two implementations: :class:`nvmeter.worker.process.WorkerProcess` (a real child process)
and :class:`nvmeter.worker.simulated.SimWorker` (the simulated board's twin).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from nvmeter import errors


@dataclass(frozen=True)
class MatmulRun:
    """What the worker did for one job.

    Attributes:
        t0_s, t1_s: Start and end on the shared monotonic clock (device synchronised), s.
        matmuls: Number of n x n x n matrix products.
        n: Matrix size.
        flops: Floating-point operations, 2 n^3 per product.
        max_abs_err: For constant operands 2^-6, max |C - n 2^-12| of the last product
            (0 = exact; at n = 4096 every entry is exactly 1).

    """

    t0_s: float
    t1_s: float
    matmuls: int
    n: int
    flops: float
    max_abs_err: float | None = None

    @property
    def duration_s(self) -> float:
        """Wall time of the job, s."""
        return self.t1_s - self.t0_s

    @property
    def tflops(self) -> float:
        """Achieved rate, TFLOP/s."""
        return self.flops / self.duration_s / 1e12 if self.duration_s > 0 else 0.0


@dataclass(frozen=True)
class MarkedRun(MatmulRun):
    """A job that also kept when each chunk of products ended (the cap-spread probe's load).

    Attributes:
        dtype: ``"fp32"`` or ``"bf16"``.
        mark_t_s: When each chunk's synchronisation returned, s on the shared monotonic clock,
            shape (k,), rising.
        mark_products: Products done by each of those times, shape (k,), rising.

    """

    dtype: str = "fp32"
    mark_t_s: tuple[float, ...] = ()
    mark_products: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        # JSON gives lists: stored as tuples, so that a record read back equals the one written;
        # text, booleans and fractions are no marks (checked where used: probes.marked.check_marks)
        for name, kind in (("mark_t_s", (int, float)), ("mark_products", int)):
            values = getattr(self, name)
            if not isinstance(values, (list, tuple)) or any(
                isinstance(v, bool) or not isinstance(v, kind) for v in values
            ):
                raise errors.RecordError(
                    f"a marked run's {name} must be a list of numbers, not {values!r:.60}"
                )
            object.__setattr__(self, name, tuple(values))


DTYPES = ("fp32", "bf16")
OPERANDS = ("constant", "random")


def check_matmul(operands: str, dtype: str) -> None:
    """Refuse a product the workers cannot run, alike in each (the simulated one raised KeyError).

    Raises:
        UsageError: ``operands`` not in :data:`OPERANDS`, or ``dtype`` not in :data:`DTYPES`.
    """
    if operands not in OPERANDS:
        raise errors.UsageError(f"operands must be {' or '.join(map(repr, OPERANDS))}, not {operands!r}")
    if dtype not in DTYPES:
        raise errors.UsageError(f"dtype must be one of {', '.join(DTYPES)}, not {dtype!r}")


# Products between the worker's synchronisations; a marked run marks each chunk's end.
CHUNK = 8


def job_run(data: dict) -> MatmulRun:
    """The run a job's reply (or a record) holds: :class:`MarkedRun` where it kept marks."""
    return MarkedRun(**data) if "mark_t_s" in data else MatmulRun(**data)


class Job(Protocol):
    """A submitted worker job."""

    def done(self) -> bool:
        """True once the result is in (never blocks)."""
        ...

    def result(self) -> MatmulRun:
        """Wait for and return the result. Raises WorkerError."""
        ...

    def stop(self) -> None:
        """End the job early, after its current chunk of products; a no-op once it is done."""
        ...


class Worker(Protocol):
    """What probes, windows and the scorer ask of the process holding the context."""

    backend: str

    def preload(self) -> None:
        """Start loading the device library (no device call, so no context), without waiting."""
        ...

    def open_context(self) -> str | None:
        """Create the device context; return the device UUID it runs on (None on CPU)."""
        ...

    def seconds_per_matmul(self, n: int) -> float:
        """Measured time of one n x n product, s."""
        ...

    def matmul(
        self,
        n: int,
        operands: str,
        *,
        seconds: float = 0.0,
        count: int = 0,
        check: bool = False,
        dtype: str = "fp32",
        marks: bool = False,
    ) -> Job:
        """Start products back to back for ``seconds`` (or exactly ``count`` of them).

        ``dtype`` ``"bf16"`` runs bfloat16 products; ``marks`` keeps when each chunk ended
        (the result is then a :class:`MarkedRun`).

        Raises:
            UsageError: as :func:`check_matmul`.
        """
        ...

    def freeze(self) -> None:
        """SIGSTOP the worker's process group (or the simulated equivalent)."""
        ...

    def resume(self) -> None:
        """SIGCONT it; a no-op when not frozen."""
        ...

    def close(self) -> None:
        """Resume, stop and reap the worker. Safe to call twice."""
        ...
