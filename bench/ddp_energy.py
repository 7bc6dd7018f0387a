"""A data-parallel job's energy: DistributedWindow against each board's long aligned reference.

Run with torchrun on a host with two GPUs (bench/device/ddp_x2.sh runs both units, ~3 min):

    torchrun --nproc-per-node 2 bench/ddp_energy.py --unit ddp --out DIR
    CUDA_VISIBLE_DEVICES=0 torchrun --nproc-per-node 2 bench/ddp_energy.py --unit shared --out DIR

Unit ``ddp``: one rank a GPU, DDP over NCCL. A step is a training step of an MLP (8 layers of
8192 x 8192, bf16, batch 8192, SGD) followed by a synchronise, so each step's end is known on
the host. In order: warm-up; idle spans on every board at once (both ranks quiescent); a long
aligned reference on each board around steady steps (each rank polls its own board's counter
from a thread while its steps run, and counts the steps between the two counter steps); then
DistributedWindows of ~2 s: "warm" ones (0.5 s of steps just before, the idle given from the
spans) and "default" ones (``DistributedWindow()`` as a user writes it: idle measured by the
window, no warm-up); a second reference; idle spans again.

Unit ``shared``: both ranks on one GPU (gloo: NCCL refuses two ranks on one device). A step is
each rank's 8 bf16 8192^2 products, synchronised, then a gloo all-reduce that keeps the ranks
in lockstep. The board must be counted once: the job's per-step energy is checked against
that one board's reference (counting it per rank would double it).

Checks (per window): the job's energy above idle per step equals the sum of the boards' own
reference per step within the window's combined bound, and within +-1% (2 s windows); the
gather adds under 10 ms to the exit, on every rank; each board draws >= 300 W above idle in
the reference (ddp). Rank 0 writes DIR/ddp-energy.json (saved after each step of the plan;
both units in one file) and appends to DIR/ddp-energy.log.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import threading
import time
from pathlib import Path

import numpy as np

# NVLink multicast stays off on the lent hosts (NVLS and symmetric-memory multicast).
os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")

import torch
import torch.distributed as dist

from nvmeter import records
from nvmeter.boards.factory import open_board
from nvmeter.meter.baseline import IdleBaseline, measure_quiescent
from nvmeter.meter.distributed import DistributedWindow, control_group
from nvmeter.meter.series import merge_samples
from nvmeter.meter.span import AlignedSpan, aligned_edge

WIDTH, DEPTH, BATCH = 8192, 8, 8192
SHARED_PRODUCTS = 8
WINDOW_S = 2.0
WARMUP_S = 0.5
GATHER_LIMIT_S = 0.010
ABOVE_IDLE_MIN_W = 300.0
IDLE_S = 2.0
# (unit, quick): reference length s, warm windows, default windows; ~100 s and ~60 s on two
# H200s, plus each torchrun's start (estimates: the log has the real times)
PLAN = {
    ("ddp", False): (15.0, 3, 3),
    ("shared", False): (10.0, 3, 1),
    ("ddp", True): (6.0, 2, 1),
    ("shared", True): (6.0, 2, 1),
}


class Run:
    """This rank's side of one unit: its board, its steps, rank 0's record and log."""

    def __init__(self, unit: str, out: Path, quick: bool, simulate: bool = False) -> None:
        self.unit, self.quick, self.simulate = unit, quick, simulate
        self.rank = int(os.environ["RANK"])
        self.local = int(os.environ.get("LOCAL_RANK", "0"))
        self.world = int(os.environ["WORLD_SIZE"])
        device = 0 if unit == "shared" else self.local
        if simulate:  # the plumbing on CPU: a simulated board on the host's clock, steps that sleep
            dist.init_process_group("gloo")
            self.board = _LockedBoard(self.local if unit == "ddp" else 0)
            token = torch.zeros(1)
            self.step = lambda: (self.board.step(), dist.all_reduce(token))  # in lockstep, as DDP is
        else:
            torch.cuda.set_device(device)
            dist.init_process_group("gloo" if unit == "shared" else "nccl")
            self.board = open_board(device)
            self.step = _mlp_step() if unit == "ddp" else _shared_step()
        self.ctrl = control_group()  # the meter's own gloo group: the bench's exchanges go there too
        self.uuid = self.board.identity().uuid
        self.json_path, self.log_path = out / "ddp-energy.json", out / "ddp-energy.log"
        self.data: dict = {"unit": unit, "world": self.world, "plan": [], "windows": [], "references": []}

    # -- records -----------------------------------------------------------------
    def log(self, text: str) -> None:
        line = f"[{time.strftime('%H:%M:%S')}] {self.unit} rank {self.rank}: {text}"
        print(line, flush=True)
        if self.rank == 0:
            with self.log_path.open("a") as f:
                f.write(line + "\n")

    def save(self, what: str) -> None:
        """Rank 0 writes the file after each step of the plan (both units share it)."""
        self.data["plan"].append(what)
        if self.rank != 0:
            return
        whole = json.loads(self.json_path.read_text()) if self.json_path.exists() else {"units": {}}
        whole["kind"] = "bench-ddp-energy"  # nvmeter show points such records at their bench script
        whole["units"][self.unit] = self.data
        # compact (records.write_json indents): the file stays well under 1 MB
        tmp = self.json_path.with_suffix(".part")
        tmp.write_text(json.dumps(records._clean(whole), separators=(",", ":"), allow_nan=False))
        os.replace(tmp, self.json_path)

    def gather(self, obj) -> list:
        out = [None] * self.world
        dist.all_gather_object(out, obj, group=self.ctrl)
        return out

    # -- work ----------------------------------------------------------------------
    def steps(self, n: int, on_step=None) -> list[float]:
        ends = []
        for _ in range(n):
            self.step()
            ends.append(time.perf_counter())
            if on_step is not None:
                on_step()
        return ends

    def steps_for(self, seconds: float) -> int:
        """Every rank runs the same number of steps (DDP needs it): rank 0's timing decides."""
        return self.gather(max(1, math.ceil(seconds / self.step_s)))[0]

    def warm_up(self) -> None:
        self.steps(5)
        ends = self.steps(20)
        self.step_s = float(np.median(np.diff(ends)))
        self.steps(self.steps_for(2.0 if self.quick else 3.0))
        self.data["step_s"] = self.gather(self.step_s)
        self.log(f"step {self.step_s * 1e3:.1f} ms")

    def quiet_board(self) -> None:
        if self.simulate:
            self.board.set_load(0.0)
        else:
            torch.cuda.synchronize()

    def quiet(self) -> None:
        self.quiet_board()
        dist.barrier(group=self.ctrl)

    # -- idle and reference -----------------------------------------------------------
    def idle(self, tag: str) -> None:
        self.quiet()
        metered = self.unit == "ddp" or self.rank == 0
        span = measure_quiescent(self.board, IDLE_S) if metered else None
        self.quiet()
        spans = self.gather(span.to_dict() if span else None)
        self.data.setdefault("idle", {})[tag] = spans
        self.log(f"idle {tag}: {span.power_w:.1f} W" if span else f"idle {tag}: rank 0 meters the board")
        self.save(f"idle {tag}")

    def idle_baseline(self, rank: int, tags=("before",)) -> IdleBaseline:
        spans = [AlignedSpan.from_dict(self.data["idle"][t][rank]) for t in tags if t in self.data["idle"]]
        return IdleBaseline.from_spans(spans, "quiescent")

    def reference(self, tag: str, seconds: float) -> None:
        """A long aligned span on this rank's board around steady steps, polled from a thread."""
        n = self.steps_for(seconds + 2.5)
        metered = self.unit == "ddp" or self.rank == 0
        edges: dict = {}
        started = threading.Event()

        def poll():
            time.sleep(0.5)  # well inside the steady steps
            reads = [self.board.power_samples()]
            edges["start"] = aligned_edge(self.board, self.board.clock)
            started.set()
            end_s = edges["start"].t1_s[-1] + seconds
            while time.perf_counter() < end_s:
                time.sleep(min(1.0, max(0.0, end_s - time.perf_counter())))
                reads.append(self.board.power_samples())
            edges["end"] = aligned_edge(self.board, self.board.clock)
            reads.append(self.board.power_samples())
            edges["samples"] = merge_samples(*reads)

        thread = threading.Thread(target=poll, daemon=True) if metered else None
        if thread:
            thread.start()
        ends = self.steps(n)
        if thread:
            thread.join()
        self.quiet()
        mine = None
        if thread:
            span = AlignedSpan(edges["start"], edges["end"], edges["samples"])
            done = np.interp([span.t_a_s, span.t_b_s], ends, np.arange(1, len(ends) + 1))
            mine = {
                "uuid": self.uuid,
                "span": span.to_dict(),
                "steps": float(done[1] - done[0]),
                "inside_steps": bool(ends[0] < span.t_a_s and span.t_b_s < ends[-1]),
            }
        self.data["references"].append({"tag": tag, "ranks": self.gather(mine)})
        self.save(f"reference {tag}")
        self.log(f"reference {tag}: {n} steps")

    # -- windows ------------------------------------------------------------------------
    def window(self, kind: str, i: int) -> None:
        n = self.steps_for(WINDOW_S)
        kwargs: dict = {}
        if kind == "warm":
            idle_rank = self.rank if self.unit == "ddp" else 0
            kwargs["idle"] = {self.uuid: self.idle_baseline(idle_rank)}
            self.steps(self.steps_for(WARMUP_S))
        if self.simulate:
            kwargs.update(devices=[self.board], sync=self.quiet_board)
        t0 = time.perf_counter()
        w = DistributedWindow(**kwargs)
        t_made = time.perf_counter()
        with w:
            t_in = time.perf_counter()
            self.steps(n, w.call)
            t_out = time.perf_counter()
        t_end = time.perf_counter()
        timing = {"construct_s": t_made - t0, "entry_s": t_in - t_made, "exit_s": t_end - t_out, **w.timing_s}
        timings = self.gather(timing)
        job = w.result
        record = {"kind": kind, "index": i, "steps": n, "timing_s": timings, "job": job.to_dict()}
        self.data["windows"].append(record)
        self.save(f"window {kind} {i}")
        self.log(f"window {kind} {i}: {job!r}; gather {max(t['gather_s'] for t in timings) * 1e3:.2f} ms")

    # -- the plan -------------------------------------------------------------------------
    def run(self) -> None:
        ref_s, warm, default = PLAN[(self.unit, self.quick)]
        self.log(f"board {self.uuid}, world {self.world}")
        self.warm_up()
        self.idle("before")
        self.reference("before", ref_s)
        for i in range(warm):
            self.window("warm", i)
        for i in range(default):
            self.window("default", i)
        if not self.quick:
            self.reference("after", ref_s)
        self.idle("after")
        if self.rank == 0:
            self.data["checks"] = checks(self.data)
            self.save("checks")
            for line in summary(self.data):
                self.log(line)
        self.quiet()
        dist.destroy_process_group()


