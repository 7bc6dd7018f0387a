"""The Ladder's training step on the GPU: plain, fused (the seed's kernels) and fast kernels, timed.

NOT YET RUN: written on a machine without a GPU (issue 16, part 1). Next device session, from
the repository root on one H200, the dataset cache carried as .data, in this order (the first two
lines fit one device call of under 10 minutes, as does each of the others;
bench/device/ladder_fast_h200.sh runs them as PART=bench, PART=sweep and PART=evaluate):

    NVMETER_DATA_DIR=.data python -m pytest -m gpu -o addopts="" -p no:cacheprovider -v -rs \\
        tests/test_ladder_gpu.py | tee results/gpu-tests/ladder-fast.log
    python bench/ladder_step.py --out results/ladder-step-h200 --parts check,step,profile,layers \\
        | tee results/ladder-step-h200.log
    python bench/ladder_step.py --out results/ladder-sweep-h200 --parts sweep \\
        | tee results/ladder-sweep-h200.log
    NVMETER_DATA_DIR=.data python -m nvmeter.workloads.evaluate --out results/ladder-fast-h200 \\
        --methods ladder_d3_fast ladder_d4_fast
    nvmeter score ladder_d3_fast --runs 3 --json results/score-h200/ladder_d3_fast
    nvmeter score ladder_d4_fast --runs 3 --json results/score-h200/ladder_d4_fast

If the sweep finds a launch shape clearly faster than the shipped one, change
ladder_fast_kernels.CONFIG's defaults (and the tests' expected grids) and commit before the
evaluation, so the judged and scored rows run the shipped code.

The evaluator judges accuracy on the evaluation draws (11 MNIST + 4 hold-out, run seed 1) and
times each call; ``nvmeter score`` measures energy (bench/device/score_h200.sh wraps it).
Nothing is tuned on the evaluation draws: the sweep below times synthetic data only.

Writes ``ladder_step.json`` (kind ``ladder-step``, docs/formats.md) under --out, saved after
every variant and every part (a crash keeps what came before). Parts, each failing on its own
with its traceback recorded:

* ``check``: the fast kernels against the plain PyTorch layers at the network's shapes (every
  encoder and decoder width), forward and gradients, float32 and float64 references; the
  in-kernel noise against the seed kernels' (same Philox draws); whole-network gradients, fast
  vs plain (noise 0, TF32 off) and fast vs fused (noise 0.3).
* ``step``: per variant (plain, fused, fast), one captured training step replayed
  ``--replays`` times (default 300) between CUDA events: ms a step, and that times 900 and
  1,800 steps (the steps alone; a call adds the load, calibration and prediction).
* ``profile``: per variant, torch.profiler (CUPTI) over 20 replays: kernels a step, time in
  matmuls / fused kernels / Adam / the rest, gaps, and every kernel's us a step.
* ``layers``: each layer's fused kernels alone at the network's shapes (encoder 2,000 rows,
  noise 0.3; decoder 1,000 rows), seed vs fast, us per kernel per call (profiler, 50 calls).
* ``sweep``: launch shapes of the fast kernels (ladder_fast_kernels.CONFIG overrides): each
  one's per-layer kernel times and its step time, to pick the shipped defaults from.

``--config '{"elems_per_thread": 8}'`` applies CONFIG overrides to every part.
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
# bench/ is not a package; ladder_h200's helpers: draws, timing, the profiler's categories
import ladder_h200

ladder, ladder_kernels, ladder_ops = ladder_h200.ladder, ladder_h200.ladder_kernels, ladder_h200.ladder_ops
from nvmeter.workloads import ladder_fast_kernels  # noqa: E402

DEV = "cuda"
N_LAB = ladder.BATCH_LABELLED
N_ROWS = ladder.BATCH_LABELLED + ladder.BATCH_UNLABELLED
VARIANTS = {"plain": (False, False), "fused": (True, False), "fast": (True, True)}
KERNELS = {"fused": ladder_kernels, "fast": ladder_fast_kernels}
# Launch shapes the sweep tries, most telling first (the shipped CONFIG first; ~30-60 s each,
# mostly compiling).
SWEEP = [
    {},
    {"fwd_target_programs": 264},
    {"elems_per_thread": 8},
    {"elems_per_thread": 32},
    {"min_programs": 1},
    {"decoder_bwd_block_m": 64},
    {"decoder_bwd_block_m": 256, "decoder_bwd_warps": 8},
    {"fwd_target_programs": 1},
    {"block_n": 16},
    {"block_n": 4},
]


def recipe(variant: str) -> ladder.LadderRecipe:
    fused, fast = VARIANTS[variant]
    return ladder.LadderRecipe(fused=fused, fast=fast)


def rel_err(a, b) -> float:
    return ladder_h200.rel_err(a, b)


# -- check --------------------------------------------------------------------------------------
def _unit_noise(module, seed, salt, n):
    z = torch.randn(N_ROWS, n, device=DEV)
    ones, zeros = torch.ones(n, device=DEV), torch.zeros(n, device=DEV)
    noisy, _ = module.encoder_layer(z, zeros, ones, N_LAB, 1.0, seed, salt)
    clean, _ = module.encoder_layer(z, zeros, ones, N_LAB, 0.0, seed, salt)
    return noisy - clean


def part_check(save) -> dict:
    torch.manual_seed(0)
    out: dict = {"encoder": [], "decoder": [], "noise_vs_seed": []}
    seed = torch.tensor([12345], device=DEV)
    sizes = ladder.SIZES
    for i, n in enumerate(sizes[1:]):
        top = i == len(sizes) - 2
        for noise_std in (0.0, ladder.NOISE_STD):
            z = (torch.randn(N_ROWS, n, device=DEV) * 3 + 1).requires_grad_()
            beta = (torch.randn(n, device=DEV) * 0.5).requires_grad_()
            gamma = (torch.rand(n, device=DEV) + 0.5).requires_grad_() if top else None
            leaves = [z, beta] + ([gamma] if top else [])
            h, z_u = ladder_fast_kernels.encoder_layer(z, beta, gamma, N_LAB, noise_std, seed, i)
            g_h, g_zu = torch.randn_like(h), torch.randn_like(z_u)
            grads = torch.autograd.grad((h * g_h).sum() + (z_u * g_zu).sum(), leaves)
            noise = noise_std * _unit_noise(ladder_kernels, seed, i, n) if noise_std else None
            row = {"layer": i + 1, "n": n, "top": top, "noise_std": noise_std}
            for ref_name, dtype in (("f32", torch.float32), ("f64", torch.float64)):
                ref = [t.detach().to(dtype).requires_grad_() for t in leaves]
                h_r, z_u_r = ladder_ops.encoder_layer(
                    ref[0], ref[1], ref[2] if top else None, N_LAB, None if noise is None else noise.to(dtype)
                )
                grads_r = torch.autograd.grad(
                    (h_r * g_h.to(dtype)).sum() + (z_u_r * g_zu.to(dtype)).sum(), ref
                )
                errs = {"h": rel_err(h, h_r), "z_u": rel_err(z_u, z_u_r)}
                for name, g, g_r in zip(("d_z_pre", "d_beta", "d_gamma"), grads, grads_r, strict=False):
                    errs[name] = rel_err(g, g_r)
                row[f"rel_err_vs_{ref_name}"] = errs
            out["encoder"].append(row)
    for i, n in enumerate(sizes):
        v = (torch.randn(ladder.BATCH_UNLABELLED, n, device=DEV) * 2 - 1).requires_grad_()
        zn = torch.randn(ladder.BATCH_UNLABELLED, n, device=DEV).requires_grad_()
        p = torch.randn(17, n, device=DEV).requires_grad_()
        o = ladder_fast_kernels.decoder_layer(v, zn, p)
        g = torch.randn_like(o)
        grads = torch.autograd.grad((o * g).sum(), [v, zn, p])
        row = {"layer": i, "n": n}
        for ref_name, dtype in (("f32", torch.float32), ("f64", torch.float64)):
            ref = [t.detach().to(dtype).requires_grad_() for t in (v, zn, p)]
            o_r = ladder_ops.decoder_layer(*ref)
            grads_r = torch.autograd.grad((o_r * g.to(dtype)).sum(), ref)
            errs = {"z_hat": rel_err(o, o_r)}
            for name, gk, g_r in zip(("d_v", "d_z_noisy", "d_params"), grads, grads_r, strict=True):
                errs[name] = rel_err(gk, g_r)
            row[f"rel_err_vs_{ref_name}"] = errs
        out["decoder"].append(row)
    for n in (1000, 250, 10):
        ours, theirs = _unit_noise(ladder_fast_kernels, seed, 2, n), _unit_noise(ladder_kernels, seed, 2, n)
        out["noise_vs_seed"].append({
            "n": n, "max_abs_diff": (ours - theirs).abs().max().item(), "mean": ours.mean().item(),
            "var": ours.var().item(),
        })  # fmt: skip
    save(out)
    out["network_grads"] = {"fast_vs_plain_noise_0": _network_grads(0.0, "plain")}
    out["network_grads"]["fast_vs_fused_noise_0.3"] = _network_grads(ladder.NOISE_STD, "fused")
    out["worst_rel_err_vs_f32"] = max(
        max(r["rel_err_vs_f32"].values()) for r in out["encoder"] + out["decoder"]
    )
    return out


def _network_grads(noise_std: float, other: str) -> dict:
    """Gradients of the whole loss at full shapes, fast vs ``other`` (same batch, same noise), TF32 off."""
    x_tr, y_tr, x_te, _ = ladder_h200.synthetic_draw(1)
    base = ladder.LadderRecipe(noise_std=noise_std)
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("highest")
    try:
        grads = {}
        for variant in ("fast", other):
            net = ladder.LadderNet(ladder.SIZES, torch.Generator().manual_seed(0)).to(DEV)
            nudge = torch.Generator().manual_seed(1)  # opens the decoder's paths (see test_ladder.py)
            with torch.no_grad():
                for p in net.parameters():
                    p.add_(0.3 * torch.randn(p.shape, generator=nudge).to(DEV))
            key = torch.full((1,), 7, dtype=torch.int64, device=DEV)
            torch.manual_seed(2)  # the input noise (torch.randn_like) is the same for both
            fused, fast = VARIANTS[variant]
            r = ladder.replace(base, fused=fused, fast=fast)
            _, loss = net.loss(x_tr[:N_LAB] * 0.6, y_tr[:N_LAB], x_te[:N_LAB] * 0.6, r, key)
            grads[variant] = (loss.item(), torch.autograd.grad(loss, list(net.parameters())))
    finally:
        torch.set_float32_matmul_precision(before)
    names = [name for name, _ in net.named_parameters()]
    pairs = list(zip(names, grads["fast"][1], grads[other][1], strict=True))
    errs = {name: rel_err(a, b) for name, a, b in pairs}
    # a pre-activation within rounding of a leaky ReLU's kink may take the other slope in one of
    # two float32 implementations: one element off; the norm-relative error sees through it
    norm_errs = {name: ((a.double() - b.double()).norm() / b.double().norm()).item() for name, a, b in pairs}
    return {
        f"loss_{other}": grads[other][0],
        "loss_fast": grads["fast"][0],
        "max_rel_err": max(errs.values()),
        "max_norm_rel_err": max(norm_errs.values()),
        "rel_err_by_param": errs,
        "norm_rel_err_by_param": norm_errs,
    }


# -- step and profile -----------------------------------------------------------------------------
def _trainer(variant: str):
    x_tr, y_tr, x_te, _ = ladder_h200.synthetic_draw(0)
    trainer = ladder.LadderTrainer(recipe(variant), 10000, 10000, DEV)
    t0 = time.perf_counter()
    trainer.load(x_tr, y_tr, x_te)
    torch.cuda.synchronize()
    capture_s = time.perf_counter() - t0
    trainer.run_steps(5)
    trainer.step.zero_()
    torch.cuda.synchronize()
    return trainer, capture_s


def step_ms(trainer, replays: int) -> float:
    trainer.step.zero_()  # the schedules index by the step counter: stay below n_steps
    return ladder_h200._events_ms(lambda: trainer.run_steps(replays)) / replays


def part_step(save, replays: int) -> dict:
    out = {"replays": replays}
    for variant in VARIANTS:
        trainer, capture_s = _trainer(variant)
        times = [step_ms(trainer, replays) for _ in range(3)]
        ms = statistics.median(times)
        out[variant] = {
            "first_load_with_capture_s": capture_s,
            "step_ms_trials": times,
            "step_ms": ms,
            "steps_only_ms_d3": ms * ladder.STEPS_D3,
            "steps_only_ms_d4": ms * ladder.STEPS_D4,
        }
        save(out)
        del trainer
        torch.cuda.empty_cache()
    return out


def _kernel_table(kernels, calls: int) -> dict:
    names: dict[str, float] = {}
    for e in kernels:
        names[e.name[:90]] = names.get(e.name[:90], 0.0) + ladder_h200._kernel_us(e)
    return dict(sorted(((k, v / calls) for k, v in names.items()), key=lambda kv: -kv[1]))


def part_profile(save, replays: int = 20) -> dict:
    from torch.profiler import ProfilerActivity, profile

    out = {}
    for variant in VARIANTS:
        trainer, _ = _trainer(variant)
        trainer.step.zero_()
        with profile(activities=[ProfilerActivity.CUDA, ProfilerActivity.CPU]) as prof:
            trainer.run_steps(replays)
            torch.cuda.synchronize()
        kernels = [
            e
            for e in prof.events()
            if e.device_type == torch.autograd.DeviceType.CUDA and "memcpy" not in e.name.lower()
        ]
        by_cat: dict[str, dict] = {}
        for e in kernels:
            c = by_cat.setdefault(ladder_h200._category(e.name), {"kernels": 0, "time_us": 0.0})
            c["kernels"] += 1
            c["time_us"] += ladder_h200._kernel_us(e)
        total = sum(c["time_us"] for c in by_cat.values()) or float("nan")
        for c in by_cat.values():
            c["kernels_per_step"] = c["kernels"] / replays
            c["us_per_step"] = c["time_us"] / replays
            c["share_of_kernel_time"] = c["time_us"] / total
        gaps = ladder_h200._gaps_us(kernels)
        span = max(e.time_range.end for e in kernels) - min(e.time_range.start for e in kernels)
        out[variant] = {
            "replays": replays,
            "kernels_per_step": len(kernels) / replays,
            "kernel_us_per_step": total / replays,
            "span_us_per_step": span / replays,
            "gap_us_per_step": sum(gaps) / replays,
            "busy_share": total / span,
            "by_category": by_cat,
            "kernels_us_per_step": _kernel_table(kernels, replays),
        }
        save(out)
        del trainer
        torch.cuda.empty_cache()
    return out


# -- per layer and sweep --------------------------------------------------------------------------
def _layer_cases():
    """(name, n, function running one layer's forward and backward) at the network's shapes."""
    sizes = ladder.SIZES
    seed = torch.tensor([3], device=DEV)
    cases = []
    for i, n in enumerate(sizes[1:]):
        top = i == len(sizes) - 2
        z = torch.randn(N_ROWS, n, device=DEV).requires_grad_()
        beta = torch.randn(n, device=DEV).requires_grad_()
        gamma = (torch.rand(n, device=DEV) + 0.5).requires_grad_() if top else None
        leaves = [z, beta] + ([gamma] if top else [])
        g_h, g_zu = torch.randn(N_ROWS, n, device=DEV), torch.randn(N_ROWS - N_LAB, n, device=DEV)

        def enc(module, z=z, beta=beta, gamma=gamma, leaves=leaves, g_h=g_h, g_zu=g_zu, i=i):
            h, z_u = module.encoder_layer(z, beta, gamma, N_LAB, ladder.NOISE_STD, seed, i)
            torch.autograd.grad((h, z_u), leaves, (g_h, g_zu))

        cases.append((f"encoder{i + 1}", n, enc))
    for i, n in enumerate(sizes):
        v = torch.randn(ladder.BATCH_UNLABELLED, n, device=DEV).requires_grad_()
        zn = torch.randn(ladder.BATCH_UNLABELLED, n, device=DEV).requires_grad_()
        p = ladder_ops.identity_combinator(n).to(DEV).requires_grad_()
        g = torch.randn(ladder.BATCH_UNLABELLED, n, device=DEV)

        def dec(module, v=v, zn=zn, p=p, g=g):
            torch.autograd.grad(module.decoder_layer(v, zn, p), [v, zn, p], g)

        cases.append((f"decoder{i}", n, dec))
    return cases


def _layer_times(module, calls: int = 50) -> dict:
    from torch.profiler import ProfilerActivity, profile

    out = {}
    for name, n, fn in _layer_cases():
        for _ in range(3):  # compile
            fn(module)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(calls):
                fn(module)
            torch.cuda.synchronize()
        kernels = [
            e
            for e in prof.events()
            if e.device_type == torch.autograd.DeviceType.CUDA
            and ladder_h200._category(e.name) == "fused_triton"
        ]
        table = _kernel_table(kernels, calls)
        out[name] = {"n": n, "us_per_call": table, "total_us": sum(table.values())}
    out["total_us"] = sum(v["total_us"] for v in out.values() if isinstance(v, dict))
    return out


def part_layers(save) -> dict:
    out = {}
    for variant, module in KERNELS.items():
        out[variant] = _layer_times(module)
        save(out)
    return out


def part_sweep(save, replays: int) -> dict:
    shipped = dict(ladder_fast_kernels.CONFIG)
    out = {"shipped": shipped, "configs": []}
    try:
        for overrides in SWEEP:
            ladder_fast_kernels.CONFIG.clear()
            ladder_fast_kernels.CONFIG.update({**shipped, **overrides})
            row: dict = {"overrides": overrides}
            try:
                row["layers"] = _layer_times(ladder_fast_kernels)
                trainer, _ = _trainer("fast")
                row["step_ms"] = statistics.median(step_ms(trainer, replays) for _ in range(3))
                del trainer
                torch.cuda.empty_cache()
            except Exception as exc:  # one launch shape's failure must not lose the others
                row["error"] = f"{type(exc).__name__}: {exc}"
            out["configs"].append(row)
            save(out)
    finally:
        ladder_fast_kernels.CONFIG.clear()
        ladder_fast_kernels.CONFIG.update(shipped)
    ok = [r for r in out["configs"] if "step_ms" in r]
    if ok:
        best = min(ok, key=lambda r: r["step_ms"])
        out["fastest"] = {"overrides": best["overrides"], "step_ms": best["step_ms"]}
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="folder for ladder_step.json")
    parser.add_argument("--parts", default="check,step,profile,layers,sweep")
    parser.add_argument("--replays", type=int, default=300, help="graph replays per step timing (< 900)")
    parser.add_argument("--config", type=json.loads, default={}, help="ladder_fast_kernels.CONFIG overrides")
    args = parser.parse_args()
    if not 0 < args.replays < ladder.STEPS_D3 - 5:
        parser.error("--replays must lie in (0, 895): the step counter indexes the schedules")
    unknown = set(args.config) - set(ladder_fast_kernels.CONFIG)
    if unknown:
        parser.error(f"--config: unknown keys {sorted(unknown)}; known: {sorted(ladder_fast_kernels.CONFIG)}")
    ladder_fast_kernels.CONFIG.update(args.config)
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "ladder_step.json"
    from nvmeter import provenance, records

    record = {
        **records.header("ladder-step"),
        "provenance": provenance.collect().to_dict(),
        "gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else None,
        "config": dict(ladder_fast_kernels.CONFIG),
        "parts": {},
    }
    if not torch.cuda.is_available():
        print("no CUDA device: nothing to run", file=sys.stderr)
        return 2
    parts = {
        "check": part_check,
        "step": lambda save: part_step(save, args.replays),
        "profile": part_profile,
        "layers": part_layers,
        "sweep": lambda save: part_sweep(save, args.replays),
    }
    unknown = f"unknown part; known: {', '.join(parts)}"
    failed = ladder_h200.run_parts(record, path, parts, args.parts.split(","), unknown)
    print(json.dumps(summary(record), indent=1))
    return 1 if failed else 0


def summary(record: dict) -> dict:
    """The figures to read first: errors, step times, per-layer totals, the sweep's fastest."""
    parts = record["parts"]
    out: dict = {}
    c = parts.get("check", {})
    if c.get("ok"):
        out["worst_rel_err_vs_f32"] = c["worst_rel_err_vs_f32"]
        out["noise_max_abs_diff_vs_seed"] = max(r["max_abs_diff"] for r in c["noise_vs_seed"])
        out["network_grads_max_rel_err"] = {
            k: (v["max_rel_err"], v["max_norm_rel_err"]) for k, v in c["network_grads"].items()
        }
    s = parts.get("step", {})
    for variant in VARIANTS:
        if isinstance(s.get(variant), dict):
            out[f"{variant}_step_ms"] = s[variant]["step_ms"]
    p = parts.get("profile", {})
    for variant in VARIANTS:
        if isinstance(p.get(variant), dict):
            out[f"{variant}_kernel_us_by_category"] = {
                k: v["us_per_step"] for k, v in p[variant]["by_category"].items()
            }
    lay = parts.get("layers", {})
    for variant in KERNELS:
        if isinstance(lay.get(variant), dict):
            out[f"{variant}_layers_total_us"] = lay[variant]["total_us"]
    sw = parts.get("sweep", {})
    if "fastest" in sw:
        out["sweep_fastest"] = sw["fastest"]
    return out


if __name__ == "__main__":
    sys.exit(main())
