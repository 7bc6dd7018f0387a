"""Evaluate the MLP methods on a GPU: timed calls on real draws, judged at each method's level.

Run (on the GPU machine, offline, with the data cache carried over)::

    NVMETER_DATA_DIR=/path/to/data python -m nvmeter.workloads.evaluate --out results/

For each method: 2 warm-up calls (foreign data), then 15 timed calls in a seeded secret
order, 11 on MNIST draws and 4 on the hold-out (KMNIST where cached, else Fashion-MNIST;
warm-ups then use Fashion-MNIST draws of other seeds). Each timed call: inputs copied into
the same persistent GPU tensors, the inputs checked, a 256 MiB buffer zeroed (L2 flush), a
device sync, then CUDA events around the method alone; the output is checked after.
One profiled call per method counts its kernels. A method that fails is recorded with
its one-line error and the run goes on. Writes ``workloads-<board>.json`` and
``workloads.log`` in ``--out``; exits 0 if every method passed, 1 if any failed or
errored, 2 on bad usage (no GPU, no data).

``--resume RECORD...`` keeps the finished methods (no error, every draw timed, figures that
agree with their calls: :mod:`nvmeter.workloads.resume`) of earlier records of the same plan
and kind of device, and runs only the others, so a run cut by a time limit loses only
the method it was in; each method names the board it ran on. When nothing is left to run it
merges the records (two GPUs' halves of one evaluation, say) without touching a GPU.
"""

from __future__ import annotations

import argparse
import datetime
import sys
import time
from pathlib import Path

import torch

from nvmeter import errors, provenance, records
from nvmeter.workloads import cache, harness, judge, methods, task, versions
from nvmeter.workloads.judge import RUN_HOLDOUT_DRAWS, RUN_MNIST_DRAWS
from nvmeter.workloads.resume import KIND, Resumed

SCHEMA_VERSION = records.CURRENT[KIND]
# The census profiles one whole call; the plain Ladder at difficulty 4 (9 s; 1,396 kernels a step in
# results/ladder-h200-profile.json x 1,800 steps = ~2.5 million kernels) kept
# the profiler's event processing busy for over 95 s on the H200 (results/workloads-h200.log, 2026-12-01).
CENSUS_MAX_CALL_MS = 5000.0
# Zeroing 256 MiB evicts the H200's 60 MiB (and the A100's 40 MiB) L2 (docs/task.md).
_FLUSH_BYTES = 256 * 2**20


class Log:
    """Progress lines to stdout and to ``workloads.log``."""

    def __init__(self, path: Path) -> None:
        fresh = not path.exists()
        self._f = path.open("a")  # appended: a resumed run keeps the log of the run it resumes
        if not fresh:
            self._f.write(
                f"# --- {datetime.datetime.now(datetime.timezone.utc).isoformat(timespec='seconds')} ---\n"
            )
        self._t0 = time.monotonic()

    def __call__(self, line: str) -> None:
        """Print ``line`` with the seconds since the start, and append it to the log."""
        text = f"[{time.monotonic() - self._t0:7.1f} s] {line}"
        print(text, flush=True)
        self._f.write(text + "\n")
        self._f.flush()

    def close(self) -> None:
        """Close the log file."""
        self._f.close()


def _device(device: torch.device) -> dict:
    """Torch's view of the device the methods run on (the CPU for a dry run)."""
    cuda = device.type == "cuda"
    props = torch.cuda.get_device_properties(device) if cuda else None
    return {
        "type": device.type,
        "index": device.index if cuda else None,
        "name": props.name if cuda else "cpu",
        "memory_mib": props.total_memory / 2**20 if cuda else None,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version(),
    }


def _board(device: torch.device) -> tuple[dict | None, str | None]:
    """The board's NVML identity, or None and why not."""
    if device.type != "cuda":
        return None, "dry run on the CPU"
    try:
        from nvmeter.boards.factory import open_board

        return open_board(device.index).identity().to_dict(), None
    except Exception as exc:  # identity is worth having, not worth failing the run over
        return None, str(exc).splitlines()[0] if str(exc) else type(exc).__name__