class _LockedBoard:
    """A simulated board on the host's clock, one lock around it (the reference polls from a thread)."""

    LOAD_W = 450.0

    def __init__(self, index: int) -> None:
        from nvmeter.boards.simulated import SimConfig, SimulatedBoard
        from nvmeter.clock import RealClock

        self._board = SimulatedBoard(
            SimConfig(seed=index, uuid=f"GPU-5157a7ed-0000-4000-8000-{index:012d}"), RealClock()
        )
        self._board.set_context(True)
        self._lock = threading.Lock()
        self.clock = self._board.clock

    def __getattr__(self, name):
        method = getattr(self._board, name)
        if not callable(method):
            return method

        def locked(*args, **kwargs):
            with self._lock:
                return method(*args, **kwargs)

        return locked

    def step(self) -> None:
        with self._lock:
            self._board.set_load(self.LOAD_W)
        time.sleep(0.02)


def _mlp_step():
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.manual_seed(0)
    layers = []
    for _ in range(DEPTH):
        layers += [torch.nn.Linear(WIDTH, WIDTH), torch.nn.GELU()]
    model = torch.nn.Sequential(*layers).to(device="cuda", dtype=torch.bfloat16)
    model = DDP(model, device_ids=[torch.cuda.current_device()])
    opt = torch.optim.SGD(model.parameters(), lr=1e-7)
    g = torch.Generator(device="cuda").manual_seed(int(os.environ["RANK"]))
    x = torch.randn(BATCH, WIDTH, device="cuda", dtype=torch.bfloat16, generator=g)

    def step():
        opt.zero_grad(set_to_none=True)
        model(x).float().pow(2).mean().backward()
        opt.step()
        torch.cuda.synchronize()

    return step


