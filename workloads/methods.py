"""The MLP and Ladder methods, their difficulty and their A100 figures (docs/task.md)."""

from __future__ import annotations

import importlib
import importlib.util
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from nvmeter import errors
from nvmeter.workloads import versions

if TYPE_CHECKING:  # the harness imports torch; the scorer reads this registry without it
    from nvmeter.workloads.harness import Method


@dataclass(frozen=True)
class MethodSpec:
    """One method of the benchmark.

    Attributes:
        name: Module name under ``nvmeter.workloads``.
        title: What it is, in a few words.
        difficulty: The level it must pass (1..5).
        a100_ms: Per-call time on an A100-80GB, ms (docs/task.md, median of 3 runs).
        a100_mnist: MNIST accuracy on the A100 runs, fraction.

    """

    name: str
    title: str
    difficulty: int
    a100_ms: float
    a100_mnist: float
    family: str | None = None

    @property
    def module(self) -> str:
        """The module that defines it: ``nvmeter.workloads.FAMILY`` or ``nvmeter.workloads.NAME``."""
        return f"nvmeter.workloads.{self.family or self.name}"

    def sources(self, scheme: int = versions.SCHEME) -> dict[str, str]:
        """Its version: {module: sha256 of its code} of its module and every workloads module it imports.

        Hashed as ``scheme`` says (a record made with an earlier one is compared so). See
        :mod:`nvmeter.workloads.versions`.
        """
        origin = importlib.util.find_spec(self.module).origin
        return dict(versions.source_closure(self.module, Path(origin).read_bytes(), scheme))

    def load(self) -> Method:
        """Import the method: ``NAME.method``, or ``FAMILY.METHODS[NAME]``."""
        module = importlib.import_module(self.module)
        return module.METHODS[self.name] if self.family else module.method


METHODS = {
    m.name: m
    for m in (
        MethodSpec("mlp_fp32", "example eager MLP, full FP32", 1, 762.4, 0.9677),
        MethodSpec("mlp_tf32", "eager MLP, TF32, 100 steps", 1, 191.3, 0.9498),
        MethodSpec("graph_mlp", "CUDA-graph MLP", 1, 61.6, 0.9503),
        MethodSpec("graph_ensemble", "CUDA-graph ensemble of 4", 2, 252.1, 0.9687),
        MethodSpec("eager_ensemble", "eager ensemble of 16", 2, 927.3, 0.9678),
        MethodSpec("ladder_d3_plain", "Ladder, sampled (plain PyTorch)", 3, 1443.3, 0.9759, "ladder"),
        MethodSpec("ladder_d3_fused", "Ladder, sampled (fused Triton)", 3, 1443.3, 0.9759, "ladder"),
        MethodSpec("ladder_d4_plain", "Ladder, sampled (plain PyTorch)", 4, 2882.5, 0.9785, "ladder"),
        MethodSpec("ladder_d4_fused", "Ladder, sampled (fused Triton)", 4, 2882.5, 0.9785, "ladder"),
        MethodSpec("ladder_d3_fast", "Ladder, sampled (faster fused Triton)", 3, 1443.3, 0.9759, "ladder"),
        MethodSpec("ladder_d4_fast", "Ladder, sampled (faster fused Triton)", 4, 2882.5, 0.9785, "ladder"),
        MethodSpec("graph_mlp_flat", "CUDA-graph MLP, one-kernel AdamW+EMA", 1, 61.6, 0.9503),
    )
}


def spec(name: str) -> MethodSpec:
    """The method called ``name``.

    Raises:
        UsageError: no such method.

    """
    try:
        return METHODS[name]
    except KeyError:
        raise errors.UsageError(f"unknown method {name!r}; known: {', '.join(METHODS)}") from None
