"""Does NVML's per-process utilisation tell an idle foreign CUDA context from one that works?

A window that sees another process's context on its board is not reliable unless the caller says that
process did no work (``others_idle``; ``nvmeter.meter.contexts``). An idle context (a pytest parent, a
notebook, an MPS server) then refuses windows it did not disturb. ``nvmlDeviceGetProcessUtilization``
reports, per process, the SM and memory utilisation of the samples since a timestamp; if an idle
context reads 0 while even light work reads above it, the window could tell the two apart itself.

This starts three child processes on one GPU, each with a CUDA context: ``idle`` (a context, then
sleep), ``light`` (one 256² product every 50 ms: a few per cent of the SMs' time) and ``busy`` (4096²
FP32 products back to back), and polls the call every ``--poll-s`` from this process (NVML only, no
context) for ``--seconds``. Per poll it keeps the call's cost and every sample it returned. This
script reads NVML directly, not through ``nvmeter.boards.nvml``: it asks about a call the meter does
not use yet. Nothing here is part of the meter.

    python bench/process_utilization.py --out process-utilization.json [--seconds 12] [--device 0]
    python bench/process_utilization.py --table results/process-utilization-h200.json

The record (kind ``bench-process-utilization``, schema_version 1): the board's UUID, whether this
process is in the host's pid namespace (where it is not, NVML's pids are not the children's, and the
table cannot name the roles), the children's pids by role, and per poll ``t_s`` (since the first
poll), ``cost_ms`` and ``samples`` (pid, NVML timestamp in µs, SM %, memory %), or ``error`` where the
call raised (NVML's NOT_FOUND when no sample is new).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

from nvmeter.meter import contexts

SCHEMA_VERSION = 1
KIND = "bench-process-utilization"

# Each child: a context, a line on stdout once it has one, then its role until the parent ends it.
CHILD = """
import sys, time, torch
role = sys.argv[1]
torch.cuda.set_device(int(sys.argv[2]))
size = {"busy": 4096, "light": 256}.get(role, 8)
a = torch.randn(size, size, device="cuda")
torch.cuda.synchronize()
print("ready", flush=True)
while True:
    if role == "busy":
        for _ in range(8):
            a @ a
        torch.cuda.synchronize()
    elif role == "light":
        a @ a
        torch.cuda.synchronize()
        time.sleep(0.05)
    else:
        time.sleep(1.0)
"""
ROLES = ("idle", "light", "busy")


def _start(role: str, device: int) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, role, str(device)], stdout=subprocess.PIPE, text=True
    )


def _poll(pynvml, handle, since_us: int) -> tuple[dict, int]:
    start = time.perf_counter()
    try:
        rows = pynvml.nvmlDeviceGetProcessUtilization(handle, since_us)
        error = None
    except pynvml.NVMLError as exc:
        rows, error = [], str(exc)
    cost_ms = (time.perf_counter() - start) * 1e3
    samples = [[int(r.pid), int(r.timeStamp), int(r.smUtil), int(r.memUtil)] for r in rows]
    poll = {"cost_ms": round(cost_ms, 3), "samples": samples}
    if error:
        poll["error"] = error
    return poll, max([since_us] + [s[1] for s in samples])


def run(seconds: float, poll_s: float, device: int) -> dict:
    import pynvml

    pynvml.nvmlInit()
    handle = pynvml.nvmlDeviceGetHandleByIndex(device)
    uuid = pynvml.nvmlDeviceGetUUID(handle)
    uuid = uuid.decode() if isinstance(uuid, bytes) else uuid
    children = {role: _start(role, device) for role in ROLES}
    try:
        for role, child in children.items():
            if child.stdout.readline().strip() != "ready":
                raise SystemExit(f"the {role} child did not start a CUDA context")
        since_us, polls, first = 0, [], time.perf_counter()
        _, since_us = _poll(pynvml, handle, since_us)  # drop what came before all three ran
        while time.perf_counter() - first < seconds:
            time.sleep(poll_s)
            poll, since_us = _poll(pynvml, handle, since_us)
            poll["t_s"] = round(time.perf_counter() - first, 3)
            polls.append(poll)
            print(f"{poll['t_s']:6.2f} s  {poll['cost_ms']:.2f} ms  {poll['samples']}", flush=True)
    finally:
        for child in children.values():
            child.kill()
            child.wait()
        pynvml.nvmlShutdown()
    pids = {role: child.pid for role, child in children.items()}
    return {
        "kind": KIND,
        "schema_version": SCHEMA_VERSION,
        "board": uuid,
        "host_pid_namespace": contexts._host_namespace(),  # else NVML's pids are not these
        "pids": pids,
        "polls": polls,
    }


def table(record: dict) -> str:
    role_of = {pid: role for role, pid in record["pids"].items()}
    lines = [
        "| role | polls with a sample | SM % median / max | memory % median / max |",
        "| --- | --- | --- | --- |",
    ]
    for role in ROLES:
        pid = record["pids"][role]
        seen = [s for p in record["polls"] for s in p["samples"] if s[0] == pid]
        with_sample = sum(any(s[0] == pid for s in p["samples"]) for p in record["polls"])
        sm, mem = [s[2] for s in seen] or [0], [s[3] for s in seen] or [0]
        lines.append(
            f"| {role} | {with_sample} of {len(record['polls'])} | {statistics.median(sm):g} / {max(sm)} "
            f"| {statistics.median(mem):g} / {max(mem)} |"
        )
    others = {s[0] for p in record["polls"] for s in p["samples"]} - set(role_of)
    costs = [p["cost_ms"] for p in record["polls"]]
    lines.append(f"\ncall cost: median {statistics.median(costs):.2f} ms, max {max(costs):.2f} ms")
    if record.get("host_pid_namespace") is False:
        lines.append("not in the host's pid namespace: NVML's pids are not the children's")
    if others:
        lines.append(f"samples of other pids: {sorted(others)}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path)
    parser.add_argument("--table", type=Path, help="print the table of a record and exit")
    parser.add_argument("--seconds", type=float, default=12.0)
    parser.add_argument("--poll-s", type=float, default=0.5)
    parser.add_argument("--device", type=int, default=0)
    args = parser.parse_args(argv)
    if args.table:
        print(table(json.loads(args.table.read_text())))
        return 0
    if args.out is None:
        parser.error("--out or --table is needed")
    record = run(args.seconds, args.poll_s, args.device)
    tmp = args.out.with_suffix(args.out.suffix + ".part")
    tmp.write_text(json.dumps(record, indent=1))
    tmp.replace(args.out)
    print(table(record))
    return 0


if __name__ == "__main__":
    sys.exit(main())