def _shared_step():
    g = torch.Generator(device="cuda").manual_seed(int(os.environ["RANK"]))
    a = torch.randn(WIDTH, WIDTH, device="cuda", dtype=torch.bfloat16, generator=g)
    out = torch.empty_like(a)
    token = torch.zeros(1)

    def step():
        for _ in range(SHARED_PRODUCTS):
            torch.matmul(a, a, out=out)
        torch.cuda.synchronize()
        dist.all_reduce(token)  # gloo, on the host: the ranks stay in lockstep

    return step


# -- analysis (rank 0, from the saved data only, so it can be rerun on the file) -----------
def reference_per_step(data: dict) -> dict:
    """Per board and in sum: energy above idle per step, mJ, from each reference."""
    out = []
    for ref in data["references"]:
        boards = {}
        for rank, r in enumerate(ref["ranks"]):
            if r is None:
                continue
            span = AlignedSpan.from_dict(r["span"])
            idle_rank = rank if data["unit"] == "ddp" else 0
            spans = [
                AlignedSpan.from_dict(data["idle"][t][idle_rank])
                for t in ("before", "after")
                if t in data["idle"]
            ]
            idle = IdleBaseline.from_spans(spans, "quiescent")
            above_j = span.energy_j - idle.power_w * span.duration_s
            err_j = idle.err_w * span.duration_s + idle.power_w * span.edge_uncertainty_s
            boards[r["uuid"]] = {
                "per_step_mj": above_j * 1e3 / r["steps"],
                "err_mj": err_j * 1e3 / r["steps"],
                "above_idle_w": above_j / span.duration_s,
                "duration_s": span.duration_s,
                "inside_steps": r["inside_steps"],
            }
        out.append(
            {
                "tag": ref["tag"],
                "boards": boards,
                "per_step_mj": sum(b["per_step_mj"] for b in boards.values()),
                "err_mj": sum(b["err_mj"] for b in boards.values()),
            }
        )
    return {"references": out}


