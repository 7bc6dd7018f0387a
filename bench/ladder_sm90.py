"""Compile the Ladder's Triton kernels for the H200 (sm_90) without a GPU: registers, spills, SASS.

Runs on any machine whose triton wheel carries the NVIDIA backend (ptxas, cuobjdump); needs no
GPU and no CUDA driver. For each kernel at the network's shapes (encoder 2,000 rows, 1,000
labelled, widths 1000/500/250/10; decoder 1,000 rows, widths 1000/500/250/60/10) and the launch
shape the kernel would get: registers a thread, stack, local memory (spills), shared memory,
warps, and the static SASS instruction counts by opcode (IMAD + LOP3 are mostly the Philox
rounds of the noise; BAR the barriers of the cross-warp column sums).

    python bench/ladder_sm90.py [--kernels fast|seed|all] [--widths 1000,10] [--json OUT] [--check]

The record (--json, kind ``ladder-sm90``) of the shipped kernels is results/ladder-sm90.json.

--check exits 1 if a fast kernel fails to compile or spills (ptxas -v's spill stores and loads, and
cuobjdump's local memory; spills themselves show in its STACK, not LOCAL) (the CPU tests run it).
Must run without TRITON_INTERPRET (the interpreter's kernels cannot be compiled).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
    sys.exit("ladder_sm90.py: unset TRITON_INTERPRET (interpreted kernels cannot be compiled)")

import triton
from triton.backends.compiler import GPUTarget

sys.path.insert(0, str(Path(__file__).resolve().parent))
import ladder_h200  # nvmeter.workloads from this checkout

from nvmeter.workloads import ladder_fast_kernels as fast

seed_kernels = ladder_h200.ladder_kernels
TARGET = GPUTarget("cuda", 90, 32)
BIN = Path(triton.__file__).parent / "backends" / "nvidia" / "bin"
P, I32, F32 = "*fp32", "i32", "fp32"
ENCODER_WIDTHS = (1000, 500, 250, 10)
DECODER_WIDTHS = (1000, 500, 250, 60, 10)


def compile_one(kernel, types: dict, constexprs: dict, num_warps: int) -> dict:
    """Compile ``kernel`` for sm_90; its resource usage and SASS opcode counts."""
    signature = {name: ("constexpr" if name in constexprs else types[name]) for name in kernel.arg_names}
    src = triton.compiler.ASTSource(fn=kernel, signature=signature, constexprs=constexprs)
    backend = triton.compiler.make_backend(TARGET)
    options = backend.parse_options({"num_warps": num_warps})
    compiled = triton.compile(src, target=TARGET, options=options.__dict__)
    with tempfile.TemporaryDirectory() as tmp:
        cubin = Path(tmp) / "k.cubin"
        cubin.write_bytes(compiled.asm["cubin"])
        usage = subprocess.run(
            [BIN / "cuobjdump", "--dump-resource-usage", cubin], capture_output=True, text=True, check=True
        ).stdout
        sass = subprocess.run(
            [BIN / "cuobjdump", "-sass", cubin], capture_output=True, text=True, check=True
        ).stdout
        # spills show in cuobjdump's STACK, not LOCAL: ptxas -v says how many bytes it spilled
        ptx = Path(tmp) / "k.ptx"
        ptx.write_text(compiled.asm["ptx"])
        arch = re.search(r"^\.target\s+(\S+)", compiled.asm["ptx"], re.M).group(1)  # sm_90a
        verbose = subprocess.run(
            [BIN / "ptxas", f"-arch={arch}", "-v", ptx, "-o", Path(tmp) / "v.cubin"],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
    res = {k.lower(): int(v) for k, v in re.findall(r"\b(REG|STACK|SHARED|LOCAL):(\d+)", usage)}
    info = verbose.stdout + verbose.stderr
    res["spill_store_bytes"] = sum(int(v) for v in re.findall(r"(\d+) bytes spill stores", info))
    res["spill_load_bytes"] = sum(int(v) for v in re.findall(r"(\d+) bytes spill loads", info))
    ops = collections.Counter(
        m.group(1).split(".")[0]
        for m in re.finditer(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P[T0-9]+\s+)?([A-Z][A-Z0-9_.]*)", sass)
    )
    keep = ("IMAD", "LOP3", "FFMA", "FMUL", "FADD", "MUFU", "LDG", "STG", "BAR", "SHFL", "REDG", "ATOMG")
    return {
        "num_warps": num_warps,
        **res,
        "sass_instructions": sum(ops.values()),
        "sass_ops": {k: ops.get(k, 0) for k in keep},
    }


def fast_specs(enc_widths, dec_widths):
    for n in enc_widths:
        top = n == 10
        s = fast.launch_shape("fwd", 1000, 2, n)
        yield (
            f"fast encoder fwd n={n}",
            fast._fast_encoder_fwd_kernel,
            dict(z_ptr=P, beta_ptr=P, gamma_ptr=P, seed_ptr="*i64", h_ptr=P, zu_ptr=P, a_ptr=P, stats_ptr=P,
                 gacc_ptr=P, salt=I32, noise_std=F32, eps=F32),
            dict(n_rows=2000, n_labelled=1000, n_cols=n, TOP=top, NOISY=True, SEED_STRIDE=64,
                 **{k: s[k] for k in ("BLOCK_M", "BLOCK_N", "ROW_SPLIT", "SUB_M")}),
            s,
        )  # fmt: skip
        s = fast.launch_shape("enc_bwd", 1000, 2, n)
        yield (
            f"fast encoder bwd n={n}",
            fast._fast_encoder_bwd_kernel,
            dict(z_ptr=P, act_ptr=P, stats_ptr=P, gamma_ptr=P, gh_ptr=P, gzu_ptr=P, gx_ptr=P, gacc_ptr=P),
            dict(n_rows=2000, n_labelled=1000, n_cols=n, TOP=top, BLOCK_M=s["BLOCK_M"], BLOCK_N=s["BLOCK_N"]),
            s,
        )  # fmt: skip
    for n in dec_widths:
        s = fast.launch_shape("fwd", 1000, 1, n)
        yield (
            f"fast decoder fwd n={n}",
            fast._fast_decoder_fwd_kernel,
            dict(v_ptr=P, zn_ptr=P, p_ptr=P, out_ptr=P, stats_ptr=P, eps=F32),
            dict(n_rows=1000, n_cols=n, LEAK=0.1,
                 **{k: s[k] for k in ("BLOCK_M", "BLOCK_N", "ROW_SPLIT", "SUB_M")}),
            s,
        )  # fmt: skip
        s = fast.launch_shape("dec_bwd", 1000, 1, n)
        yield (
            f"fast decoder bwd tile n={n}",
            fast._fast_decoder_bwd_tile_kernel,
            dict(v_ptr=P, zn_ptr=P, p_ptr=P, stats_ptr=P, g_ptr=P, gzn_ptr=P, gu_ptr=P, part_ptr=P),
            dict(n_rows=1000, n_cols=n, LEAK=0.1, BLOCK_M=s["BLOCK_M"], BLOCK_N=s["BLOCK_N"]),
            s,
        )  # fmt: skip
        yield (
            f"fast decoder bwd finish n={n}",
            fast._fast_decoder_bwd_finish_kernel,
            dict(v_ptr=P, stats_ptr=P, gu_ptr=P, part_ptr=P, gv_ptr=P, gp_ptr=P),
            dict(n_rows=1000, n_cols=n, **{k: s[k] for k in ("BLOCK_M", "BLOCK_N", "N_RB", "N_RB_P2")}),
            s,
        )  # fmt: skip


def seed_specs(enc_widths, dec_widths):
    b = seed_kernels.BLOCK_SHAPES
    for n in enc_widths:
        top = n == 10
        grid = {"grid": (triton.cdiv(n, b["n"]),), "num_warps": 4}
        ce = dict(n_rows=2000, n_labelled=1000, n_cols=n, TOP=top, NOISY=True, SEED_STRIDE=64,
                  BLOCK_M=b["encoder_m"], BLOCK_N=b["n"])  # fmt: skip
        yield (
            f"seed encoder fwd n={n}",
            seed_kernels._encoder_fwd_kernel,
            dict(z_ptr=P, beta_ptr=P, gamma_ptr=P, seed_ptr="*i64", h_ptr=P, zu_ptr=P, salt=I32,
                 noise_std=F32, eps=F32),
            ce,
            grid,
        )  # fmt: skip
        yield (
            f"seed encoder bwd n={n}",
            seed_kernels._encoder_bwd_kernel,
            dict(z_ptr=P, beta_ptr=P, gamma_ptr=P, seed_ptr="*i64", gh_ptr=P, gzu_ptr=P, gx_ptr=P,
                 gbeta_ptr=P, ggamma_ptr=P, salt=I32, noise_std=F32, eps=F32),
            ce,
            grid,
        )  # fmt: skip
    for n in dec_widths:
        grid = {"grid": (triton.cdiv(n, b["n"]),), "num_warps": 4}
        ce = dict(n_rows=1000, n_cols=n, LEAK=0.1, BLOCK_M=b["decoder_m"], BLOCK_N=b["n"])
        yield (
            f"seed decoder fwd n={n}",
            seed_kernels._decoder_fwd_kernel,
            dict(v_ptr=P, zn_ptr=P, p_ptr=P, out_ptr=P, eps=F32),
            ce,
            grid,
        )
        yield (
            f"seed decoder bwd n={n}",
            seed_kernels._decoder_bwd_kernel,
            dict(v_ptr=P, zn_ptr=P, p_ptr=P, g_ptr=P, gv_ptr=P, gzn_ptr=P, gp_ptr=P, eps=F32),
            ce,
            grid,
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kernels", choices=("fast", "seed", "all"), default="all")
    parser.add_argument(
        "--widths", default=None, help="comma-separated widths to compile (default: the network's)"
    )
    parser.add_argument("--json", type=Path, default=None, help="write the table here")
    parser.add_argument("--check", action="store_true", help="exit 1 if a fast kernel fails or spills")
    args = parser.parse_args(argv)
    enc, dec = ENCODER_WIDTHS, DECODER_WIDTHS
    if args.widths:
        wanted = {int(w) for w in args.widths.split(",")}
        enc, dec = [n for n in enc if n in wanted], [n for n in dec if n in wanted]
    specs = []
    if args.kernels in ("fast", "all"):
        specs += list(fast_specs(enc, dec))
    if args.kernels in ("seed", "all"):
        specs += list(seed_specs(enc, dec))
    rows, bad = {}, []
    for label, kernel, types, constexprs, shape in specs:
        try:
            row = compile_one(kernel, types, constexprs, shape["num_warps"])
            row["grid"] = list(shape["grid"])
            row["programs"] = shape["grid"][0] * (shape["grid"][1] if len(shape["grid"]) > 1 else 1)
        except Exception as exc:  # report every kernel, then fail
            row = {"error": f"{type(exc).__name__}: {exc}"}
        rows[label] = row
        spilled = row.get("local", 0) + row.get("spill_store_bytes", 0) + row.get("spill_load_bytes", 0)
        if label.startswith("fast") and ("error" in row or spilled > 0):
            bad.append(label)
        print(label, json.dumps(row), flush=True)
    if args.json:
        from nvmeter import provenance, records

        record = {
            **records.header("ladder-sm90"),
            "provenance": provenance.collect().to_dict(),
            "target": "sm_90",
            "triton": triton.__version__,
            "config": dict(fast.CONFIG),
            "kernels": rows,
        }
        records.write_json(args.json, record)
    if args.check and bad:
        print(f"failed or spilled: {', '.join(bad)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
