"""One rank of the CPU distributed-window tests: gloo over a file store, simulated boards.

Run by tests/test_distributed.py as ``python tests/dist_rank.py RANK WORLD STORE OUT SCENARIO``;
it writes OUT (JSON): what the window gave this rank, or the one-line error it raised.
"""

import contextlib
import json
import math
import os
import sys
import time
import traceback
from datetime import timedelta

import torch.distributed as dist

from nvmeter import errors
from nvmeter.boards.factory import simulated_host
from nvmeter.boards.profile import H200_V1
from nvmeter.boards.simulated import Fault, SimConfig
from nvmeter.meter.distributed import DistributedWindow

LOAD_W = 400.0
WORK_S = 2.0
STEPS = 20
TIMEOUT_S = 4.0


def boards_for(scenario: str, rank: int):
    """This rank's simulated host (boards on one virtual clock) and the boards its window names."""
    config = SimConfig(seed=rank)
    if scenario == "mixed" and rank % 2:
        # another model: its own idle, load and counter period
        config = config.with_(
            name="Simulated H100",
            uuid="GPU-11000000-0000-4000-8000-000000000000",
            idle_context_w=70.0,
            counter_period_s=0.05,
        )
    else:
        config = config.with_(uuid=f"GPU-5157a7ed-0000-4000-8000-{rank:012d}")
    if scenario == "shared":
        config = config.with_(uuid="GPU-5157a7ed-0000-4000-8000-000000000000")  # one board, ranks 0 and 1
    boards = simulated_host(1, config=config)
    if scenario == "missing" and rank == 1:
        return boards, [0, 1]  # this host has one board
    return boards, "all"


def main(rank: int, world: int, store: str, out: str, scenario: str) -> None:
    dist.init_process_group(
        "gloo", init_method=f"file://{store}", rank=rank, world_size=world, timeout=timedelta(seconds=20)
    )
    boards, devices = boards_for(scenario, rank)
    for b in boards:
        b.set_context(True)
    clock = boards[0].clock
    clock.sleep(1.0)
    if scenario == "unsupported" and rank == 1:
        boards[0].inject(Fault.NOT_SUPPORTED)
    record = {"rank": rank, "scenario": scenario}
    kwargs = {}
    if scenario == "mixed":
        kwargs["profile"] = {"Simulated H100": H200_V1.with_(source="test:H100", counter_period_s=0.05)}
    try:
        with DistributedWindow(
            devices,
            available=boards,
            sync="none",
            timeout_s=TIMEOUT_S,
            host=f"host{rank // 2}" if scenario == "hosts" else None,
            **kwargs,
        ) as w:
            t0 = clock.now()
            for b in boards:
                b.set_load(LOAD_W)
            steps = STEPS - 1 if scenario == "calls" and rank == 1 else STEPS
            for _ in range(steps):
                clock.sleep(WORK_S / STEPS)
                w.call()
            for b in boards:
                b.set_load(0.0)
            if scenario == "hang" and rank == world - 1:
                time.sleep(TIMEOUT_S + 3)  # never reaches the exit in time
                record["late"] = True
            if scenario == "die" and rank == world - 1:
                os._exit(0)
        t1 = t0 + WORK_S + 0.3
        record["truth_j"] = sum(b.true_energy_j(t0, t1) - b.config.idle_context_w * (t1 - t0) for b in boards)
        record["timing_s"] = w.timing_s
        if w.result is not None:
            record["result"] = w.result.to_dict()
            record["repr"] = repr(w.result)
            record["table"] = w.result.table()
    except errors.NvmeterError as exc:
        record["error"] = f"{type(exc).__name__}: {exc}"
    except Exception as exc:  # a test failure, reported rather than lost
        record["crash"] = traceback.format_exc()
        record["error"] = repr(exc)
    record["finished_s"] = time.time()
    with open(out, "w") as f:
        json.dump(
            record, f, default=lambda o: None if isinstance(o, float) and not math.isfinite(o) else str(o)
        )
    with contextlib.suppress(Exception):
        dist.destroy_process_group()


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5])
