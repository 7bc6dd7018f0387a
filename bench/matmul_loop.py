"""A torch matmul loop of about 5 s on one GPU: the command ``nvmeter run`` meters on the H200.

    python bench/matmul_loop.py [--seconds 5] [--n 4096]

4096² FP32 products of random operands: the probe's "random" reference load, 676 W on our
H200 (results/probe-h200.json), the regime the error model was fitted in. One device sync
every 50 products (~0.14 s at the probe's 51.1 TFLOP/s), so the loop ends close to
``--seconds``. Prints one JSON line: products, size, seconds.
"""

import argparse
import json
import time

import torch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--n", type=int, default=4096)
    args = parser.parse_args()
    a = torch.randn(args.n, args.n, device="cuda")
    b = torch.randn(args.n, args.n, device="cuda")
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    products = 0
    while time.perf_counter() - t0 < args.seconds:
        for _ in range(50):
            torch.mm(a, b)
        torch.cuda.synchronize()
        products += 50
    seconds = time.perf_counter() - t0
    print(json.dumps({"products": products, "n": args.n, "seconds": seconds}), flush=True)


if __name__ == "__main__":
    main()
