"""One rank of the CPU distributed-window tests: gloo over a file store, simulated boards.

Run by tests/test_distributed.py as ``python tests/dist_rank.py RANK WORLD STORE OUT SCENARIO...``;
it runs the scenarios in turn on one process group and writes OUT (JSON): for each scenario,
what the window gave this rank, or the one-line error it raised.
"""

import contextlib
import json
import math
import sys
import time
import traceback
import warnings
from datetime import timedelta

import torch
import torch.distributed as dist

from nvmeter import errors
from nvmeter.boards.factory import simulated_host
from nvmeter.boards.profile import H200_V1
from nvmeter.boards.simulated import Fault, SimConfig
from nvmeter.meter.distributed import DistributedWindow

LOAD_W = 400.0
WORK_S = 2.0
STEPS = 20
TIMEOUT_S = 20.0  # generous: CI machines are slow; the hang scenario sets its own
HANG_TIMEOUT_S = 3.0
H100 = {"name": "Simulated H100", "idle_context_w": 70.0, "counter_period_s": 0.05}


def host_of(scenario: str, rank: int, world: int):
    """This rank's simulated host (its boards on one virtual clock) and what its window names."""
    config = SimConfig(seed=rank, uuid=f"GPU-5157a7ed-0000-4000-8000-{rank:012d}")
    if scenario == "mixed" and rank % 2:
        config = config.with_(uuid=f"GPU-11000000-0000-4000-8000-{rank:012d}", **H100)
    if scenario in ("shared", "hosts"):
        config = config.with_(uuid="GPU-5157a7ed-0000-4000-8000-000000000000")  # one board a host
    if scenario == "two_each":
        boards = simulated_host(2, config=config.with_(uuid=f"GPU-5157a7ed-0000-4000-8000-{rank:010d}00"))
        return boards, "all"
    boards = simulated_host(1, config=config)
    if scenario == "missing" and rank == world - 1:
        return boards, [0, 1]  # this host has one board
    return boards, "all"


def window_kwargs(scenario: str, rank: int) -> dict:
    short = scenario in ("hang", "caught", "reopen")
    # again2, shorter than the window it follows: its group still waits out that one's timeout
    timeout_s = HANG_TIMEOUT_S / 3 if scenario == "again2" else HANG_TIMEOUT_S if short else TIMEOUT_S
    kwargs = {"sync": "none", "timeout_s": timeout_s}
    if scenario == "mixed":
        kwargs["profile"] = {H100["name"]: H200_V1.with_(source="test:H100", counter_period_s=0.05)}
    if scenario == "hosts":
        kwargs.update(host=f"host{rank // 2}", result_on=0)
    if scenario == "result_on":  # the ranks disagree on who holds the result
        kwargs["result_on"] = "all" if rank == 0 else 0
    if scenario == "max_rel_err":  # ... or on the bound they accept
        kwargs["max_rel_err"] = 0.001 if rank == 0 else None
    return kwargs


def run(scenario: str, rank: int, world: int) -> dict:
    boards, devices = host_of(scenario, rank, world)
    clock = boards[0].clock
    for b in boards:
        b.set_context(True)
    clock.sleep(1.0)
    if scenario == "unsupported" and rank == 1:
        boards[0].inject(Fault.NOT_SUPPORTED)
    record: dict = {}
    try:
        with DistributedWindow(devices, available=boards, **window_kwargs(scenario, rank)) as w:
            t0 = clock.now()
            record["entry_virtual_s"] = t0
            for b in boards:
                b.set_load(LOAD_W)
            for _ in range(STEPS - 1 if scenario == "calls" and rank == 1 else STEPS):
                clock.sleep(WORK_S / STEPS)
                w.call()
            for b in boards:
                b.set_load(0.0)
            if scenario == "hang" and rank == world - 1:
                time.sleep(HANG_TIMEOUT_S + 1)  # reaches the exit only after the others gave up
            if scenario in ("caught", "reopen") and rank == world - 1:
                raise ValueError("the rank's own failure")  # caught below: the job goes on
        t1 = t0 + WORK_S + 0.3
        record["truth_j"] = [b.true_energy_j(t0, t1) - b.config.idle_context_w * (t1 - t0) for b in boards]
        record["timing_s"] = w.timing_s
        if w.result is not None:
            record["result"] = w.result.to_dict()
            record["repr"] = repr(w.result)
    except (errors.NvmeterError, ValueError) as exc:
        record["error"] = f"{type(exc).__name__}: {exc}"
    except Exception as exc:  # a test failure, reported rather than lost
        record["error"] = repr(exc)
        record["crash"] = traceback.format_exc()
    record["left_s"] = time.monotonic()
    if scenario in ("hang", "caught"):  # the job's own group still works after the meter's timed out
        total = torch.ones(1)
        dist.all_reduce(total)
        record["all_reduce"] = total.item()
    return record


def main(rank: int, world: int, store: str, out: str, scenarios: list[str]) -> None:
    dist.init_process_group(
        "gloo", init_method=f"file://{store}", rank=rank, world_size=world, timeout=timedelta(seconds=30)
    )
    records = {}
    for scenario in scenarios:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", errors.NvmeterWarning)
            records[scenario] = run(scenario, rank, world)
        records[scenario]["warnings"] = [
            str(w.message) for w in caught if w.category is errors.NvmeterWarning
        ]
        with open(out, "w") as f:  # after each, so a stuck scenario keeps the earlier ones
            json.dump(
                records, f, default=lambda o: None if isinstance(o, float) and not math.isfinite(o) else o
            )
    with contextlib.suppress(Exception):
        dist.destroy_process_group()


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5:])