class Bench:
    """Persistent input tensors, the flush buffer and timed calls on one device."""

    def __init__(self, device: torch.device, board_uuid: str | None = None) -> None:
        self.device = device
        self.board_uuid = board_uuid
        rows = task.DRAW_ROWS
        self.train_x = torch.empty(rows, task.COMPONENTS, device=device)
        self.train_y = torch.empty(rows, dtype=torch.int64, device=device)
        self.test_x = torch.empty(rows, task.COMPONENTS, device=device)
        self.cuda = device.type == "cuda"
        # on CPU (dry runs and tests only) there is no L2 flush and the host clock times the call
        self.flush = torch.empty(_FLUSH_BYTES if self.cuda else 0, dtype=torch.uint8, device=device)

    def call(self, method, name: str, draw: task.Draw) -> tuple[float, torch.Tensor]:
        """One timed call on ``draw``: (ms, int64 labels). Raises what the harness raises."""
        self.train_x.copy_(torch.from_numpy(draw.train_x))
        self.train_y.copy_(torch.from_numpy(draw.train_y))
        self.test_x.copy_(torch.from_numpy(draw.test_x))
        harness.check_inputs(self.train_x, self.train_y, self.test_x, self.device)
        if not self.cuda:
            t0 = time.perf_counter()
            labels = harness.run(method, self.train_x, self.train_y, self.test_x, name)
            return (time.perf_counter() - t0) * 1e3, harness.check_output(labels, self.test_x, name)
        self.flush.zero_()
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize(self.device)
        start.record()
        labels = harness.run(method, self.train_x, self.train_y, self.test_x, name)
        end.record()
        end.synchronize()
        ms = start.elapsed_time(end)
        return ms, harness.check_output(labels, self.test_x, name)

    def kernels(self, method, draw: task.Draw) -> int | None:
        """GPU kernels one call runs, from the profiler (CUPTI); None if it saw none.

        CUPTI reports the kernels of replayed CUDA graphs one by one, so graph methods count
        their replays; copies and memsets are not counted.
        """
        from torch.profiler import ProfilerActivity, profile

        if not self.cuda:
            return None
        self.train_x.copy_(torch.from_numpy(draw.train_x))
        self.train_y.copy_(torch.from_numpy(draw.train_y))
        self.test_x.copy_(torch.from_numpy(draw.test_x))
        torch.cuda.synchronize(self.device)
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            method(self.train_x, self.train_y, self.test_x)
            torch.cuda.synchronize(self.device)
        events = [
            e for e in prof.events() if getattr(e, "device_type", None) == torch.autograd.DeviceType.CUDA
        ]
        return len(events) or None


def _steps(method) -> int | None:
    """Training steps per call, if the method says so, else None.

    A Ladder method is an object carrying its own recipe (``method.recipe.n_steps``: its
    module holds four); the other methods' modules give ``RECIPE.steps`` or ``STEPS``.
    """
    own = getattr(getattr(method, "recipe", None), "n_steps", None)
    if own is not None:
        return own
    module = sys.modules.get(getattr(method, "__module__", ""), None)
    recipe = getattr(module, "RECIPE", None)
    return recipe.steps if recipe is not None else getattr(module, "STEPS", None)