def checks(data: dict) -> dict:
    from nvmeter.meter.jobmeasurement import JobMeasurement

    refs = reference_per_step(data)["references"]
    ref_mj = float(np.mean([r["per_step_mj"] for r in refs]))
    ref_err = (
        max(r["err_mj"] for r in refs)
        + (max(r["per_step_mj"] for r in refs) - min(r["per_step_mj"] for r in refs)) / 2
    )
    windows = []
    for w in data["windows"]:
        job = JobMeasurement.from_dict(w["job"])
        diff = job.per_step_mj - ref_mj
        windows.append(
            {
                "kind": w["kind"],
                "index": w["index"],
                "per_step_mj": job.per_step_mj,
                "per_step_mj_err": job.per_step_mj_err,
                "rel_err": diff / ref_mj,
                "within_bound": abs(diff) <= job.per_step_mj_err + ref_err,
                "within_1pct": abs(diff) <= 0.01 * ref_mj,
                "reliable": job.reliable,
                "reason": job.reason,
                "boards": len(job.boards),
                "shared": {k: list(v) for k, v in job.shared.items()},
                "gather_ms": [t["gather_s"] * 1e3 for t in w["timing_s"]],
                "gather_under_10ms": all(t["gather_s"] < GATHER_LIMIT_S for t in w["timing_s"]),
                "entry_s": [t["entry_s"] for t in w["timing_s"]],
                "exit_s": [t["exit_s"] for t in w["timing_s"]],
                "window_s": job.window_s,
            }
        )
    above_w = [b["above_idle_w"] for r in refs for b in r["boards"].values()]
    return {
        "reference_per_step_mj": ref_mj,
        "reference_err_mj": ref_err,
        "references": refs,
        "windows": windows,
        "boards_above_idle_w": above_w,
        "boards_draw_300w": data["unit"] != "ddp" or all(w >= ABOVE_IDLE_MIN_W for w in above_w),
        "references_inside_steps": all(b["inside_steps"] for r in refs for b in r["boards"].values()),
        "counted_once": data["unit"] != "shared" or all(w["boards"] == 1 for w in windows),
    }


def summary(data: dict) -> list[str]:
    c = data["checks"]
    lines = [f"reference {c['reference_per_step_mj']:,.1f} ± {c['reference_err_mj']:,.1f} mJ/step above idle"]
    for r in c["references"]:
        per = ", ".join(f"{u[:12]} {b['above_idle_w']:.0f} W above idle" for u, b in r["boards"].items())
        lines.append(f"  reference {r['tag']}: {r['per_step_mj']:,.1f} mJ/step ({per})")
    for w in c["windows"]:
        lines.append(
            f"window {w['kind']} {w['index']}: {w['per_step_mj']:,.1f} ± {w['per_step_mj_err']:,.1f} "
            f"mJ/step, {w['rel_err']:+.2%} vs reference; within bound {w['within_bound']}, "
            f"within 1% {w['within_1pct']}; gather {max(w['gather_ms']):.2f} ms; "
            f"entry {max(w['entry_s']):.3f} s, exit {max(w['exit_s']):.3f} s"
        )
    lines.append(
        f"boards >= 300 W above idle: {c['boards_draw_300w']}; counted once: {c['counted_once']}; "
        f"references inside the steps: {c['references_inside_steps']}"
    )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--unit", choices=("ddp", "shared"))
    parser.add_argument("--out", type=Path, help="folder for ddp-energy.json and ddp-energy.log")
    parser.add_argument("--quick", action="store_true", help="shorter references and fewer windows (~1 min)")
    parser.add_argument("--analyze", type=Path, help="recompute the checks of a saved file (no GPU)")
    parser.add_argument(
        "--simulate",
        action="store_true",
        help="the plumbing on CPU (simulated boards, gloo); not the figures",
    )
    args = parser.parse_args()
    if args.analyze:
        whole = json.loads(args.analyze.read_text())
        for data in whole["units"].values():
            data["checks"] = checks(data)
            print("\n".join(summary(data)))
        return
    if args.unit is None or args.out is None:
        parser.error("--unit and --out are needed to run (or --analyze FILE)")
    args.out.mkdir(parents=True, exist_ok=True)
    Run(args.unit, args.out, args.quick, args.simulate).run()


if __name__ == "__main__":
    main()
