"""Window accuracy on real GPUs: nvmeter's per-call energy against long references, per kind of work.

On a two-H200 host, one process per board (bench/device/window_accuracy_x2.sh does this):
    CUDA_VISIBLE_DEVICES=0 python bench/window_accuracy.py run --kinds fp32,bf16cap --out A.json &
    CUDA_VISIBLE_DEVICES=1 python bench/window_accuracy.py run --kinds copy,duty,launch,fp32big \
        --out B.json &
Then here:
    python bench/window_accuracy.py analyze A.json B.json --json S.json --markdown M.md --plot P.png
    python bench/window_accuracy.py fit A.json --json fitted.json
    python bench/window_accuracy.py check B.json --constants fitted.json
measure() alone, 20 runs a kind (issue 10's cell; the default plan keeps 4), on one board:
    python bench/window_accuracy.py run --kinds copy,duty,fp32big --only measure --measure-runs 20 \
        --budget-s 540 --out M.json
(`--only` takes any of warm, zeus, transient, single, measure; `plan` takes both options too.)
Schema-1 files (results/window-accuracy-h200*.json, runs 1 and 2) still analyze and fit.
The package is bench/accuracy/ (its __init__ lists the modules).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from accuracy.cli import analyze, fit, main

__all__ = ["analyze", "fit", "main"]

if __name__ == "__main__":
    sys.exit(main())