def evaluate_method(spec: methods.MethodSpec, bench: Bench, plan: task.Plan, draws: dict, log: Log) -> dict:
    """Warm up, time and judge one method; never raises for the method's own failures."""
    out = {
        "title": spec.title,
        "difficulty": spec.difficulty,
        "a100_ms": spec.a100_ms,
        "a100_mnist": spec.a100_mnist,
        "steps": None,
        "warmup_ms": [],
        "calls": [],
        "error": None,
        # each below stays None where it was not measured (a failed method, a CPU dry run)
        "kernels_per_call": None,
        "kernels_per_step": None,
        "verdict": None,
        "mnist_accuracy": None,
        "holdout_accuracy": None,
        "ms_median": None,
        "ms_min": None,
        "ms_max": None,
        "board_uuid": bench.board_uuid,
        "sources": spec.sources(),  # the method's version (workloads record v4)
        "sources_scheme": versions.SCHEME,  # how it was hashed (v5)
    }
    t0 = time.monotonic()
    try:
        method = spec.load()
        out["steps"] = _steps(method)
        for seed in plan.warmup_seeds:
            ms, _ = bench.call(method, spec.name, draws[(plan.warmup_dataset, seed)])
            out["warmup_ms"].append(ms)
            log(f"{spec.name}: warm-up {plan.warmup_dataset} {seed}: {ms:.1f} ms")
        for dataset, seed in plan.order:
            draw = draws[(dataset, seed)]
            ms, labels = bench.call(method, spec.name, draw)
            s = judge.score(draw, labels)
            out["calls"].append(
                {"dataset": dataset, "seed": seed, "ms": ms, "correct": s.correct, "rows": s.rows}
            )
            log(f"{spec.name}: {dataset:7s} {seed}: {ms:8.1f} ms  {s.accuracy:.2%}")
    except errors.NvmeterError as exc:
        out["error"] = str(exc)
        log(f"{spec.name}: FAILED: {exc}")
    except Exception as exc:  # a bug of ours outside the method: record it, go on
        out["error"] = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
        log(f"{spec.name}: FAILED: {out['error']}")
    slowest_ms = max((c["ms"] for c in out["calls"]), default=0.0)
    if out["error"] is None and bench.cuda and slowest_ms > CENSUS_MAX_CALL_MS:
        limit_s = CENSUS_MAX_CALL_MS / 1e3
        log(
            f"{spec.name}: no kernel count (calls over {limit_s:.0f} s: the profiler's processing outlasts "
            "the run's time; bench/ladder_h200.py --parts profile counts a step)"
        )
    elif out["error"] is None and bench.cuda:
        try:
            n = bench.kernels(method, draws[(plan.warmup_dataset, plan.warmup_seeds[0])])
            out["kernels_per_call"] = n
            if n and out["steps"]:
                out["kernels_per_step"] = n / out["steps"]
            log(f"{spec.name}: {n} kernels a call ({out['kernels_per_step'] or 0:.1f} a step)")
        except Exception as exc:
            log(f"{spec.name}: kernel count unavailable ({type(exc).__name__}: {exc})")
    out.update(judge.from_calls(out, len(plan.mnist_seeds), len(plan.holdout_seeds)))
    out["wall_s"] = time.monotonic() - t0
    return out


def _summary(name: str, r: dict) -> str:
    if r["error"] and not r["calls"]:
        return f"{name:15s} ERROR  {r['error']}"
    acc = f"MNIST {r['mnist_accuracy'] or 0:.2%} hold-out {r['holdout_accuracy'] or 0:.2%}"
    status = "PASS" if r["passed"] else "FAIL"
    ms = r["ms_median"] if r["ms_median"] is not None else float("nan")
    return f"{name:15s} {status}  d{r['difficulty']}  {ms:8.1f} ms (A100 {r['a100_ms']:.1f})  {acc}" + (
        f"  error: {r['error']}" if r["error"] else ""
    )


