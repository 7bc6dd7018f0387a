"""The CUDA-graph MLP's call on the GPU: one step a graph against many, timed and profiled (issue 16).

From the repository root on one H200 (bench/device/speed_h200.sh runs it):

    python bench/graph_mlp_step.py --out results/graph-mlp-step-h200

Per variant (``steps_per_graph`` 1, the seed's graph_mlp; 10; 200), on a synthetic
draw of the task's shapes (10,000 training rows of 60 features, 10,000 test rows; accuracy is the
scorer's business, not this bench's):

* ``calls``: 5 warm-up calls (the first captures), then 30 calls timed on the host clock around a
  ``torch.cuda.synchronize()``, as the scorer times them: median, min and max ms a call.
* ``profile``: torch.profiler (CUPTI) over 3 calls: kernels a call and a step, kernel time a call,
  the span from the first kernel's start to the last one's end, the gaps between kernels, and the
  ten kernels that take the most time a call.

Measured at 3cfeff6 (results/graph-mlp-step-h200/): 31.7, 31.4 and 37.5 ms a call; one graph of 200
steps is slower, not faster, and the kernels themselves take 29 ms of the 31.7 (45 a step, a quarter of
their time in the optimiser's and the EMA's multi-tensor kernels), so the launches were never the cost.
A method with 200 steps a graph (graph_mlp_fast) was evaluated at that commit and withdrawn.

Writes ``graph_mlp_step.json`` (kind ``graph-mlp-step``, docs/formats.md) under --out, saved after
every variant.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
# bench/ is not a package; ladder_h200's helpers: the workloads import, a synthetic draw, the profiler's
# kernel times and gaps
import ladder_h200

from nvmeter.workloads import training
from nvmeter.workloads.graph_mlp import RECIPE

VARIANTS = (1, 10, 200)
WARMUP_CALLS, TIMED_CALLS, PROFILED_CALLS = 5, 30, 3


def _call(recipe, draw) -> None:
    x_tr, y_tr, x_te, _ = draw
    training.train_and_predict(recipe, True, x_tr, y_tr, x_te)


def part_calls(recipe, draw) -> dict:
    for _ in range(WARMUP_CALLS):
        _call(recipe, draw)
    torch.cuda.synchronize()
    ms = []
    for _ in range(TIMED_CALLS):
        t0 = time.perf_counter()
        _call(recipe, draw)
        torch.cuda.synchronize()
        ms.append((time.perf_counter() - t0) * 1e3)
    return {"ms": ms, "median_ms": statistics.median(ms), "min_ms": min(ms), "max_ms": max(ms)}


def part_profile(recipe, draw) -> dict:
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA, ProfilerActivity.CPU]) as prof:
        for _ in range(PROFILED_CALLS):
            _call(recipe, draw)
        torch.cuda.synchronize()
    cuda = torch.autograd.DeviceType.CUDA
    kernels = [e for e in prof.events() if e.device_type == cuda and "memcpy" not in e.name.lower()]
    kernel_us = sum(ladder_h200._kernel_us(e) for e in kernels)
    by_name: dict[str, float] = {}
    for e in kernels:
        by_name[e.name[:90]] = by_name.get(e.name[:90], 0.0) + ladder_h200._kernel_us(e) / PROFILED_CALLS
    span_us = max(e.time_range.end for e in kernels) - min(e.time_range.start for e in kernels)
    return {
        "calls": PROFILED_CALLS,
        "kernels_per_call": len(kernels) / PROFILED_CALLS,
        "kernels_per_step": len(kernels) / PROFILED_CALLS / recipe.steps,
        "kernel_us_per_call": kernel_us / PROFILED_CALLS,
        "span_us_per_call": span_us / PROFILED_CALLS,
        "gap_us_per_call": sum(ladder_h200._gaps_us(kernels)) / PROFILED_CALLS,
        "top_kernels_us_per_call": dict(sorted(by_name.items(), key=lambda kv: -kv[1])[:10]),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="folder for graph_mlp_step.json")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("no CUDA device: nothing to run", file=sys.stderr)
        return 2
    from dataclasses import replace

    from nvmeter import provenance, records

    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "graph_mlp_step.json"
    record = {
        **records.header("graph-mlp-step"),
        "provenance": provenance.collect().to_dict(),
        "gpu": torch.cuda.get_device_name(),
        "recipe": repr(RECIPE),
        "variants": {},
    }
    draw = ladder_h200.synthetic_draw(0)
    for k in VARIANTS:
        recipe = replace(RECIPE, steps_per_graph=k)
        row = {"steps_per_graph": k, "calls": part_calls(recipe, draw), "profile": part_profile(recipe, draw)}
        record["variants"][str(k)] = row
        records.write_json(path, record)
        p = row["profile"]
        print(
            f"steps_per_graph {k:>3}: {row['calls']['median_ms']:.2f} ms a call (median of {TIMED_CALLS}), "
            f"{p['kernels_per_step']:.1f} kernels a step, kernels {p['kernel_us_per_call'] / 1e3:.2f} ms, "
            f"span {p['span_us_per_call'] / 1e3:.2f} ms, gaps {p['gap_us_per_call'] / 1e3:.2f} ms a call",
            flush=True,
        )
    top = {k: v["profile"]["top_kernels_us_per_call"] for k, v in record["variants"].items()}
    print(json.dumps(top, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