def table(record: dict) -> str:
    """A markdown table of a workloads record (current version) beside the A100 figures (workloads.md)."""
    board = record["device"]["name"]
    lines = [
        f"| method | difficulty | {board} ms (median of calls) | A100 ms | MNIST | A100 MNIST | hold-out | "
        "kernels a step | board | verdict |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, r in record["methods"].items():
        verdict = "PASS" if r["passed"] else ("ERROR" if r["error"] else "FAIL")
        ms = f"{r['ms_median']:.1f}" if r["ms_median"] is not None else "-"
        mnist = f"{r['mnist_accuracy']:.2%}" if r["mnist_accuracy"] is not None else "-"
        hold = f"{r['holdout_accuracy']:.2%}" if r["holdout_accuracy"] is not None else "-"
        kps = f"{r['kernels_per_step']:.0f}" if r["kernels_per_step"] else "-"
        lines.append(
            f"| {name} | {r['difficulty']} | {ms} | {r['a100_ms']:.1f} | {mnist} | {r['a100_mnist']:.2%} | "
            f"{hold} ({record['run']['holdout']}) | {kps} | {(r['board_uuid'] or '-')[:12]} | {verdict} |"
        )
    return "\n".join(lines)


def _record(started, where: dict, run: dict, results: dict, resumed_from: list) -> dict:
    """The run's record so far: provenance, the board, the plan, how it timed, and each method's result."""
    return {
        **records.header(KIND),
        "created_utc": started.isoformat(timespec="seconds"),
        "provenance": where["provenance"].to_dict(),
        "board": where["board"],
        "board_error": where["board_error"],
        "device": where["device"],
        "run": run,
        "timing": {
            "how": "CUDA events around the method alone; before each call the inputs are copied into the "
            "same persistent tensors, checked, a 256 MiB buffer is zeroed (L2 flush) and the device synced",
            "flush_mib": _FLUSH_BYTES / 2**20,
            "warmup_calls": task.WARMUP_CALLS,
        },
        "methods": results,
        "resumed_from": resumed_from,
    }


def _run_dict(seed: int, plan: task.Plan, kmnist: bool) -> dict:
    """The plan as the record stores it: two records can share methods only if these are equal."""
    return {
        "seed": seed,
        "split_seed": seed,
        "holdout": plan.holdout,
        "kmnist_available": kmnist,
        "warmup_dataset": plan.warmup_dataset,
        "warmup_seeds": list(plan.warmup_seeds),
        "mnist_seeds": list(plan.mnist_seeds),
        "holdout_seeds": list(plan.holdout_seeds),
        "order": [list(k) for k in plan.order],
    }


def main(argv: list[str] | None = None) -> int:
    """Run the evaluation; see the module docstring. Returns the exit code."""
    parser = argparse.ArgumentParser(
        prog="python -m nvmeter.workloads.evaluate", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--out", type=Path, help="folder for the JSON record and the log")
    parser.add_argument("--table", type=Path, help="print a markdown table of this record and exit")
    parser.add_argument(
        "--methods", nargs="+", default=None, help=f"a subset of: {' '.join(methods.METHODS)}"
    )
    parser.add_argument(
        "--seed", type=int, default=1, help="run seed: split, draws and call order (default 1)"
    )
    parser.add_argument("--data", type=Path, default=None, help=f"data cache root (default ${cache.ENV_VAR})")
    parser.add_argument(
        "--device",
        default="0",
        help="CUDA index (default 0), or cpu for a dry run of the plumbing (no GPU timing)",
    )
    parser.add_argument("--mnist-draws", type=int, default=RUN_MNIST_DRAWS)
    parser.add_argument("--holdout-draws", type=int, default=RUN_HOLDOUT_DRAWS)
    parser.add_argument(
        "--resume",
        nargs="+",
        type=Path,
        default=None,
        metavar="RECORD",
        help="keep the finished methods of these records (same plan) and run only the rest; with "
        "nothing left to run, merge them into --out without a GPU",
    )
    args = parser.parse_args(argv)
    if args.table is None and args.out is None:
        parser.error("--out is required")
    try:
        if args.table is not None:
            record = records.read_json(args.table, KIND)
            try:
                text = table(record)
            except (KeyError, TypeError, ValueError, AttributeError) as exc:
                raise errors.RecordError(
                    f"{args.table}: not a whole workloads record ({type(exc).__name__}: {exc})"
                ) from exc
            print(text)
            return 0
        args.methods = [methods.spec(m).name for m in (args.methods or methods.METHODS)]
        resumed = Resumed(args.resume or [])
        if resumed.first is not None and all(m in resumed.methods for m in args.methods):
            resumed.check_request(args.seed, args.mnist_draws, args.holdout_draws)
            return _merge(args, resumed)
        return _run(args, resumed)
    except errors.NvmeterError as exc:
        print(f"nvmeter: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("nvmeter: interrupted", file=sys.stderr)
        return 130


def _out_dir(path: Path) -> Path:
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise errors.UsageError(f"cannot create --out {path}: {exc.strerror}") from exc
    return path


def _slug(device_name: str) -> str:
    name = device_name.lower().replace("nvidia ", "")
    return "".join(c if c.isalnum() else "-" for c in name)


def _merge(args, resumed: Resumed) -> int:
    """Every method asked for is finished in the records: write them as one record, touching no GPU."""
    first = resumed.first
    where = {"provenance": provenance.collect(), "board": first["board"], "board_error": first["board_error"],
             "device": first["device"]}  # fmt: skip
    results = {m: resumed.methods[m] for m in args.methods}
    path = _out_dir(args.out) / f"workloads-{_slug(first['device']['name'])}.json"
    started = datetime.datetime.now(datetime.timezone.utc)
    records.write_json(path, _record(started, where, first["run"], results, resumed.sources))
    boards = sorted({r["board_uuid"] or "?" for r in results.values()})
    print(f"merged {len(results)} finished method(s) from {len(resumed.sources)} record(s), "
          f"board(s) {', '.join(boards)} -> {path}")  # fmt: skip
    for name, r in results.items():
        print("  " + _summary(name, r))
    return 0 if all(r["passed"] for r in results.values()) else 1


def _run(args, resumed: Resumed) -> int:
    if args.device == "cpu":
        device = torch.device("cpu")
    elif not args.device.isdigit():
        raise errors.UsageError(f"--device must be a CUDA index or cpu, not {args.device!r}")
    elif not torch.cuda.is_available():
        raise errors.UsageError(
            "no CUDA device visible to torch; this evaluation runs on the GPU (--device cpu: dry run)"
        )
    elif int(args.device) >= torch.cuda.device_count():
        raise errors.UsageError(
            f"--device {args.device}: only {torch.cuda.device_count()} CUDA devices visible"
        )
    else:
        device = torch.device("cuda", int(args.device))
        torch.cuda.set_device(device)
    started = datetime.datetime.now(datetime.timezone.utc)
    board, board_error = _board(device)
    where = {"provenance": provenance.collect(), "board": board, "board_error": board_error}
    where["device"] = _device(device)
    root = args.data
    # the pools load once (~3 s each); a missing dataset is a usage error before any GPU work
    task.draw("mnist", 0, root=root)
    task.draw("fashion", 0, root=root)
    try:
        task.draw("kmnist", 0, root=root)
        kmnist, no_kmnist = True, None
    except errors.UsageError as exc:
        kmnist, no_kmnist = False, str(exc)
    plan = task.Plan.make(args.seed, kmnist, args.mnist_draws, args.holdout_draws)
    run = _run_dict(args.seed, plan, kmnist)
    resumed.check(run, where["device"])  # before --out is touched: a refused resume leaves nothing
    out_dir = _out_dir(args.out)
    log = Log(out_dir / "workloads.log")
    uuid = board["uuid"] if board else f"(no NVML identity: {board_error})"
    log(f"board {where['device']['name']} {uuid}; torch {torch.__version__}, CUDA {torch.version.cuda}")
    if no_kmnist:
        log(
            f"KMNIST not available ({no_kmnist}); hold-out is Fashion-MNIST, "
            "warm-ups use Fashion-MNIST draws of other seeds"
        )
    keys = set(plan.order) | {(plan.warmup_dataset, s) for s in plan.warmup_seeds}
    draws = {(d, s): task.draw(d, s, split_seed=args.seed, root=root) for d, s in sorted(keys)}
    log(f"{len(draws)} draws ready (run seed {args.seed}); hold-out {plan.holdout}")
    bench = Bench(device, board["uuid"] if board else None)
    path = out_dir / f"workloads-{_slug(where['device']['name'])}.json"
    # kept methods are in the record from the start: a run cut before it reaches them loses none
    results = {n: resumed.methods[n] for n in args.methods if n in resumed.methods}

    def save() -> None:
        ordered = {n: results[n] for n in args.methods if n in results}
        records.write_json(path, _record(started, where, run, ordered, resumed.sources))

    if results:
        save()
    for name in args.methods:
        if name in resumed.methods:
            log(f"== {name}: kept (finished on {results[name]['board_uuid'] or 'an unnamed board'})")
            continue
        spec = methods.spec(name)
        log(f"== {name}: {spec.title}, difficulty {spec.difficulty}")
        results[name] = evaluate_method(spec, bench, plan, draws, log)
        log(_summary(name, results[name]))
        torch.cuda.empty_cache()
        save()  # after each method: a run cut by a time limit keeps the methods it finished
    results = {n: results[n] for n in args.methods}
    log("summary:")
    for name, r in results.items():
        log("  " + _summary(name, r))
    log(f"wrote {path}")
    log.close()
    return 0 if all(r["passed"] for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
